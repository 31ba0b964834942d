"""The hash chain: how an entry is sealed and how a chain is verified.

Recipe v1 (docs/hash-chain.md has the full text and known-answer vectors):
hash = SHA-256 over the length-prefixed UTF-8 fields, in this order, each preceded by its
byte length as an 8-byte big-endian integer:

    "sagacity.journal.v1", saga_id, seq, step, attempt, tool, phase,
    input, result, error, actor, recorded_at, prev_hash

Integers are decimal ASCII; input/result/error/actor are RFC 8785 canonical JSON (so
None and "" differ); recorded_at is fixed-width UTC with microseconds. Length prefixes
make the encoding unambiguous without escaping, and hashing stored canonical text means
verification never re-encodes values. The first entry links to GENESIS_HASH.

Recipe v2 (sagacity.recipe_v2) hashes the entry's stored bytes (`JournalEntry.material`)
instead of rebuilding them: new sagas are sealed with it, a saga keeps the recipe of its
first entry (v1 sagas written before go on in v1), and a chain that mixes the two is
broken (`mixed_recipe`). For a v2 entry verify also checks every field against the
bytes (`tampered`).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from sagacity.entry import EntryDraft, JournalEntry, render_timestamp
from sagacity.phases import Phase
from sagacity.recipe_v2 import GENESIS_V2, PREV_OFFSET, column_mismatch, encode_material

RECIPE_TAG = "sagacity.journal.v1"
GENESIS_HASH = hashlib.sha256(b"sagacity.journal.v1.genesis").hexdigest()
"""prev_hash of every recipe-v1 saga's first entry."""
_sha256 = hashlib.sha256
_PREV_AT, _PREV_END = PREV_OFFSET, PREV_OFFSET + 32
CURRENT_RECIPE = 2
"""The recipe new sagas are sealed with."""
RECIPES = (1, 2)


def genesis(recipe: int) -> str:
    """prev_hash of the first entry of a saga in `recipe`."""
    return GENESIS_V2 if recipe == 2 else GENESIS_HASH


_LENGTH = struct.Struct(">Q").pack


def encode_fields(fields: Iterable[str]) -> bytes:
    parts: list[bytes] = []
    append = parts.append
    for text in fields:
        raw = text.encode("utf-8")
        append(_LENGTH(len(raw)))
        append(raw)
    return b"".join(parts)


def hash_material(
    *,
    saga_id: str,
    seq: int,
    step: int,
    attempt: int,
    tool: str,
    phase: str,
    input_json: str,
    result_json: str,
    error_json: str,
    actor_json: str,
    recorded_at: str,
    prev_hash: str,
) -> bytes:
    """The exact bytes that are hashed for one entry."""
    return encode_fields(
        (
            RECIPE_TAG,
            saga_id,
            str(seq),
            str(step),
            str(attempt),
            tool,
            phase,
            input_json,
            result_json,
            error_json,
            actor_json,
            recorded_at,
            prev_hash,
        )
    )


def _hashed_fields(entry: JournalEntry) -> dict[str, Any]:
    """The fields both recipes hash, as they render them (phase by value, timestamp as text)."""
    return {
        "saga_id": entry.saga_id,
        "seq": entry.seq,
        "step": entry.step,
        "attempt": entry.attempt,
        "tool": entry.tool,
        "phase": entry.phase.value,
        "input_json": entry.input_json,
        "result_json": entry.result_json,
        "error_json": entry.error_json,
        "actor_json": entry.actor_json,
        "recorded_at": render_timestamp(entry.recorded_at),
        "prev_hash": entry.prev_hash,
    }


def entry_material(entry: JournalEntry) -> bytes:
    return hash_material(**_hashed_fields(entry))


def compute_hash(entry: JournalEntry) -> str:
    """The hash `entry` should carry: of its stored bytes (v2), or of its fields (v1)."""
    if entry.material:
        return hashlib.sha256(entry.material).hexdigest()
    return hashlib.sha256(entry_material(entry)).hexdigest()


