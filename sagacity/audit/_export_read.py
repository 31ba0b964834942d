"""Reading an entry line in one pass, at about the cost of parsing it.

verify-file holds every entry line to its exact form: the line must be the one string
an export writes for the entry it holds (sagacity.audit._export_lines, docs/hash-chain.md
section 4). The general reader gets there in four passes: a JSON parse that refuses
duplicate keys, the payloads made hashed text, every field checked, then the whole line
rendered again and compared. Those passes cost six times the SHA-256 and the parse
together (issue 16).

`quick_entry` checks the same thing in one left-to-right pass over the line as the
writer lays it out: each key is a fixed literal at its place (the keys of such a line
are known and sorted, `"format":1` is a literal), each value is read by the C scanner
where it starts, and the characters it was read from must be exactly what the writer
writes for that value: `str(n)` for an integer, the JSON string for a text, the RFC 8785
text for a payload (the hashed text; U+0085, U+2028, U+2029 escaped as the writer
escapes them). The line must then end. A line read this way is therefore the writer's
line of the entry returned, character for character, which is the condition the
general reader ends with; a duplicated, missing, extra, reordered or respelled key or
value cannot match a literal or a slice, so it is not taken here.

Anything else (a payload carried as `<field>_text`, a line that is not the exact form,
any value a check does not accept) returns None, and the general reader decides: it
accepts the same lines and refuses the others naming what is wrong. This module only
skips work for lines the writer wrote; it refuses nothing.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from json.encoder import encode_basestring
from typing import Any

from sagacity.audit._export_lines import FORMAT, FORMAT_FIELD, escape_line_breakers, value_text
from sagacity.journal._entry import _TIMESTAMP, JournalEntry, parse_timestamp
from sagacity.journal._phases import Phase
from sagacity.journal._recipe import encode_material

__all__ = ["LINE_START", "quick_entry"]

_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
"""The C scanner: the JSON value starting at an index and where it ends (no whitespace
skipped, so a space anywhere makes the line differ from its literal)."""

LINE_START = '{"actor":'
"""How every entry line begins (its keys are sorted): other lines are not tried."""
_HASH_AFTER_FORMAT = f',"{FORMAT_FIELD}":{FORMAT},"hash":'
_PHASES = {phase.value: phase for phase in Phase}
_HEX64 = re.compile(r"[0-9a-f]{64}")
_FALLBACK = (
    ValueError,  # with JSONDecodeError, UnicodeEncodeError and NotCanonicalError (a payload
    # with no RFC 8785 form)
    StopIteration,  # the scanner found no value
    TypeError,
    RecursionError,
    OverflowError,
    struct.error,  # an integer no uint64 holds
)


def quick_entry(line: str) -> JournalEntry | None:
    """The entry of `line` (one line of an export, with or without its newline) when it
    is exactly the line the writer makes for an entry with every payload as a value, its
    bytes rebuilt from the fields; else None (read it the general way)."""
    try:
        return _read(line)
    except _FALLBACK:  # with _Differs
        return None


class _Differs(ValueError):
    """The line is not the writer's line of an entry with payloads as values."""


def _payload(line: str, literal: str, at: int) -> tuple[str, int]:
    """After `literal` at `at`: the payload's hashed text (its value's RFC 8785 form),
    which the line must spell exactly (line breakers escaped), and where it ends."""
    if not line.startswith(literal, at):
        raise _Differs
    at += len(literal)
    if line.startswith("null", at):  # most payloads: read, spelled and hashed as itself
        return "null", at + 4  # (what follows must be the next literal)
    value, end = _scan(line, at)
    text = value_text(value)
    if line[at:end] != (text if text.isascii() else escape_line_breakers(text)):
        raise _Differs
    return text, end


def _int(line: str, literal: str, at: int) -> tuple[int, int]:
    """After `literal`: an integer spelled as str() writes it."""
    if not line.startswith(literal, at):
        raise _Differs
    at += len(literal)
    value, end = _scan(line, at)
    if type(value) is not int or line[at:end] != str(value):
        raise _Differs
    return value, end


def _text(line: str, literal: str, at: int) -> tuple[str, int]:
    """After `literal`: a string spelled as the writer's JSON string (line breakers
    escaped)."""
    if not line.startswith(literal, at):
        raise _Differs
    at += len(literal)
    value, end = _scan(line, at)
    if type(value) is not str:
        raise _Differs
    written = encode_basestring(value)
    if line[at:end] != (written if written.isascii() else escape_line_breakers(written)):
        raise _Differs
    return value, end


def _fixed(line: str, literal: str, at: int, form: re.Pattern[str], width: int) -> tuple[str, int]:
    """After `literal`: a quoted ASCII string of `width` characters in `form` (a digest
    in lowercase hex, a timestamp), which JSON spells as itself."""
    if not line.startswith(literal, at):
        raise _Differs
    at += len(literal) + 1
    end = at + width
    value = line[at:end]
    if line[at - 1] != '"' or line[end : end + 1] != '"' or not form.fullmatch(value):
        raise _Differs
    return value, end + 1


def _read(line: str) -> JournalEntry:
    actor, at = _payload(line, LINE_START, 0)
    attempt, at = _int(line, ',"attempt":', at)
    error, at = _payload(line, ',"error":', at)
    hash_, at = _fixed(line, _HASH_AFTER_FORMAT, at, _HEX64, 64)
    given, at = _payload(line, ',"input":', at)
    phase_name, at = _text(line, ',"phase":', at)
    prev, at = _fixed(line, ',"prev_hash":', at, _HEX64, 64)
    stamp, at = _fixed(line, ',"recorded_at":', at, _TIMESTAMP, 27)
    result, at = _payload(line, ',"result":', at)
    saga, at = _text(line, ',"saga_id":', at)
    seq, at = _int(line, ',"seq":', at)
    step, at = _int(line, ',"step":', at)
    tool, at = _text(line, ',"tool":', at)
    phase = _PHASES.get(phase_name)
    if phase is None or line[at:] not in ("}", "}\n"):
        raise _Differs
    # fromisoformat checks the date; in the fixed ASCII form the writer renders it back
    # as this same text (entry.render_timestamp), the check the general reader makes.
    recorded_at = parse_timestamp(stamp)
    material = encode_material(
        saga_id=saga, seq=seq, step=step, attempt=attempt, tool=tool, phase=phase_name,
        input_json=given, result_json=result, error_json=error, actor_json=actor,
        recorded_at=stamp, prev_hash=prev,
    )  # fmt: skip
    return JournalEntry(
        saga, seq, step, attempt, tool, phase, given, result, error, actor, recorded_at,
        prev, hash_, material,
    )  # fmt: skip
