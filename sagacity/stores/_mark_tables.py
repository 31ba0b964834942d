"""The registry high-water mark's table on SQLite and PostgreSQL (sagacity.approval).

One row per approver registry (version, SHA-256) any entry recorded, with the first
entry that did: a handful of rows however large the journal grows, so "the newest
version journaled" is an index read. A row is inserted in the same transaction as its
entry (SQLite: inside the append's BEGIN IMMEDIATE; PostgreSQL: by sagacity_append,
migration 0001), so no entry that records a registry commits without its mark. Rows
are never changed or deleted (triggers refuse it, as for the journal).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from sagacity.approval._registry_marks import JournaledMark
from sagacity.journal._entry import JournalEntry
from sagacity.stores._base import entry_mark, newest_marks

SQLITE_MARKS_SCHEMA = """
CREATE TABLE IF NOT EXISTS registry_marks (
    version INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    saga_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (version, sha256)
);
""" + "".join(
    f"CREATE TRIGGER IF NOT EXISTS registry_marks_no_{op.lower()} BEFORE {op} ON "
    f"registry_marks BEGIN SELECT RAISE(ABORT, 'sagacity registry marks are append-only: "
    f"{op} refused'); END;\n"
    for op in ("UPDATE", "DELETE")
)
SQLITE_NEWEST = (
    "SELECT version, sha256, saga_id, seq FROM registry_marks "
    "WHERE version = (SELECT MAX(version) FROM registry_marks)"
)


def sqlite_record_mark(conn: sqlite3.Connection, entry: JournalEntry) -> None:
    """Insert the registry `entry` records, if any (inside the append's transaction)."""
    mark = entry_mark(entry)
    if mark is not None:
        conn.execute(
            "INSERT OR IGNORE INTO registry_marks (version, sha256, saga_id, seq) "
            "VALUES (?, ?, ?, ?)",
            (mark.version, mark.sha256, entry.saga_id, entry.seq),
        )


def mark_params(entry: JournalEntry) -> tuple[int | None, str | None]:
    """sagacity_append's mark arguments: the registry `entry` records, or NULLs."""
    mark = entry_mark(entry)
    return (mark.version, mark.sha256) if mark is not None else (None, None)


def marks_of(rows: Sequence[Sequence[Any]]) -> list[JournaledMark]:
    """(version, sha256, saga_id, seq) rows as read back, the newest version's."""
    return newest_marks((int(v), str(h), str(s), int(q)) for v, h, s, q in rows)


__all__ = ["SQLITE_MARKS_SCHEMA", "SQLITE_NEWEST", "mark_params", "marks_of", "sqlite_record_mark"]
