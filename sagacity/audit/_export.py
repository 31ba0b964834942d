"""Audit export and verification: the journal as evidence someone else can check.

Export writes JSON Lines, one entry per line in its hashed form, payloads as JSON values
(sagacity.audit._export_lines), streamed from the store. Offline verification reads it and
needs nothing else: no database, no sagacity configuration, constant memory in the
number of entries. The format and the rules (contiguous sagas, strict fields, each line
in its exact form) are specified in docs/hash-chain.md, section 4.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

from sagacity._errors import AuditFileError, TamperedEntryError, UnreadableEntryError
from sagacity.audit._export_evidence import CheckpointLine, HeadLine, is_evidence, parse_evidence
from sagacity.audit._export_lines import check_line, hashed_record, record_entry, value_line
from sagacity.audit._export_read import LINE_START, quick_entry
from sagacity.audit._export_writer import entry_line, export_jsonl
from sagacity.journal._canonical import one_value_per_key
from sagacity.journal._chain import BreakReason, ChainVerifier, VerifyReport
from sagacity.journal._entry import JournalEntry, parse_timestamp, render_timestamp
from sagacity.journal._phases import Phase
from sagacity.journal._recipe import counter_out_of_range
from sagacity.journal._verify_rows import verify_rows
from sagacity.stores._base import JournalStore

__all__ = [
    "RECORD_FIELDS",
    "entry_line",
    "export_jsonl",
    "export_lines",
    "read_entries",
    "value_line",
    "verify_all",
    "verify_jsonl",
    "verify_store",
]

Evidence = Callable[[int, HeadLine | CheckpointLine], None]
"""Receives each evidence line of an export (line number, what it holds)."""
_INT_FIELDS = ("seq", "step", "attempt")
_TEXT_FIELDS = ("saga_id", "tool", "phase", "input", "result", "error", "actor", "recorded_at")
_HASH_FIELDS = ("prev_hash", "hash")
RECORD_FIELDS = frozenset(_INT_FIELDS + _TEXT_FIELDS + _HASH_FIELDS)
"""Exactly the fields of an exported entry (besides its format): the thirteen hashed
fields, nothing unverified."""
_PHASES = frozenset(phase.value for phase in Phase)
_HEX64 = re.compile(r"[0-9a-f]{64}")


def verify_store(
    store: JournalStore, saga_id: str, observe: Callable[[JournalEntry], None] | None = None
) -> VerifyReport:
    """Walk one saga's chain as stored. An unknown saga verifies with 0 entries; a row
    that cannot be read as an entry is reported as an UNREADABLE break, not raised.
    `observe` sees every entry read (the decision audit checks signatures with it)."""
    verifier = ChainVerifier(saga_id, columns_checked=store.checks_columns)
    rows = store.stored_rows(saga_id) if observe is None else None
    try:
        if rows is not None:  # rows are checked in place, not made entries
            verify_rows(saga_id, rows, store.entry_of, verifier)
        else:
            for entry in store.entries(saga_id):
                if observe is not None:
                    observe(entry)
                if not verifier.feed(entry):
                    break
    except TamperedEntryError as exc:
        verifier.unreadable(exc.seq, str(exc), BreakReason.TAMPERED)
    except UnreadableEntryError as exc:
        verifier.unreadable(exc.seq, str(exc))
    return verifier.report()


def verify_all(store: JournalStore) -> Iterator[VerifyReport]:
    """One report per saga of the store, in `store.sagas()` order, computed lazily, over
    one connection of the store's (`store.reading()`), held until the last report is
    read or the iterator is closed."""
    with store.reading():
        for saga_id in store.sagas():
            yield verify_store(store, saga_id)


_decode = json.JSONDecoder(
    object_pairs_hook=one_value_per_key(lambda key: f"duplicate field {key!r}")
).decode
"""json.loads refusing a repeated key, built once rather than per line."""


def _parse_line(number: int, line: str) -> JournalEntry | HeadLine | CheckpointLine:
    """One line as its entry, or an evidence line, or AuditFileError saying which line
    and what is wrong."""
    if line.startswith(LINE_START):  # perhaps an entry line, as written
        quick = quick_entry(line)
        if quick is not None:  # exactly the writer's line of `quick` (export_read)
            return quick
    try:
        record = _decode(line)
    except json.JSONDecodeError as exc:
        raise AuditFileError(f"line {number}: not JSON ({exc.msg} at column {exc.colno})") from exc
    except (ValueError, RecursionError) as exc:
        raise AuditFileError(f"line {number}: {exc}") from exc
    if not isinstance(record, dict):
        raise AuditFileError(
            f"line {number}: expected a JSON object (one journal entry), "
            f"got {type(record).__name__}"
        )
    if is_evidence(record):
        return parse_evidence(number, record)
    hashed, verbatim = hashed_record(number, record)  # payloads as their hashed text
    entry = _entry(number, hashed)
    check_line(number, line, hashed, verbatim)
    return entry


def _entry(number: int, record: dict[str, Any]) -> JournalEntry:
    """A record of the thirteen hashed fields (payloads as their text) as an entry."""
    missing = sorted(RECORD_FIELDS - record.keys())
    if missing:
        raise AuditFileError(f"line {number}: missing field(s) {', '.join(missing)}")
    extra = sorted(record.keys() - RECORD_FIELDS)
    if extra:
        raise AuditFileError(
            f"line {number}: unexpected field(s) {', '.join(extra)}; an export carries only "
            "the hashed fields"
        )
    for field in _INT_FIELDS:
        value = record[field]
        if not isinstance(value, int) or isinstance(value, bool):
            raise AuditFileError(
                f"line {number}: field {field} must be an integer, got {type(value).__name__}"
            )
    for field in _TEXT_FIELDS + _HASH_FIELDS:
        value = record[field]
        if value is None and field in _HASH_FIELDS:
            continue
        if not isinstance(value, str):
            kind = "a string or null" if field in _HASH_FIELDS else "a string"
            raise AuditFileError(
                f"line {number}: field {field} must be {kind}, got {type(value).__name__}"
            )
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise AuditFileError(
                    f"line {number}: field {field} is not valid Unicode (a lone surrogate)"
                ) from exc
    if record["phase"] not in _PHASES:
        raise AuditFileError(f"line {number}: unknown phase {record['phase']!r}")
    _check_timestamp(number, record["recorded_at"])
    _check_bytes(number, record)
    try:
        return record_entry(record)
    except ValueError as exc:  # pragma: no cover - the checks above are stricter
        raise AuditFileError(f"line {number}: {exc}") from exc


def _check_bytes(number: int, record: dict[str, Any]) -> None:
    """The fields an entry's bytes hold as numbers: seq, step and attempt in range, and
    prev_hash the 64 hex characters of its 32 bytes."""
    wrong = counter_out_of_range(record["seq"], record["step"], record["attempt"])
    if wrong is not None:
        raise AuditFileError(f"line {number}: {wrong}: the line was altered")
    prev = record["prev_hash"]
    if not isinstance(prev, str) or not _HEX64.fullmatch(prev):
        raise AuditFileError(
            f"line {number}: prev_hash must be 64 lowercase hex characters (its 32 bytes "
            "are hashed): the line was altered"
        )


def _check_timestamp(number: int, text: str) -> None:
    """The file must carry the exact hashed text; the verifier re-renders the instant, so a
    lenient parse of another spelling would verify bytes that are not in the file."""
    try:
        exact = render_timestamp(parse_timestamp(text)) == text
    except ValueError:
        exact = False
    if not exact:
        raise AuditFileError(
            f"line {number}: recorded_at {text!r} is not a UTC timestamp in the form "
            "YYYY-MM-DDTHH:MM:SS.ffffffZ"
        )


def export_lines(raw: Iterable[bytes]) -> Iterator[str]:
    """The lines of an export read in binary (a file opened "rb", stdin's buffer), each
    decoded as UTF-8 on its own so a bad byte is refused naming its line. Text mode
    would turn CRLF into LF and hide that the file is not the bytes exported."""
    for number, line in enumerate(raw, start=1):
        try:
            yield line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise AuditFileError(
                f"line {number}: not UTF-8 (byte {exc.start + 1} of the line); an export is "
                "written in UTF-8"
            ) from None


def read_entries(
    lines: Iterable[str], evidence: Evidence | None = None
) -> Iterator[tuple[int, JournalEntry]]:
    """(line number, entry) for each non-blank entry line, parsed lazily; evidence lines
    (checkpoints, a tree head) go to `evidence`. Raises AuditFileError; a carriage return
    anywhere (CRLF line ends, a lone CR) is refused: an export never writes one."""
    for number, line in enumerate(lines, start=1):
        if "\r" in line:
            raise AuditFileError(
                f"line {number}: holds a carriage return (CRLF line ends?); an export ends "
                "lines with LF only and escapes CR inside strings: the file was altered"
            )
        if line.strip():
            parsed = _parse_line(number, line)
            if isinstance(parsed, JournalEntry):
                yield number, parsed
            elif evidence is not None:
                evidence(number, parsed)


class _Block:
    """The contiguous lines of one saga being verified, and where its first break was."""

    def __init__(self, saga_id: str) -> None:
        # An entry of a file is rebuilt from the line's fields: they are its bytes.
        self.verifier = ChainVerifier(saga_id, columns_checked=True)
        self.broken_line: int | None = None

    def feed(self, number: int, entry: JournalEntry) -> None:
        if self.broken_line is None and not self.verifier.feed(entry):
            self.broken_line = number

    def unreadable(self, number: int, exc: UnreadableEntryError) -> None:
        if self.broken_line is None:
            self.verifier.unreadable(exc.seq, str(exc))
            self.broken_line = number

    def report(self) -> VerifyReport:
        report = self.verifier.report()
        if self.broken_line is None:
            return report
        return replace(report, detail=f"line {self.broken_line}: {report.detail}")


def _resumed(earlier: VerifyReport, number: int, entry: JournalEntry) -> VerifyReport:
    """The report of a saga whose id reappears after another saga's lines."""
    if not earlier.ok:
        return earlier
    return replace(
        earlier,
        ok=False,
        first_broken_seq=earlier.entries + 1,
        reason=BreakReason.WRONG_SAGA,
        detail=(
            f"line {number}: saga resumes with seq {entry.seq} after lines of another saga; "
            "an export keeps each saga's lines together, so lines were moved or files joined"
        ),
    )


def verify_jsonl(
    lines: Iterable[str],
    observe: Callable[[JournalEntry], None] | None = None,
    evidence: Evidence | None = None,
) -> list[VerifyReport]:
    """Verify an export from its lines alone: one report per saga, in order of appearance.

    Pass an open file (or any iterable of lines): the file is read once, line by line, and
    only the current saga's verifier and the finished reports are held. Raises
    AuditFileError for a line that is not an exported entry; an entry whose payload
    `observe` cannot read (UnreadableEntryError) breaks its saga's report there.
    """
    reports: dict[str, VerifyReport] = {}
    current: str | None = None
    block: _Block | None = None  # None while skipping the lines of a resumed saga
    for number, entry in read_entries(lines, evidence):
        if entry.saga_id != current:
            if block is not None and current is not None:
                reports[current] = block.report()
            current = entry.saga_id
            if current in reports:
                reports[current] = _resumed(reports[current], number, entry)
                block = None
            else:
                block = _Block(current)
        try:
            if observe is not None:
                observe(entry)
        except UnreadableEntryError as exc:  # a payload no sagacity writes: this saga only
            if block is not None:
                block.unreadable(number, exc)
            continue
        if block is not None:
            block.feed(number, entry)
    if block is not None and current is not None:
        reports[current] = block.report()
    return list(reports.values())
