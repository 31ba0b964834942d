"""Values of a SQLite journal as SQLite really stores them, which is not what the schema says.

A column declared TEXT keeps whatever is written into it: a BLOB (`CAST(x AS BLOB)`), or
TEXT whose bytes are not UTF-8 (`CAST(x'ff' AS TEXT)`, or `material || x'00'`, which
SQLite makes TEXT). Python's sqlite3 raises while *fetching* such text, so the reader
never gets a row to report, and a BLOB saga_id is neither found by `saga_id = ?` nor
sorted among the TEXT ids. Here every such value is read as it is, so the store can
report the row as unreadable at its saga and seq instead of aborting, hiding it, or
paging forever:

- `fetch_rows` reads with Python's fast decoder and, only when a value will not decode,
  reads the batch again keeping that value as `NotUtf8Text` (its bytes);
- `check_row_types` names the first column whose stored type is not the schema's;
- a saga id that is not UTF-8 TEXT is listed under `odd_saga_name` (a NUL, so no saga
  id sagacity accepts can collide with it, then its storage type and bytes as a SQL
  literal), which `saga_match` turns back into the stored value;
- `row_to_entry` makes a stored row an entry (a row no sagacity version writes is
  UnreadableEntryError), and `row_params` an entry the row to insert.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from sagacity._errors import UnreadableEntryError
from sagacity.journal._entry import JournalEntry, parse_timestamp, render_timestamp
from sagacity.journal._phases import Phase
from sagacity.stores._stored_row import stored_entry

__all__ = [
    "NotUtf8Text",
    "check_row_types",
    "fetch",
    "fetch_rows",
    "needs_type_check",
    "odd_saga_name",
    "row_params",
    "row_to_entry",
    "saga_match",
    "saga_name",
    "shown_value",
]

_COLUMN_NAMES = (
    "saga_id", "seq", "step", "attempt", "tool", "phase", "input_json", "result_json",
    "error_json", "actor_json", "recorded_at", "prev_hash", "hash", "material",
)  # fmt: skip
_INTEGER_COLUMNS = frozenset((1, 2, 3))
_MATERIAL = 13


@dataclass(frozen=True, slots=True)
class NotUtf8Text:
    """A TEXT value whose bytes are not UTF-8: no str, so nothing takes it for one."""

    raw: bytes


def _tolerant_text(raw: bytes) -> str | NotUtf8Text:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return NotUtf8Text(raw)


def fetch(
    conn: sqlite3.Connection, sql: str, params: Sequence[object]
) -> tuple[list[tuple[object, ...]], bool]:
    """`sql`'s rows, and whether some text in them is not UTF-8. Text is decoded by
    sqlite3 itself (fast); when some will not decode the statement is run again with a
    decoder that keeps such text as NotUtf8Text (the caller holds the connection, so no
    other statement sees the changed factory)."""
    try:
        return conn.execute(sql, params).fetchall(), False
    except sqlite3.OperationalError as exc:
        if "decode" not in str(exc):
            raise
    conn.text_factory = _tolerant_text
    try:
        return conn.execute(sql, params).fetchall(), True
    finally:
        conn.text_factory = str


def fetch_rows(
    conn: sqlite3.Connection, sql: str, params: Sequence[object]
) -> list[tuple[object, ...]]:
    """`sql`'s rows (`fetch`), text that is not UTF-8 kept as NotUtf8Text."""
    return fetch(conn, sql, params)[0]


_WRITTEN = (str, int, int, int, str, str, str, str, str, str, str, str, str, bytes)
"""The storage types of a row sagacity writes, as Python's sqlite3 returns them."""


def _storage(value: object) -> str:
    if isinstance(value, NotUtf8Text):
        return "TEXT that is not UTF-8"
    if isinstance(value, bytes):
        return "BLOB"
    if isinstance(value, str):
        return "TEXT"
    if isinstance(value, float):
        return "REAL"
    if isinstance(value, int):
        return "INTEGER"
    return "NULL" if value is None else type(value).__name__


_SHOWN_BYTES = 32


def shown_value(value: object) -> str:
    """A stored value as its storage type and its first bytes (as a SQL literal and as
    Python shows them): printable whatever it holds, and enough to find the row."""
    if isinstance(value, NotUtf8Text | bytes):
        raw = value.raw if isinstance(value, NotUtf8Text) else value
        head, more = raw[:_SHOWN_BYTES], f", {len(raw)} bytes" if len(raw) > _SHOWN_BYTES else ""
        kind = "TEXT that is not UTF-8" if isinstance(value, NotUtf8Text) else "BLOB"
        return f"{kind} x'{head.hex()}' ({head!r}{more})"
    text = repr(value)
    return f"{_storage(value)} {text[:_SHOWN_BYTES]}{'...' if len(text) > _SHOWN_BYTES else ''}"


