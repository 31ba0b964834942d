"""The export's entry lines: payloads as JSON values, verifiable byte for byte.

An entry line holds the thirteen hashed fields of one entry and `"format":1`. Its
`input`, `result`, `error` and `actor` are JSON values (`"input":{"amount":5}`,
`"actor":null`), which jq and people read as they are.

The hashed bytes of such a field are the RFC 8785 form of its value. A stored text that
is not its own RFC 8785 form (a row written by hand) cannot be given back by any value,
so the line carries it verbatim as `<field>_text`, a string, and verification hashes
that; nothing is re-canonicalized on the way.

A line is one exact string: the RFC 8785 form of its own JSON object (keys sorted, no
spaces, numbers and strings in their one canonical spelling), with U+0085, U+2028 and
U+2029 written as `\\u` escapes. The verifier rebuilds that string from what it read and
refuses a line that differs, naming the field, because a value respelled (`5000` as
`5000.0` or `5e3`, keys reordered inside `input`) still hashes the same: its bytes, not
its hash, show the edit. It refuses as well a `_text` whose text is its own RFC 8785
form (an export writes that as the value) and a line with both `input` and
`input_text`.

Numbers are read as RFC 8785 reads them, as IEEE doubles: an integer beyond ±(2**53-1)
is the nearest double (so `100000000000000000000`, the canonical form of 1e20, is its own
form), the reading every JSON parser that keeps doubles (JavaScript, jq) shares.

Inside this module an entry travels as its *record* (`entry_record`): the thirteen
hashed fields by their line keys, each payload as the text that is hashed. The entry's
bytes are a function of those fields (sagacity.journal._recipe), so `record_entry` rebuilds them
and a verifier with only the file hashes what was stored.

docs/hash-chain.md, section 4, specifies the format for other implementations.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from json.encoder import encode_basestring
from typing import Any

from sagacity._errors import AuditFileError, NotCanonicalError
from sagacity.journal._canonical import MAX_CANONICAL_DEPTH, canonical_bytes, fast_text
from sagacity.journal._entry import JournalEntry, parse_timestamp, render_timestamp
from sagacity.journal._phases import Phase
from sagacity.journal._recipe import encode_material

FORMAT_FIELD = "format"
FORMAT = 1
"""The value of FORMAT_FIELD in every entry line: the one export format. A reader
refuses any other value, so a later format can never be misread as this one."""
PAYLOAD_FIELDS = ("input", "result", "error", "actor")
"""The hashed fields that are JSON: in a line, each as its value or as `<field>_text`,
its stored text verbatim."""
TEXT_SUFFIX = "_text"
_MAX_SAFE_INT = 2**53 - 1

# json.dumps(ensure_ascii=False) and RFC 8785 leave these unescaped, and str.splitlines()
# and many editors break lines on them; escaping them keeps one entry per physical line.
_LINE_BREAKERS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def escape_line_breakers(text: str) -> str:
    """`text` (JSON) with U+0085, U+2028 and U+2029 written as \\u escapes. They can only
    occur inside JSON strings, where the escape means the same character."""
    if text.isascii():
        return text
    for char, escape in _LINE_BREAKERS.items():
        if char in text:
            text = text.replace(char, escape)
    return text


def _as_doubles(value: Any, level: int = 0) -> Any:
    """`value` with every integer beyond ±(2**53-1) replaced by the nearest double, as
    RFC 8785 (and any parser that reads numbers as doubles) reads it. An integer too
    large for a double is left alone (RFC 8785 then refuses it)."""
    kind = type(value)
    if kind is int:
        if -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT:
            return value
        try:
            return float(value)
        except OverflowError:
            return value
    if level > MAX_CANONICAL_DEPTH:  # canonical_bytes refuses it for its depth
        return value
    if kind is dict:
        return {key: _as_doubles(item, level + 1) for key, item in value.items()}
    if kind is list:
        return [_as_doubles(item, level + 1) for item in value]
    return value


def value_text(value: Any, what: str = "value") -> str:
    """The hashed text of a payload value read from JSON: its RFC 8785 form, numbers
    read as doubles. Raises NotCanonicalError when it has none (NaN, infinity, a lone
    surrogate, deeper than MAX_CANONICAL_DEPTH)."""
    text = fast_text(value)
    if text is None:
        text = canonical_bytes(_as_doubles(value), what=what).decode("utf-8")
    return text


_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
"""json.loads without its whitespace handling: the value at an index and where it ends
(a canonical text has no whitespace to skip)."""


def is_canonical(text: str) -> bool:
    """True when stored `text` is its own RFC 8785 form: parsed and written again it is
    the same string. Only such a text can go out as a value (the verifier gets it back
    from the value); any other is exported verbatim as `<field>_text`."""
    if text == "null":
        return True
    try:
        value, end = _scan(text, 0)
        return end == len(text) and value_text(value) == text
    except (StopIteration, ValueError, RecursionError):  # not JSON, or no RFC 8785 form
        return False


def _json(value: object) -> str:
    """A plain field (str, int or null) as RFC 8785 writes it."""
    if type(value) is str:
        return encode_basestring(value)
    return "null" if value is None else str(value)


_PLAIN_FIELDS = ("saga_id", "seq", "step", "attempt", "tool", "phase", "recorded_at")
_HASH_FIELDS = ("prev_hash", "hash")


def _keys(verbatim: frozenset[str]) -> list[str]:
    """The keys of a line, sorted (they are ASCII: code-point order is RFC 8785's UTF-16
    order)."""
    payloads = (name + TEXT_SUFFIX if name in verbatim else name for name in PAYLOAD_FIELDS)
    return sorted([FORMAT_FIELD, *_PLAIN_FIELDS, *_HASH_FIELDS, *payloads])


_TEMPLATES = {
    verbatim: "{" + ",".join(f'"{key}":%({key})s' for key in _keys(verbatim)) + "}"
    for verbatim in (
        frozenset(name for bit, name in enumerate(PAYLOAD_FIELDS) if mask >> bit & 1)
        for mask in range(1 << len(PAYLOAD_FIELDS))
    )
}
"""The line for each choice of verbatim fields, with a %(key)s hole for each value."""


def entry_record(entry: JournalEntry) -> dict[str, Any]:
    """The record of `entry`: its thirteen hashed fields by line key, payloads as their
    canonical text, so an offline verifier sees exactly what was hashed."""
    return {
        "saga_id": entry.saga_id,
        "seq": entry.seq,
        "step": entry.step,
        "attempt": entry.attempt,
        "tool": entry.tool,
        "phase": entry.phase.value,
        "input": entry.input_json,
        "result": entry.result_json,
        "error": entry.error_json,
        "actor": entry.actor_json,
        "recorded_at": render_timestamp(entry.recorded_at),
        "prev_hash": entry.prev_hash,
        "hash": entry.hash,
    }


def record_entry(record: Mapping[str, Any]) -> JournalEntry:
    """The entry of a record whose fields were checked (sagacity.audit), its bytes
    rebuilt from them. ValueError when a field is not what an entry's bytes hold."""
    stamp = str(record["recorded_at"])
    fields: dict[str, Any] = {
        "saga_id": str(record["saga_id"]),
        "seq": int(record["seq"]),
        "step": int(record["step"]),
        "attempt": int(record["attempt"]),
        "tool": str(record["tool"]),
        "input_json": str(record["input"]),
        "result_json": str(record["result"]),
        "error_json": str(record["error"]),
        "actor_json": str(record["actor"]),
        "prev_hash": str(record["prev_hash"]),
    }
    phase = Phase(record["phase"])
    material = encode_material(**fields, phase=phase.value, recorded_at=stamp)
    return JournalEntry(
        **fields,
        phase=phase,
        recorded_at=parse_timestamp(stamp),
        hash=str(record["hash"] or ""),
        material=material,
    )


