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
import struct
from datetime import datetime
from typing import Any

from sagacity.canonical import DEFAULT_MAX_PAYLOAD_BYTES
from sagacity.entry import MAX_NAME_CHARS, JournalEntry, parse_timestamp, render_timestamp
from sagacity.errors import UnreadableEntryError
from sagacity.phases import Phase

__all__ = [
    "GENESIS_V2",
    "HEADER_SIZE",
    "MAX_MATERIAL_BYTES",
    "PREV_OFFSET",
    "RECIPE_V2_TAG",
    "column_mismatch",
    "decode_material",
    "encode_material",
    "entry_from_material",
    "payload_texts",
    "stored_entry",
]

RECIPE_V2_TAG = "sagacity.journal.v2"
_TAG_FIELD = struct.pack(">Q", len(RECIPE_V2_TAG)) + RECIPE_V2_TAG.encode("ascii")
GENESIS_V2 = hashlib.sha256(b"sagacity.journal.v2.genesis").hexdigest()
"""prev_hash of the first entry of every v2 saga (its raw 32 bytes are in the material)."""
_GENESIS_V2_RAW = bytes.fromhex(GENESIS_V2)

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
    then slices compared as bytes."""
    material = entry.material
    try:
        tag, prev, seq, step, attempt, stamp, *lengths = _HEADER.unpack_from(material)
    except struct.error:
        return "material"
    if tag != _TAG_FIELD or HEADER_SIZE + sum(lengths) != len(material):
        return "material"
    if seq != entry.seq:
        return "seq"
    if step != entry.step:
        return "step"
    if attempt != entry.attempt:
        return "attempt"
    if prev.hex() != entry.prev_hash:
        return "prev_hash"
    if stamp != _stamp(entry.recorded_at):
        return "recorded_at"
    at = HEADER_SIZE
    for name, length in zip(_TEXT_FIELDS, lengths, strict=True):
        value: str = getattr(entry, name)
        if name == "phase":
            value = entry.phase.value
        if material[at : at + length] != value.encode("utf-8", "surrogatepass"):
            return name
        at += length
    return None


_TEXT_FIELDS = ("saga_id", "tool", "phase", "actor_json", "input_json", "result_json", "error_json")


def _stamp(moment: datetime) -> bytes:
    return render_timestamp(moment).encode("ascii")


def genesis_raw() -> bytes:
    """GENESIS_V2 as the 32 bytes the first material carries."""
    return _GENESIS_V2_RAW


PAYLOAD_COLUMNS = ("input_json", "result_json", "error_json")
"""A v2 row keeps these only in its material; their columns hold the empty string (which
no v1 row holds: a v1 payload column is always JSON text)."""


def payload_texts(material: bytes) -> tuple[str, str, str]:
    """input, result and error of a stored v2 material, decoded (nothing re-encoded).
    ValueError for bytes no sagacity version writes."""
    size = len(material)
    if size < HEADER_SIZE or size > MAX_MATERIAL_BYTES:
        raise ValueError(f"{size:,} bytes is not the size of a v2 entry")
    tag, *_, saga, tool, phase, actor, n_in, n_res, n_err = _HEADER.unpack_from(material)
    if tag != _TAG_FIELD:
        raise ValueError("it does not start with the v2 tag")
    lengths = (saga, tool, phase, actor, n_in, n_res, n_err)
    if HEADER_SIZE + sum(lengths) != size:
        raise ValueError("its field lengths do not add up to its size")
    for length, limit in zip(lengths, _LIMITS, strict=True):
        if length > limit:
            raise ValueError(f"a field of {length:,} bytes is over its limit of {limit:,}")
    at = size - n_in - n_res - n_err
    return (
        material[at : at + n_in].decode("utf-8"),
        material[at + n_in : at + n_in + n_res].decode("utf-8"),
        material[size - n_err :].decode("utf-8"),
    )


def stored_entry(fields: dict[str, Any], material: object) -> JournalEntry:
    """A stored row as an entry: `fields` are its columns by JournalEntry name (phase and
    recorded_at already parsed), `material` its material column (None for a v1 row).

    For a v2 row the payloads come from the bytes, decoded; every other field is the
    column as stored, so verify's column check compares the columns with the bytes. A
    payload column that is not empty on a v2 row was written outside sagacity: it is
    kept, so the column check names it. Raises UnreadableEntryError for a material that
    is not bytes or not a v2 entry."""
    if material is None:
        return JournalEntry(**fields)
    seq = int(fields["seq"])
    if not isinstance(material, bytes | bytearray | memoryview):
        raise UnreadableEntryError(
            f"its material column holds {type(material).__name__}, not bytes: written "
            "outside sagacity",
            seq,
        )
    material = bytes(material)
    try:
        texts = payload_texts(material)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UnreadableEntryError(
            f"its stored v2 bytes are not a sagacity entry ({exc}): written outside sagacity",
            seq,
        ) from None
    for name, text in zip(PAYLOAD_COLUMNS, texts, strict=True):
        if fields[name] == "":
            fields[name] = text
    return JournalEntry(**fields, material=material)