def needs_type_check(row: Sequence[object]) -> bool:
    """Whether a row must go through check_row_types before verify_rows sees it: a
    row's checks call str methods on tool, phase, actor and recorded_at, and a seq that
    is not an integer is best placed here, where the seq before it is known. Every other
    column of the wrong type fails a comparison there and reaches `entry_of`, which checks
    them all; five checks per row here instead of fourteen."""
    return not (
        type(row[1]) is int
        and type(row[4]) is str
        and type(row[5]) is str
        and type(row[9]) is str
        and type(row[10]) is str
    )


def check_row_types(row: Sequence[object], place: int = 0) -> None:
    """Raise UnreadableEntryError naming the first column of `row` (COLUMNS order) whose
    stored type is not the schema's: TEXT (UTF-8) columns, INTEGER seq/step/attempt, a
    BLOB material. sagacity writes no other; such a row was altered outside it.
    A seq that is not an integer is reported at `place` (where the row was read: the seq
    after the one before it)."""
    if tuple(map(type, row)) == _WRITTEN:
        return
    for index, value in enumerate(row):
        if index in _INTEGER_COLUMNS:
            wrong, wanted = type(value) is not int, "INTEGER"
        elif index == _MATERIAL:
            wrong, wanted = type(value) is not bytes, "BLOB"
        else:
            wrong, wanted = type(value) is not str, "UTF-8 TEXT"
        if wrong:
            seq = row[1]
            saga = f"saga {row[0]!r} " if type(row[0]) is str else ""
            raise UnreadableEntryError(
                f"{saga}seq {seq!r}: column {_COLUMN_NAMES[index]} is "
                f"stored as {shown_value(value)}, not {wanted}; the row was altered "
                "outside sagacity",
                seq if type(seq) is int else place,
            )


_ODD = "\x00"
"""First character of a listed saga name that is not a saga id (check_name refuses
control characters), so it never names a real saga; also sorts before every real id, so
a walk merging `sagas()` with the checkpoint log by id order is not disturbed by it."""
_ODD_NAME = re.compile(r"\x00(BLOB|TEXT) x'((?:[0-9a-f]{2})*)'")


def odd_saga_name(value: object) -> str:
    """The name a stored saga_id that is not UTF-8 TEXT is listed under."""
    if isinstance(value, NotUtf8Text):
        return f"{_ODD}TEXT x'{value.raw.hex()}'"
    if isinstance(value, bytes):
        return f"{_ODD}BLOB x'{value.hex()}'"
    if isinstance(value, str):
        return f"{_ODD}TEXT x'{value.encode('utf-8', 'surrogatepass').hex()}'"
    return f"{_ODD}{_storage(value)} {value!r}"


def saga_match(saga_id: str) -> tuple[str, object]:
    """(SQL for the saga_id column's value, its parameter) that finds the rows of
    `saga_id` as `sagas()` listed it: the text itself, or an odd name's stored value."""
    odd = _ODD_NAME.fullmatch(saga_id) if saga_id.startswith(_ODD) else None
    if odd is None:
        return "?", saga_id
    raw = bytes.fromhex(odd.group(2))
    return ("CAST(? AS TEXT)", raw) if odd.group(1) == "TEXT" else ("?", raw)


def saga_name(value: object) -> str:
    """The name `sagas()` lists a stored saga_id under: itself when it is UTF-8 TEXT
    (and not itself spelled like an odd name), else its odd name."""
    return value if type(value) is str and not value.startswith(_ODD) else odd_saga_name(value)


def row_params(entry: JournalEntry) -> tuple[object, ...]:
    """An entry as INSERT parameters. Its payloads are in its material only (their
    columns hold ""), so they are stored once."""
    return (
        entry.saga_id,
        entry.seq,
        entry.step,
        entry.attempt,
        entry.tool,
        entry.phase.value,
        "",
        "",
        "",
        entry.actor_json,
        render_timestamp(entry.recorded_at),
        entry.prev_hash,
        entry.hash,
        entry.material,
    )


def row_to_entry(row: tuple[object, ...]) -> JournalEntry:
    """A stored row as an entry; a row no sagacity version writes raises
    UnreadableEntryError (verification reports it as a break)."""
    check_row_types(row)  # a BLOB, or text not UTF-8, where the schema says otherwise
    try:
        return _parse_row(row)
    except UnreadableEntryError as exc:
        raise type(exc)(f"saga {row[0]!r} seq {row[1]}: {exc}", exc.seq) from None
    except (ValueError, TypeError) as exc:
        raise UnreadableEntryError(
            f"saga {row[0]!r} seq {row[1]}: stored row is not a sagacity entry ({exc}); "
            "it was altered outside sagacity",
            int(row[1]),  # type: ignore[call-overload]
        ) from exc


def _parse_row(row: tuple[object, ...]) -> JournalEntry:
    """Every column is compared with the bytes (stored_row)."""
    return stored_entry(row, Phase(str(row[5])), parse_timestamp(str(row[10])))