def _fields(record: Mapping[str, Any], verbatim: frozenset[str]) -> dict[str, str]:
    """Each field of the line of `record` (the thirteen hashed fields, payloads as their
    hashed text), as JSON text, by key."""
    quote = encode_basestring
    fields = {FORMAT_FIELD: str(FORMAT)}
    for key in _PLAIN_FIELDS:
        value = record[key]
        fields[key] = quote(value) if type(value) is str else str(value)
    for key in _HASH_FIELDS:
        fields[key] = _json(record[key])  # null in a line that is not chained
    for key in PAYLOAD_FIELDS:
        if key in verbatim:
            fields[key + TEXT_SUFFIX] = quote(record[key])
        else:
            fields[key] = record[key]  # its RFC 8785 text, which is its JSON value
    return fields


def render_line(record: Mapping[str, Any], verbatim: Collection[str] = ()) -> str:
    """The line (without its newline) of a record (`entry_record`: the thirteen hashed
    fields, payloads as their hashed text), the payload fields named in `verbatim` as
    `<field>_text`, the others as their values."""
    chosen = frozenset(verbatim)
    template = _TEMPLATES[chosen]
    return escape_line_breakers(template % _fields(record, chosen))


_VALUE_LINE = "{" + ",".join(f'"{key}":%s' for key in _keys(frozenset())) + "}"
"""The line of an entry whose four payloads go out as values (every entry sagacity
writes), with a positional %s hole per value in key order: the same line as
_TEMPLATES[frozenset()], filled without building the record first."""