def reseal(entry: JournalEntry) -> JournalEntry:
    """`entry` with its hash (and, in v2, its stored bytes) recomputed from its fields:
    what anyone who can write the journal can do after editing an entry. For tamper
    tests and tools; a chain alone cannot show it (docs/hash-chain.md section 5)."""
    if entry.material:
        entry = replace(entry, material=v2_material(entry))
    return replace(entry, hash=compute_hash(entry))


def v2_material(entry: JournalEntry) -> bytes:
    """The v2 bytes of `entry`'s fields (what sealing it in v2 stores)."""
    return encode_material(**_hashed_fields(entry))


def seal(
    draft: EntryDraft,
    *,
    seq: int,
    prev_hash: str,
    recorded_at: datetime,
    recipe: int = CURRENT_RECIPE,
) -> JournalEntry:
    """Turn a draft into the entry that follows `prev_hash` at `seq`, in `recipe`. Pure."""
    if seq == 1 and prev_hash != genesis(recipe):
        raise ValueError(
            f"the first entry of a recipe-v{recipe} chain links to {genesis(recipe)[:16]}…, "
            f"not {prev_hash[:16]}…: pass prev_hash=genesis({recipe})"
        )
    moment = draft.recorded_at or recorded_at
    if recipe == 2:  # the bytes first, then the entry, built once
        material = encode_material(
            saga_id=draft.saga_id,
            seq=seq,
            step=draft.step,
            attempt=draft.attempt,
            tool=draft.tool,
            phase=draft.phase.value,
            input_json=draft.input_json,
            result_json=draft.result_json,
            error_json=draft.error_json,
            actor_json=draft.actor_json,
            recorded_at=render_timestamp(moment),
            prev_hash=prev_hash,
        )
        digest = _sha256(material).hexdigest()
    elif recipe == 1:
        material, digest = b"", ""
    else:
        raise ValueError(f"journal recipe {recipe!r}: use one of {RECIPES}")
    entry = JournalEntry(
        saga_id=draft.saga_id,
        seq=seq,
        step=draft.step,
        attempt=draft.attempt,
        tool=draft.tool,
        phase=draft.phase,
        input_json=draft.input_json,
        result_json=draft.result_json,
        error_json=draft.error_json,
        actor_json=draft.actor_json,
        recorded_at=moment,
        prev_hash=prev_hash,
        hash=digest,
        material=material,
    )
    return entry if recipe == 2 else replace(entry, hash=compute_hash(entry))


class BreakReason(StrEnum):
    """Why a chain does not verify. NOT_CHAINED means the entry never carried a hash
    (written outside sagacity); the others mean a chained entry was changed."""

    HASH_MISMATCH = "hash_mismatch"
    BROKEN_LINK = "broken_link"
    GAP = "gap"
    WRONG_SAGA = "wrong_saga"
    NOT_CHAINED = "not_chained"
    AFTER_CLOSE = "after_close"
    UNREADABLE = "unreadable"
    TAMPERED = "tampered"
    """A v2 entry whose fields (a store's columns, an export line's fields) are not what
    its stored hashed bytes say: one of the two was edited without the other."""
    MIXED_RECIPE = "mixed_recipe"
    """An entry in another recipe than the saga's first entry: a chain never mixes them."""


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """Outcome of walking one saga's chain."""

    saga_id: str
    ok: bool
    entries: int
    head_hash: str
    closed: bool
    first_broken_seq: int | None = None
    reason: BreakReason | None = None
    detail: str = ""

    def describe(self) -> str:
        if self.ok:
            state = "closed" if self.closed else "open"
            head = self.head_hash[:16]
            return f"{self.saga_id}: verified {self.entries} entries ({state}), head {head}"
        return (
            f"{self.saga_id}: BROKEN at seq {self.first_broken_seq}: {self.reason}: {self.detail}"
        )


