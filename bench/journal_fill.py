"""Bulk-filling a journal with sealed, chained entries (the fixture of the issue-16
benchmarks, never the thing measured): COPY into PostgreSQL, executemany into SQLite.

The rows are bench.verify's `build_chain` sagas (SAGA_OPENED, INTENT/EXECUTED pairs,
SAGA_CLOSED; realistic payloads) written as the store writes them (`stored_row`), so
every filled saga verifies like one a worker wrote.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from bench.verify import build_chain, stored_row

__all__ = ["copy_postgres", "fill_sqlite", "saga_rows"]


def _columns() -> tuple[str, ...]:
    from sagacity.stores._postgres import COLUMNS

    return COLUMNS


def saga_rows(saga_ids: Iterable[str], per_saga: int) -> Iterator[tuple[Any, ...]]:
    """Every stored row of the given sagas, `per_saga` entries each, in chain order."""
    columns = _columns()
    for saga in saga_ids:
        for entry in build_chain(saga, per_saga):
            yield stored_row(entry, columns)


def copy_postgres(admin_url: str, schema: str, rows: Iterable[tuple[Any, ...]]) -> int:
    """COPY `rows` into the (migrated) journal of `schema`, then ANALYZE; returns how many."""
    import psycopg

    columns = ", ".join(_columns())
    count = 0
    with psycopg.connect(admin_url) as conn, conn.cursor() as cur:
        with cur.copy(f'COPY "{schema}".sagacity_journal ({columns}) FROM STDIN') as copy:
            for row in rows:
                copy.write_row(row)
                count += 1
        conn.commit()
        conn.execute(f'ANALYZE "{schema}".sagacity_journal')
        conn.commit()
    return count


def fill_sqlite(path: Path, rows: Iterable[tuple[Any, ...]]) -> int:
    """Insert `rows` into the (created) SQLite journal at `path` in one transaction."""
    columns = _columns()
    marks = ", ".join("?" * len(columns))
    con = sqlite3.connect(path)
    try:
        with con:
            cursor = con.executemany(
                f"INSERT INTO journal ({', '.join(columns)}) VALUES ({marks})", rows
            )
        con.execute("ANALYZE")
        return cursor.rowcount
    finally:
        con.close()
