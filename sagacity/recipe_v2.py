"""Journal recipe v2: the entry's hashed bytes are what is stored.

Recipe v1 hashes thirteen fields that are rebuilt, encoded and length-prefixed in Python
for every entry each time it is verified; that rebuilding costs about ten times the
SHA-256 itself. Recipe v2 builds the bytes once, when the entry is sealed, and every
store keeps them (`material`, a bytea/BLOB column) beside the columns used for lookups.
Verifying an entry is then one SHA-256 over the stored bytes, a 32-byte comparison at a
fixed offset (the link), and a comparison of the columns with the bytes (one
`struct.unpack_from` for every fixed-width field and every length); reading an entry
back decodes the bytes, it never encodes anything.

Layout (docs/hash-chain.md, "Recipe v2", is the normative text):

    offset  size  field
         0    27  F("sagacity.journal.v2"): uint64 BE 19, then the tag (v1 starts with
                  F("sagacity.journal.v1"), so no v1 material is ever a v2 material)
        27    32  prev_hash, the previous entry's SHA-256 as 32 raw bytes (or GENESIS_V2)
        59     8  seq      uint64 BE
        67     8  step     uint64 BE
        75     8  attempt  uint64 BE
        83    27  recorded_at, ASCII YYYY-MM-DDTHH:MM:SS.ffffffZ (UTC, fixed width)
       110    56  seven uint64 BE byte lengths: saga_id, tool, phase, actor, input,
                  result, error
       166     …  those seven UTF-8 texts, concatenated in that order; nothing after

    hash = lowercase_hex(SHA-256(material))
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sagacity.canonical import DEFAULT_MAX_PAYLOAD_BYTES
from sagacity.entry import MAX_NAME_CHARS, JournalEntry, parse_timestamp, render_timestamp
from sagacity.errors import TamperedEntryError, UnreadableEntryError
from sagacity.phases import Phase

__all__ = [
    "COUNTER_LIMIT",
    "GENESIS_V2",
    "HEADER_SIZE",
    "MAX_MATERIAL_BYTES",
    "PREV_OFFSET",
    "RECIPE_V2_TAG",
    "column_mismatch",
    "counter_out_of_range",
    "decode_material",
    "encode_material",
    "entry_from_material",
    "row_payloads",
    "stored_entry",
]

RECIPE_V2_TAG = "sagacity.journal.v2"
_TAG_FIELD = struct.pack(">Q", len(RECIPE_V2_TAG)) + RECIPE_V2_TAG.encode("ascii")
GENESIS_V2 = hashlib.sha256(b"sagacity.journal.v2.genesis").hexdigest()
"""prev_hash of the first entry of every v2 saga (its raw 32 bytes are in the material)."""

_HEADER = struct.Struct(">27s32sQQQ27s7Q")
HEADER_SIZE = _HEADER.size
PREV_OFFSET = len(_TAG_FIELD)
"""Where the 32 raw bytes of prev_hash start: the link check is one slice."""
_NAME_BYTES = MAX_NAME_CHARS * 4
"""A saga id, tool or phase name (at most 256 characters) is at most this many bytes."""
_ACTOR_BYTES = _NAME_BYTES * 6 + 2
"""An actor is a name as a JSON string: escaping at most sextuples a byte, plus quotes."""
_ERROR_BYTES = DEFAULT_MAX_PAYLOAD_BYTES
MAX_MATERIAL_BYTES = HEADER_SIZE + 3 * _NAME_BYTES + _ACTOR_BYTES + 3 * DEFAULT_MAX_PAYLOAD_BYTES
"""No entry sagacity writes has more bytes than this; a stored one that does was written
outside sagacity and is refused before anything is decoded."""
_LIMITS = (_NAME_BYTES, _NAME_BYTES, _NAME_BYTES, _ACTOR_BYTES) + (DEFAULT_MAX_PAYLOAD_BYTES,) * 3
_PHASES = {phase.value: phase for phase in Phase}
_PHASE_BYTES = {phase: phase.value.encode("ascii") for phase in Phase}


COUNTER_LIMIT = 2**64
"""seq, step and attempt are unsigned 64-bit integers in the material: each must be in
range(COUNTER_LIMIT)."""


def counter_out_of_range(seq: int, step: int, attempt: int) -> str | None:
    """What is wrong with the integers a v2 material packs, or None: a negative one, or
    one no unsigned 64-bit field holds, is no entry sagacity writes."""
    for name, value in (("seq", seq), ("step", step), ("attempt", attempt)):
        if not 0 <= value < COUNTER_LIMIT:
            return f"{name} {value} is outside 0 to 2**64-1, what a recipe-2 entry holds"
    return None


def encode_material(
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
    """The bytes a v2 entry is: hashed, stored and read back as they are.

    Called once per entry, when it is sealed (and by an offline verifier that has only
    the fields, from an export)."""
    texts = [
        saga_id.encode("utf-8"),
        tool.encode("utf-8"),
        phase.encode("utf-8"),
        actor_json.encode("utf-8"),
        input_json.encode("utf-8"),
        result_json.encode("utf-8"),
        error_json.encode("utf-8"),
    ]
    wrong = counter_out_of_range(seq, step, attempt)
    if wrong is not None:
        raise ValueError(wrong)
    stamp = recorded_at.encode("ascii")
    if len(stamp) != 27:
        raise ValueError(f"recorded_at {recorded_at!r} is not the 27-character UTC form")
    prev = bytes.fromhex(prev_hash)
    if len(prev) != 32:
        raise ValueError("prev_hash must be 64 hex characters")
    header = _HEADER.pack(
        _TAG_FIELD, prev, seq, step, attempt, stamp, *(len(text) for text in texts)
    )
    return header + b"".join(texts)


def decode_material(material: bytes) -> dict[str, Any]:
    """The fields of a v2 material, by JournalEntry field name; ValueError says what is
    wrong with bytes no sagacity version writes (wrong tag, lengths that do not add up,
    a text that is not UTF-8, an unknown phase, a timestamp not in the fixed form)."""
    size = len(material)
    if size < HEADER_SIZE:
        raise ValueError(f"{size} bytes is shorter than the {HEADER_SIZE}-byte v2 header")
    if size > MAX_MATERIAL_BYTES:
        raise ValueError(f"{size:,} bytes is over the {MAX_MATERIAL_BYTES:,}-byte limit")
    tag, prev, seq, step, attempt, stamp, *lengths = _HEADER.unpack_from(material)
    if tag != _TAG_FIELD:
        raise ValueError("it does not start with the v2 tag")
    if HEADER_SIZE + sum(lengths) != size:
        raise ValueError(
            f"its lengths add up to {HEADER_SIZE + sum(lengths):,} bytes, it has {size:,}"
        )
    texts: list[str] = []
    at = HEADER_SIZE
    for length, limit in zip(lengths, _LIMITS, strict=True):
        if length > limit:
            raise ValueError(f"a field of {length:,} bytes is over its limit of {limit:,}")
        texts.append(material[at : at + length].decode("utf-8"))
        at += length
    saga_id, tool, phase, actor, input_json, result_json, error_json = texts
    found = _PHASES.get(phase)
    if found is None:
        raise ValueError(f"unknown phase {phase!r}")
    return {
        "saga_id": saga_id,
        "seq": seq,
        "step": step,
        "attempt": attempt,
        "tool": tool,
        "phase": found,
        "input_json": input_json,
        "result_json": result_json,
        "error_json": error_json,
        "actor_json": actor,
        "recorded_at": parse_timestamp(stamp.decode("ascii")),
        "prev_hash": prev.hex(),
    }


def entry_from_material(material: bytes, hash: str, seq: int = 0) -> JournalEntry:
    """A v2 entry read back: every field from the bytes, `hash` as stored. Bytes no
    sagacity version writes raise UnreadableEntryError at `seq` (the row's seq column)."""
    try:
        fields = decode_material(material)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UnreadableEntryError(
            f"its stored v2 bytes are not a sagacity entry ({exc}): written outside sagacity",
            fields_seq(material, seq),
        ) from None
    return JournalEntry(**fields, hash=hash, material=material)


def fields_seq(material: bytes, fallback: int) -> int:
    """The seq a damaged material claims, for a report, else `fallback`."""
    if fallback or len(material) < HEADER_SIZE:
        return fallback
    return int(_HEADER.unpack_from(material)[2])


def column_mismatch(entry: JournalEntry) -> str | None:
    """The first field of `entry` that is not what its v2 bytes say, or None.

    This is verify's column check: a store keeps saga_id, seq, step, attempt, tool,
    phase, actor, recorded_at and prev_hash as columns for lookups, and an entry read
    back carries them; a column edited without the bytes (or the bytes without the
    column) shows here. Cheap by design: one unpack for the fixed fields and lengths,
    the seven texts compared as one slice, the timestamp parsed (not rendered); the
    field is named only on a mismatch."""
    material = entry.material
    try:
        header = _HEADER.unpack_from(material)
        saga = entry.saga_id.encode()
        tool = entry.tool.encode()
        actor = entry.actor_json.encode()
        given = entry.input_json.encode()
        result = entry.result_json.encode()
        error = entry.error_json.encode()
        fixed = (_TAG_FIELD, header[1], entry.seq, entry.step, entry.attempt)
    except (struct.error, UnicodeEncodeError, ValueError):  # no sagacity entry has these
        return _named_mismatch(entry) or "material"
    phase = _PHASE_BYTES[entry.phase]
    texts = (saga, tool, phase, actor, given, result, error)
    if (
        header[:5] == fixed
        and header[1].hex() == entry.prev_hash
        and header[6:] == tuple(map(len, texts))
        and material[HEADER_SIZE:] == b"".join(texts)
        and _STAMP.fullmatch(header[5]) is not None
        and _from_iso(header[5].decode("ascii")) == entry.recorded_at
    ):  # fmt: skip
        return None
    return _named_mismatch(entry) or "material"


def _named_mismatch(entry: JournalEntry) -> str | None:
    """The slow path of column_mismatch: which field disagrees."""
    material = entry.material
    try:
        tag, prev, seq, step, attempt, stamp, *lengths = _HEADER.unpack_from(material)
    except struct.error:
        return "material"
    if tag != _TAG_FIELD or HEADER_SIZE + sum(lengths) != len(material):
        return "material"
    for name, stored in (("seq", seq), ("step", step), ("attempt", attempt)):
        if stored != getattr(entry, name):
            return name
    if prev.hex() != entry.prev_hash:
        return "prev_hash"
    if stamp != _stamp(entry.recorded_at):
        return "recorded_at"
    at = HEADER_SIZE
    for name, length in zip(_TEXT_FIELDS, lengths, strict=True):
        value: str = entry.phase.value if name == "phase" else getattr(entry, name)
        if material[at : at + length] != value.encode("utf-8", "surrogatepass"):
            return name
        at += length
    return None


_TEXT_FIELDS = ("saga_id", "tool", "phase", "actor_json", "input_json", "result_json", "error_json")


def _stamp(moment: datetime) -> bytes:
    return render_timestamp(moment).encode("ascii")


_STAMP = re.compile(rb"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")
"""The one spelling of recorded_at in the bytes (render_timestamp's). Checked, then
parsed and compared as an instant: cheaper than rendering the entry's datetime."""
_from_iso = datetime.fromisoformat


PAYLOAD_COLUMNS = ("input_json", "result_json", "error_json")
"""A v2 row keeps these only in its material; their columns hold the empty string (which
no v1 row holds: a v1 payload column is always JSON text)."""


def stored_entry(row: Sequence[Any], phase: Phase, recorded_at: datetime) -> JournalEntry:
    """A stored row as an entry, its columns checked against its bytes.

    `row` is the row as stored, in COLUMNS order (saga_id, seq, step, attempt, tool,
    phase, input_json, result_json, error_json, actor_json, recorded_at, prev_hash, hash,
    material; phase and recorded_at as their stored text), `phase` and `recorded_at`
    those two parsed. A v1 row (material NULL) is returned as its columns say.

    For a v2 row the payloads come from the bytes, decoded (nothing is re-encoded), and
    every other column is compared with the bytes here, where the two meet (row_payloads):
    a column edited without the bytes, or the bytes without the column, raises
    TamperedEntryError naming it; bytes no sagacity version writes raise
    UnreadableEntryError. The entry returned is therefore its bytes, and verify_chain
    checks only the bytes (ChainVerifier(columns_checked=True))."""
    material = row[13]
    if material is None:
        given, result, error = row[6], row[7], row[8]
    else:
        given, result, error = row_payloads(row)
        material = bytes(material)
    return JournalEntry(
        row[0], row[1], row[2], row[3], row[4], phase, given, result, error, row[9],
        recorded_at, row[11], row[12], material or b"",
    )  # fmt: skip


_FIXED = struct.Struct(">27s32sQQQ27s4Q")
"""The header up to the payloads' lengths: everything a row's columns say."""
_PAYLOAD_LENGTHS = struct.Struct(">3Q")


def row_payloads(row: Sequence[Any]) -> tuple[str, str, str]:
    """The payload texts of a stored v2 row (COLUMNS order: saga_id, seq, step, attempt,
    tool, phase, input_json, result_json, error_json, actor_json, recorded_at, prev_hash,
    hash, material; phase and recorded_at as the stored text), after comparing every
    column with the bytes: one pack and two slice comparisons when they agree.

    Raises TamperedEntryError naming the column that disagrees, UnreadableEntryError for
    bytes that are not a v2 entry."""
    material = row[13]
    seq = row[1]
    if type(material) is not bytes:
        if not isinstance(material, bytearray | memoryview):
            raise UnreadableEntryError(
                f"its material column holds {type(material).__name__}, not bytes: written "
                "outside sagacity",
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
            _TAG_FIELD, prev, seq, row[2], row[3], row[10].encode(),
            len(saga), len(tool), len(phase), len(actor),
        )  # fmt: skip
        if prev.hex() != row[11]:  # exactly: fromhex would also take upper case
            fixed = b""
        names = saga + tool + phase + actor
    except (ValueError, UnicodeEncodeError, struct.error, TypeError):
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


def _one_value_per_key(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"it repeats the key {key!r}")
            seen.add(key)
    return found


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_parse_payload = json.JSONDecoder(
    object_pairs_hook=_one_value_per_key, parse_constant=_no_constant
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
    """Why a stored v2 row is not an entry: unreadable bytes, or the first column that
    is not what they say (TamperedEntryError)."""
    seq = row[1]
    try:
        decoded = decode_material(material)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UnreadableEntryError(
            f"its stored v2 bytes are not a sagacity entry ({exc}): written outside sagacity",
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
        "its stored v2 bytes do not match its columns: written outside sagacity", seq
    )


def _tampered(column: str, seq: int) -> None:
    raise TamperedEntryError(
        f"its {column} column is not what its stored hashed bytes say: one of the two was "
        "edited without the other",
        seq,
    )