def hash_mismatch_detail(stored: str, actual: str) -> str:
    """Both hashes in full (a prefix of each can look the same when the stored one was
    truncated, padded or upper-cased), and what differs when it is only that."""
    detail = f"stored {stored!r}, content hashes to {actual!r}"
    if stored.lower() == actual:
        return f"{detail} (the stored hash differs only in letter case: it is lowercase hex)"
    if len(stored) != len(actual) == 64:
        return f"{detail} (the stored hash has {len(stored)} characters, not 64)"
    return detail


class ChainVerifier:
    """Incremental verifier: feed entries in seq order, read the report at the end.

    Incremental so that verifying a store or a file streams in constant memory.

    A v2 entry is its stored bytes: verifying it is one SHA-256 of them, compared with
    its hash, and the 32 bytes of its link at a fixed offset, compared with the previous
    entry's digest. Its fields must also be what the bytes say. `columns_checked` says
    the caller already made sure of that where fields and bytes met (a SQL store's
    reader compares every column with the bytes, sagacity.recipe_v2.stored_entry; an
    export's reader rebuilds the bytes from the line's fields); otherwise, for entries
    made or edited in memory, every field is compared here (column_mismatch).
    """

    def __init__(self, saga_id: str, *, columns_checked: bool = False) -> None:
        self.saga_id = saga_id
        self.count = 0
        self.expected_seq = 1
        self.prev_hash = GENESIS_HASH
        self.recipe = 0
        """The saga's recipe, fixed by its first entry (0 before it)."""
        self.closed = False
        self.broken: tuple[int, BreakReason, str] | None = None
        self.columns_checked = columns_checked
        self._prev_raw = b""
        """prev_hash as the 32 bytes a v2 material links with (v2 chains only)."""

    def feed(self, entry: JournalEntry) -> bool:
        """Check one entry; returns False once the chain is broken (stop feeding)."""
        if self.broken is not None:
            return False
        self.count += 1
        material = entry.material
        if (  # the v2 fast path: bytes, hash, link; anything else takes _check
            material
            and self.columns_checked
            and self.recipe == 2
            and entry.seq == self.expected_seq
            and not self.closed
            and entry.saga_id == self.saga_id
        ):
            digest = _sha256(material).digest()
            if material[_PREV_AT:_PREV_END] == self._prev_raw and digest.hex() == entry.hash:
                self._prev_raw = digest
                self.prev_hash = entry.hash
                self.expected_seq += 1
                self.closed = entry.phase is Phase.SAGA_CLOSED
                return True
        problem = self._check(entry)
        if problem is not None:
            self.broken = problem
            return False
        self.expected_seq = entry.seq + 1
        self.prev_hash = entry.hash
        if material:
            self._prev_raw = bytes.fromhex(entry.hash)
        self.closed = entry.phase is Phase.SAGA_CLOSED
        return True

    def _check(self, entry: JournalEntry) -> tuple[int, BreakReason, str] | None:
        seq = self.expected_seq
        recipe = 2 if entry.material else 1
        if recipe != self.recipe:
            if self.recipe:
                return (
                    seq,
                    BreakReason.MIXED_RECIPE,
                    f"entry {entry.seq} is in recipe v{recipe}, the saga's first entry in "
                    f"v{self.recipe}: a chain never changes recipe, so entries were rewritten",
                )
            self.recipe = recipe
            if recipe == 2:
                self.prev_hash = GENESIS_V2
                self._prev_raw = bytes.fromhex(GENESIS_V2)
        if recipe == 2 and not self.columns_checked:
            field = column_mismatch(entry)
            if field is not None:
                return (
                    seq,
                    BreakReason.TAMPERED,
                    f"its {field} is not what its stored hashed bytes say: one of the two "
                    "was edited without the other",
                )
        if entry.saga_id != self.saga_id:
            return (
                seq,
                BreakReason.WRONG_SAGA,
                f"entry of saga {entry.saga_id!r} at seq {entry.seq}",
            )
        if not entry.hash:
            return (
                entry.seq,
                BreakReason.NOT_CHAINED,
                "entry carries no hash: written outside sagacity",
            )
        if entry.seq != seq:
            return (seq, BreakReason.GAP, f"expected seq {seq}, found seq {entry.seq}")
        if self.closed:
            return (seq, BreakReason.AFTER_CLOSE, "entry follows the SAGA_CLOSED entry")
        try:
            actual = compute_hash(entry)
        except (UnicodeEncodeError, ValueError):  # a hand-edited row: a lone surrogate
            actual = "<unencodable>"
        if actual != entry.hash:
            return (
                seq,
                BreakReason.HASH_MISMATCH,
                hash_mismatch_detail(entry.hash, actual),
            )
        if entry.prev_hash != self.prev_hash:
            return (
                seq,
                BreakReason.BROKEN_LINK,
                f"prev_hash {entry.prev_hash[:16]}… does not match seq {seq - 1}'s hash "
                f"{self.prev_hash[:16]}…",
            )
        return None

    def unreadable(
        self, seq: int, detail: str, reason: BreakReason = BreakReason.UNREADABLE
    ) -> None:
        """A stored row could not even be read as an entry, or its payload not as JSON,
        or (`reason` TAMPERED) its columns are not what its v2 bytes say: altered outside
        sagacity. It counts as an entry examined, so a saga whose first row is unreadable
        is reported, not taken for one with no entries."""
        if self.broken is None:
            self.count += 1
            self.broken = (seq, reason, detail)

    def report(self) -> VerifyReport:
        if self.broken is not None:
            seq, reason, detail = self.broken
            return VerifyReport(
                self.saga_id, False, self.count, self.prev_hash, self.closed, seq, reason, detail
            )
        return VerifyReport(self.saga_id, True, self.count, self.prev_hash, self.closed)


