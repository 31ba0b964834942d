"""The SQLite journal's tables. The checkpoint log's tables are in
sagacity.stores._checkpoint_tables, the registry marks' in sagacity.stores._mark_tables.

`material` holds each entry's hashed bytes (sagacity.journal._recipe); the payloads are kept
only there, and their columns hold the empty string (sagacity.stores._stored_row). The
other columns repeat what the bytes say, for lookups; verify checks them against the
bytes.

A journal file says it is one: its header's application_id is sagacity's and its
user_version the schema's version, both set in the transaction that creates the tables.
A file that says otherwise (a pre-release journal, which set neither; a newer one; another
program's database) is refused when the store opens, rather than read as tampered.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

from sagacity._errors import IncompatibleJournalError, NoJournalError

__all__ = ["APPLICATION_ID", "JOURNAL_SCHEMA", "SCHEMA_VERSION", "check_file", "open_schema"]

APPLICATION_ID = int.from_bytes(b"sgcy", "big")
"""In the file's header (PRAGMA application_id): `file(1)` and this store tell a sagacity
journal from any other SQLite database."""
SCHEMA_VERSION = 1

JOURNAL_SCHEMA = """
CREATE TABLE IF NOT EXISTS journal (
    saga_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    step INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    tool TEXT NOT NULL,
    phase TEXT NOT NULL,
    input_json TEXT NOT NULL,
    result_json TEXT NOT NULL,
    error_json TEXT NOT NULL,
    actor_json TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    material BLOB NOT NULL,
    PRIMARY KEY (saga_id, seq),
    UNIQUE (saga_id, step, phase, attempt)
);
CREATE TABLE IF NOT EXISTS fences (
    saga_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    PRIMARY KEY (saga_id, step)
);
CREATE TRIGGER IF NOT EXISTS journal_no_update BEFORE UPDATE ON journal
BEGIN SELECT RAISE(ABORT, 'sagacity journal is append-only: UPDATE refused'); END;
CREATE TRIGGER IF NOT EXISTS journal_no_delete BEFORE DELETE ON journal
BEGIN SELECT RAISE(ABORT, 'sagacity journal is append-only: DELETE refused'); END;
"""


def _refuse_foreign(conn: sqlite3.Connection, path: Path) -> bool:
    """True for a file marked as this schema's journal, False for an empty file (no
    marks, no tables); raises IncompatibleJournalError for anything else."""
    marks = (
        conn.execute("PRAGMA application_id").fetchone()[0],
        conn.execute("PRAGMA user_version").fetchone()[0],
    )
    if marks == (APPLICATION_ID, SCHEMA_VERSION):
        return True
    if marks == (0, 0) and not conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
        return False
    said = (
        "no mark (a pre-release sagacity journal, or another program's database)"
        if marks == (0, 0)
        else f"application_id {marks[0]:#x} and schema version {marks[1]}"
    )
    raise IncompatibleJournalError(
        f"the SQLite file {path} is not a journal of this sagacity: its header holds "
        f"{said}, where this version writes application_id {APPLICATION_ID:#x} and "
        f"schema version {SCHEMA_VERSION}. Keep it as evidence with the version that "
        "wrote it (sagacity export), and give this worker a new journal file"
    )


def _looked_at(path: Path) -> bool | None:
    """Whether the file at `path`, opened read-only (no WAL switch, nothing created), is
    this schema's journal: None when there is no file or it is empty, False for a database
    with no tables; anything else raises IncompatibleJournalError."""
    if not path.is_file() or path.stat().st_size == 0:
        return None
    # A URI with the path quoted: a '?' or '#' in a file name is not a URI parameter.
    conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True)
    try:
        return _refuse_foreign(conn, path)
    finally:
        conn.close()


def check_file(path: Path) -> None:
    """Refuses a file that is not this schema's journal before the store opens it for
    writing (which would switch it to WAL mode, a change to someone else's file)."""
    _looked_at(path)


def check_journal_file(path: Path) -> None:
    """For a reader: `path` is this schema's journal, or NoJournalError (no file, an empty
    one) or IncompatibleJournalError. Looked at read-only: nothing is created, no WAL
    switch, no table, and a reader's typo leaves no stray file behind."""
    marked = _looked_at(path)
    if marked is None:
        what = "is empty" if path.is_file() else "does not exist"
        raise NoJournalError(f"no journal at {path}: the file {what} (nothing was created)")
    if not marked:
        raise NoJournalError(f"no journal in {path}: the file has no tables")


def open_schema(conn: sqlite3.Connection, path: Path, script: str) -> None:
    """Creates the tables of `script` in a new file, marked as a journal of this schema
    version; in a file already marked so, creates what is missing; refuses any other
    file (IncompatibleJournalError)."""
    if _refuse_foreign(conn, path):
        conn.executescript(script)
        return
    # One transaction: another opener sees no tables, or the tables with their marks.
    conn.executescript(
        f"BEGIN IMMEDIATE; {script} PRAGMA application_id = {APPLICATION_ID}; "
        f"PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
    )
