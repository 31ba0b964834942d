"""The hash recipe: the bytes a journal entry is, built once and stored as they are.

An entry's bytes (`JournalEntry.material`) are built when it is sealed
(sagacity.journal._chain.seal) and every store keeps them (a bytea/BLOB column) beside the
columns used for lookups. Its hash is the SHA-256 of those bytes (sagacity.journal._chain,
`entry_hash`, the one place it is computed). Verifying an entry is then one SHA-256
over the stored bytes, a 32-byte comparison at a fixed offset (the link), and a
comparison of the columns with the bytes (one `struct.unpack_from` for every
fixed-width field and every length); reading an entry back decodes the bytes, it never
encodes anything.

Layout (docs/hash-chain.md, section 1, is the normative text):

    offset  size  field
         0    27  F("sagacity.journal.v1"): uint64 BE 19, then the tag
        27    32  prev_hash, the previous entry's SHA-256 as 32 raw bytes (or GENESIS)
        59     8  seq      uint64 BE
        67     8  step     uint64 BE
        75     8  attempt  uint64 BE
        83    27  recorded_at, ASCII YYYY-MM-DDTHH:MM:SS.ffffffZ (UTC, fixed width)
       110    56  seven uint64 BE byte lengths: saga_id, tool, phase, actor, input,
                  result, error
       166     …  those seven UTF-8 texts, concatenated in that order; nothing after

    hash = lowercase_hex(SHA-256(material))

The tag's text is a constant of the format (it domain-separates these bytes from any
other SHA-256 input), not a version that changes.
"""

from __future__ import annotations

import hashlib
import re
import struct
from datetime import datetime
from typing import Any

from sagacity._errors import UnreadableEntryError
from sagacity.journal._canonical import DEFAULT_MAX_PAYLOAD_BYTES
from sagacity.journal._entry import MAX_NAME_CHARS, JournalEntry, parse_timestamp, render_timestamp
from sagacity.journal._phases import Phase

__all__ = [
    "COUNTER_LIMIT",
    "GENESIS",
    "HEADER_SIZE",
    "MAX_MATERIAL_BYTES",
    "PREV_OFFSET",
    "TAG",
    "TAG_FIELD",
    "column_mismatch",
    "counter_out_of_range",
    "decode_material",
    "encode_material",
    "entry_from_material",
    "fields_seq",
]

TAG = "sagacity.journal.v1"
TAG_FIELD = struct.pack(">Q", len(TAG)) + TAG.encode("ascii")
"""The first 27 bytes of every entry: the tag's length, then the tag."""
GENESIS = hashlib.sha256(b"sagacity.journal.v1.genesis").hexdigest()
"""prev_hash of the first entry of every saga (its raw 32 bytes are in the material)."""

_HEADER = struct.Struct(">27s32sQQQ27s7Q")
HEADER_SIZE = _HEADER.size
PREV_OFFSET = len(TAG_FIELD)
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
    """What is wrong with the integers an entry's bytes pack, or None: a negative one, or
    one no unsigned 64-bit field holds, is no entry sagacity writes."""
    for name, value in (("seq", seq), ("step", step), ("attempt", attempt)):
        if not 0 <= value < COUNTER_LIMIT:
            return f"{name} {value} is outside 0 to 2**64-1, what an entry's bytes hold"
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
    """The bytes an entry is: hashed, stored and read back as they are.

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
        TAG_FIELD, prev, seq, step, attempt, stamp, *(len(text) for text in texts)
    )
    return header + b"".join(texts)


def decode_material(material: bytes) -> dict[str, Any]:
    """The fields of an entry's bytes, by JournalEntry field name; ValueError says what is
    wrong with bytes no sagacity version writes (wrong tag, lengths that do not add up,
    a text that is not UTF-8, an unknown phase, a timestamp not in the fixed form)."""
    size = len(material)
    if size < HEADER_SIZE:
        raise ValueError(f"{size} bytes is shorter than the {HEADER_SIZE}-byte header")
    if size > MAX_MATERIAL_BYTES:
        raise ValueError(f"{size:,} bytes is over the {MAX_MATERIAL_BYTES:,}-byte limit")
    tag, prev, seq, step, attempt, stamp, *lengths = _HEADER.unpack_from(material)
    if tag != TAG_FIELD:
        raise ValueError(f"it does not start with the tag {TAG!r}")
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
    """An entry read back: every field from its bytes, `hash` as stored. Bytes no
    sagacity version writes raise UnreadableEntryError at `seq` (the row's seq column)."""
    try:
        fields = decode_material(material)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UnreadableEntryError(
            f"its stored bytes are not a sagacity entry ({exc}): written outside sagacity",
            fields_seq(material, seq),
        ) from None
    return JournalEntry(**fields, hash=hash, material=material)


def fields_seq(material: bytes, fallback: int) -> int:
    """The seq a damaged material claims, for a report, else `fallback`."""
    if fallback or len(material) < HEADER_SIZE:
        return fallback
    return int(_HEADER.unpack_from(material)[2])


def column_mismatch(entry: JournalEntry) -> str | None:
    """The first field of `entry` that is not what its bytes say, or None.

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
        fixed = (TAG_FIELD, header[1], entry.seq, entry.step, entry.attempt)
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
    if tag != TAG_FIELD or HEADER_SIZE + sum(lengths) != len(material):
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