def verify_chain(
    saga_id: str, entries: Iterable[JournalEntry], *, columns_checked: bool = False
) -> VerifyReport:
    """Walk `entries` (in stored seq order) as the chain of `saga_id`. With
    `columns_checked`, v2 entries' fields are known to be their bytes' (see
    ChainVerifier) and only the bytes are checked, in a loop that does nothing else."""
    verifier = ChainVerifier(saga_id, columns_checked=columns_checked)
    it = iter(entries)
    for entry in it:
        if not verifier.feed(entry):
            return verifier.report()
        if columns_checked and verifier.recipe == 2:
            break
    else:
        return verifier.report()
    # The v2 fast path of ChainVerifier.feed, inlined: any entry it does not pass goes
    # through feed, which reports it (or passes it) with every check.
    sha256, closing, at, end = _sha256, Phase.SAGA_CLOSED, _PREV_AT, _PREV_END
    prev_raw, expected, count = verifier._prev_raw, verifier.expected_seq, verifier.count
    last_hash, closed = verifier.prev_hash, verifier.closed
    for entry in it:
        material = entry.material
        if material and entry.seq == expected and not closed and entry.saga_id == saga_id:
            digest = sha256(material).digest()
            if material[at:end] == prev_raw and digest.hex() == entry.hash:
                prev_raw, last_hash, expected, count = digest, entry.hash, expected + 1, count + 1
                closed = entry.phase is closing
                continue
        verifier._prev_raw, verifier.expected_seq, verifier.count = prev_raw, expected, count
        verifier.prev_hash, verifier.closed = last_hash, closed
        if not verifier.feed(entry):
            return verifier.report()
        prev_raw, expected, count = verifier._prev_raw, verifier.expected_seq, verifier.count
        last_hash, closed = verifier.prev_hash, verifier.closed
    verifier._prev_raw, verifier.expected_seq, verifier.count = prev_raw, expected, count
    verifier.prev_hash, verifier.closed = last_hash, closed
    return verifier.report()
