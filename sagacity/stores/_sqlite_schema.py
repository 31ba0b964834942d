"""The SQLite journal's tables. The checkpoint log's tables are in
sagacity.stores._checkpoint_tables, the registry marks' in sagacity.stores._mark_tables.

`material` holds each entry's hashed bytes (sagacity.journal._recipe); the payloads are kept
only there, and their columns hold the empty string (sagacity.stores._stored_row). The
other columns repeat what the bytes say, for lookups; verify checks them against the
bytes.
"""

from __future__ import annotations

__all__ = ["JOURNAL_SCHEMA"]

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