def value_line(entry: JournalEntry) -> str:
    """One entry as a line (without the newline): payloads as JSON values, each stored
    text that is not its own RFC 8785 form as `<field>_text`."""
    actor, given, result, error = (
        entry.actor_json,
        entry.input_json,
        entry.result_json,
        entry.error_json,
    )
    if is_canonical(actor) and is_canonical(given) and is_canonical(result) and is_canonical(error):
        quote = encode_basestring
        return escape_line_breakers(
            _VALUE_LINE
            % (
                actor, entry.attempt, error, FORMAT, _json(entry.hash), given,
                quote(entry.phase.value), _json(entry.prev_hash),
                quote(render_timestamp(entry.recorded_at)), result, quote(entry.saga_id),
                entry.seq, entry.step, quote(entry.tool),
            )
        )  # fmt: skip
    record = entry_record(entry)
    verbatim = [name for name in PAYLOAD_FIELDS if not is_canonical(record[name])]
    return render_line(record, verbatim)


def hashed_record(number: int, record: dict[str, Any]) -> tuple[dict[str, Any], frozenset[str]]:
    """A parsed line as the record of its entry (each payload field as the text that is
    hashed), and the fields it carried as `<field>_text`.
    The plain fields are left for the caller's checks; check_line then holds the line
    to its exact form. Raises AuditFileError naming the line. `record` is changed."""
    out = record
    if FORMAT_FIELD not in out:
        raise AuditFileError(
            f'line {number}: missing field {FORMAT_FIELD}; every entry line says "'
            f'{FORMAT_FIELD}":{FORMAT}'
        )
    form = out.pop(FORMAT_FIELD)
    if type(form) is not int or form != FORMAT:
        raise AuditFileError(
            f"line {number}: format {form!r} is not an export format this verifier reads "
            f'(an entry line says "{FORMAT_FIELD}":{FORMAT})'
        )
    verbatim = []
    for name in PAYLOAD_FIELDS:
        text_name = name + TEXT_SUFFIX
        if name in out and text_name in out:
            raise AuditFileError(
                f"line {number}: holds both {name} and {text_name}; a line holds "
                f"one of them: the line was altered"
            )
        if text_name in out:
            text = out.pop(text_name)
            if not isinstance(text, str):
                raise AuditFileError(
                    f"line {number}: field {text_name} must be a string, got {type(text).__name__}"
                )
            if is_canonical(text):
                raise AuditFileError(
                    f"line {number}: {text_name} holds canonical JSON, which an export "
                    f"writes as the value {name}: the line was altered"
                )
            out[name] = text
            verbatim.append(name)
        elif name in out:
            try:
                out[name] = value_text(out[name], what=name)
            except NotCanonicalError as exc:
                raise AuditFileError(
                    f"line {number}: {name} has no RFC 8785 form ({exc}); an export writes "
                    f"such a stored text as {text_name}: the line was altered"
                ) from None
        else:
            raise AuditFileError(f"line {number}: missing field {name} (or {text_name})")
    return out, frozenset(verbatim)


def check_line(
    number: int, line: str, record: Mapping[str, Any], verbatim: Collection[str]
) -> None:
    """Refuse a line that is not exactly the line an export writes for the
    entry it holds (`record` as hashed_record returned it, its fields checked)."""
    actual = line[:-1] if line.endswith("\n") else line
    expected = render_line(record, verbatim)
    if actual == expected:
        return
    at = next(
        (i for i, (a, b) in enumerate(zip(actual, expected, strict=False)) if a != b),
        min(len(actual), len(expected)),
    )
    raise AuditFileError(
        f"line {number}: differs from its exported form at column {at + 1}, in "
        f"{_field_at(at, record, frozenset(verbatim))}: an entry line is the RFC 8785 "
        "form of its object (keys sorted, no spaces, each number and string in its one "
        "spelling), so a value was respelled or the line edited after export"
    )


def _field_at(at: int, record: Mapping[str, Any], verbatim: frozenset[str]) -> str:
    """Which field of the expected line holds column `at` (0-based; a field owns the
    comma after it)."""
    fields = _fields(record, verbatim)
    start = 1
    for key in _keys(verbatim):
        start += len(escape_line_breakers(f'"{key}":{fields[key]}')) + 1
        if at < start:
            return f"field {key}"
    return "its end"
