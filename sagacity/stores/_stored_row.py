"""A stored row as an entry: its columns compared with its bytes where the two meet.

A store keeps an entry's bytes (sagacity.journal._recipe) and, for lookups, columns that repeat
what the bytes say: saga_id, seq, step, attempt, tool, phase, actor, recorded_at,
prev_hash and hash. The payloads are kept only in the bytes; their columns
(PAYLOAD_COLUMNS) hold the empty string. A column edited without the bytes, or the
bytes without the column, is named here (TamperedEntryError); bytes no sagacity
version writes are UnreadableEntryError.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sagacity._errors import TamperedEntryError, UnreadableEntryError
from sagacity.journal._canonical import DEFAULT_MAX_PAYLOAD_BYTES, one_value_per_key
from sagacity.journal._entry import JournalEntry, render_timestamp
from sagacity.journal._phases import Phase
from sagacity.journal._recipe import (
    HEADER_SIZE,
    MAX_MATERIAL_BYTES,
    PREV_OFFSET,
    TAG_FIELD,
    decode_material,
)

__all__ = ["PAYLOAD_COLUMNS", "row_payloads", "stored_entry"]

PAYLOAD_COLUMNS = ("input_json", "result_json", "error_json")
"""A row keeps these only in its material; their columns hold the empty string."""


def stored_entry(row: Sequence[Any], phase: Phase, recorded_at: datetime) -> JournalEntry:
    """A stored row as an entry, its columns checked against its bytes.

    `row` is the row as stored, in COLUMNS order (saga_id, seq, step, attempt, tool,
    phase, input_json, result_json, error_json, actor_json, recorded_at, prev_hash, hash,
    material; phase and recorded_at as their stored text), `phase` and `recorded_at`
    those two parsed.

    The payloads come from the bytes, decoded (nothing is re-encoded), and every other
    column is compared with the bytes here, where the two meet (row_payloads):
    a column edited without the bytes, or the bytes without the column, raises
    TamperedEntryError naming it; bytes no sagacity version writes raise
    UnreadableEntryError. The entry returned is therefore its bytes, and verify_chain
    checks only the bytes (ChainVerifier(columns_checked=True))."""
    given, result, error = row_payloads(row)
    return JournalEntry(
        row[0], row[1], row[2], row[3], row[4], phase, given, result, error, row[9],
        recorded_at, row[11], row[12], bytes(row[13]),
    )  # fmt: skip


_FIXED = struct.Struct(">27s32sQQQ27s4Q")
"""The header up to the payloads' lengths: everything a row's columns say."""
_PAYLOAD_LENGTHS = struct.Struct(">3Q")


def row_payloads(row: Sequence[Any]) -> tuple[str, str, str]:
    """The payload texts of a stored row (COLUMNS order: saga_id, seq, step, attempt,
    tool, phase, input_json, result_json, error_json, actor_json, recorded_at, prev_hash,
    hash, material; phase and recorded_at as the stored text), after comparing every
    column with the bytes: one pack and two slice comparisons when they agree.

    Raises TamperedEntryError naming the column that disagrees, UnreadableEntryError for
    bytes that are not an entry (a NULL material among them)."""
    material = row[13]
    seq = row[1]
    if type(material) is not bytes:
        if not isinstance(material, bytearray | memoryview):
            held = "NULL" if material is None else type(material).__name__
            raise UnreadableEntryError(
                f"its material column holds {held}, not bytes: written outside sagacity",
                seq,
            )
        material = bytes(material)
    size = len(material)
    try:
        saga = row[0].encode()
        tool = row[4].encode()
        phase = row[5].encode()
        actor = row[9].encode()
        prev = material[PREV_OFFSET : PREV_OFFSET + 32]
        fixed = _FIXED.pack(
            TAG_FIELD, prev, seq, row[2], row[3], row[10].encode(),
            len(saga), len(tool), len(phase), len(actor),
        )  # fmt: skip
        if prev.hex() != row[11]:  # exactly: fromhex would also take upper case
            fixed = b""
        names = saga + tool + phase + actor
    except (ValueError, UnicodeEncodeError, struct.error, TypeError, AttributeError):
        fixed = names = b""  # a column no sagacity version writes: named below
    end = HEADER_SIZE + len(names)
    if (
        fixed
        and material[: HEADER_SIZE - 24] == fixed
        and material[HEADER_SIZE:end] == names
        and row[6] == row[7] == row[8] == ""
        and size <= MAX_MATERIAL_BYTES
    ):
        n_in, n_res, n_err = _PAYLOAD_LENGTHS.unpack_from(material, HEADER_SIZE - 24)
        if end + n_in + n_res + n_err == size and max(n_in, n_res, n_err) <= _PAYLOAD_BYTES:
            try:
                payloads = (
                    material[end : end + n_in].decode(),
                    material[end + n_in : end + n_in + n_res].decode(),
                    material[end + n_in + n_res :].decode(),
                )
            except UnicodeDecodeError:
                pass
            else:
                for name, text in zip(PAYLOAD_COLUMNS, payloads, strict=True):
                    if text != "null":  # most payloads: nothing to parse
                        _readable_payload(name, text, seq)
                return payloads
    _refuse(row, material)
    raise AssertionError("unreachable")  # pragma: no cover


_PAYLOAD_BYTES = DEFAULT_MAX_PAYLOAD_BYTES


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_parse_payload = json.JSONDecoder(
    object_pairs_hook=one_value_per_key(lambda key: f"it repeats the key {key!r}"),
    parse_constant=_no_constant,
).decode
"""json.loads refusing a repeated key and NaN/Infinity: what sagacity never writes."""


def _readable_payload(name: str, text: str, seq: int) -> None:
    """A stored payload must be one JSON value, each object's keys once: a payload that
    is not JSON, or repeats a key ({"paid":5,"paid":500000}), reads as whatever each
    reader's parser makes of it (the first value, the last, an error), so what an
    auditor sees would depend on the tool. Sagacity never writes one; it was written
    outside sagacity, with a hash computed to match, and is refused as unreadable."""
    try:
        _parse_payload(text)
    except (ValueError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise UnreadableEntryError(
            f"its {name} payload is not one JSON value ({reason}): written outside sagacity",
            seq,
        ) from None


def _refuse(row: Sequence[Any], material: bytes) -> None:
    """Why a stored row is not an entry: unreadable bytes, or the first column that
    is not what they say (TamperedEntryError)."""
    seq = row[1]
    try:
        decoded = decode_material(material)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UnreadableEntryError(
            f"its stored bytes are not a sagacity entry ({exc}): written outside sagacity",
            seq,
        ) from None
    said = {
        "saga_id": row[0], "seq": row[1], "step": row[2], "attempt": row[3], "tool": row[4],
        "phase": row[5], "actor_json": row[9], "recorded_at": row[10], "prev_hash": row[11],
    }  # fmt: skip
    decoded["phase"] = decoded["phase"].value
    decoded["recorded_at"] = render_timestamp(decoded["recorded_at"])
    for name in ("seq", "step", "attempt", "prev_hash", "recorded_at", "saga_id", "tool",
                 "phase", "actor_json"):  # fmt: skip
        if said[name] != decoded[name]:
            _tampered(name, seq)
    for name, column in zip(PAYLOAD_COLUMNS, row[6:9], strict=True):
        if column != "":
            _tampered(name, seq)
    raise UnreadableEntryError(  # pragma: no cover - every way to differ is named above
        "its stored bytes do not match its columns: written outside sagacity", seq
    )


def _tampered(column: str, seq: int) -> None:
    raise TamperedEntryError(
        f"its {column} column is not what its stored hashed bytes say: one of the two was "
        "edited without the other",
        seq,
    )
