"""The SQLite journal's tables, and the one in-place upgrade a journal file has had
(the `material` column of recipe v2). The checkpoint log's tables are in
sagacity.stores.checkpoint_tables."""

from __future__ import annotations

import sqlite3

__all__ = ["JOURNAL_SCHEMA", "add_material_column"]

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
_V2_COLUMN = "ALTER TABLE journal ADD COLUMN material BLOB"
"""Recipe v2 (sagacity.recipe_v2): an entry's hashed bytes, NULL for a v1 row. Added in
place to a journal made before it; the guard triggers stay as they are."""


def add_material_column(conn: sqlite3.Connection) -> None:
    """Upgrade a journal made before recipe v2 in place (ADD COLUMN only), under the
    write lock so two processes opening it together do not both add the column."""

    def has_it() -> bool:
        return any(row[1] == "material" for row in conn.execute("PRAGMA table_info(journal)"))

    if has_it():
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        if not has_it():
            conn.execute(_V2_COLUMN)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
