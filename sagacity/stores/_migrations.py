"""Versioned schema migrations for the PostgreSQL journal store.

Migrations are the numbered files in `sagacity/stores/migrations/`, applied in order when
a store opens and recorded in `sagacity_schema_version`. Version 1.0 has one,
`0001_journal.sql`, the whole schema. A file is never edited once released: a later
change to the schema is the next numbered file (`0002_….sql`), which this runner applies
to journals at version 1 and creates fresh ones with after 0001.
Each runs with search_path set to the store's schema (then pg_temp), so DDL names are
unqualified; `@schema@` in a file is replaced by the quoted schema name, for function
bodies, whose names are resolved when they run, not when they are created.

Why this shape:
- Two workers starting together must not both create the tables, so the whole run holds
  a transaction-level advisory lock keyed on the schema; the second worker waits, then
  sees the first one's version rows (READ COMMITTED gives each statement a fresh
  snapshot, and the version read comes after the lock) and applies nothing.
- Postgres DDL is transactional, so a migration and its version row commit together or
  not at all: there is no half-migrated schema to repair.
- A store that is already up to date takes no lock and runs no DDL, so an application
  role with only SELECT/INSERT can open it once an owner has migrated.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

VERSION_TABLE = "sagacity_schema_version"
_FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql_text: str

    def render(self, schema: str) -> str:
        """The SQL with `@schema@` replaced by the quoted schema name. Function bodies use
        it: they resolve names at call time, under the caller's search_path."""
        return self.sql_text.replace("@schema@", sql.Identifier(schema).as_string(None))


def load_migrations() -> list[Migration]:
    """The packaged migrations in version order; refuses duplicate or missing numbers,
    because a gap means a file was lost from the package."""
    folder = resources.files("sagacity.stores").joinpath("migrations")
    found: list[Migration] = []
    for item in folder.iterdir():
        match = _FILE_NAME.match(item.name)
        if match:
            found.append(Migration(int(match[1]), match[2], item.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"sagacity migrations are not numbered 1..n: {versions}")
    return found


def migration_lock_key(schema: str) -> int:
    """Signed 64-bit advisory lock key for migrating `schema` (domain-separated from the
    per-saga append locks)."""
    digest = hashlib.sha256(b"sagacity.migrate:" + schema.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def applied_versions(conn: psycopg.Connection[TupleRow], schema: str) -> set[int]:
    """Versions recorded in `schema`, empty when the version table does not exist yet."""
    table = sql.Identifier(schema, VERSION_TABLE)
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table.as_string(conn),)).fetchone()
    if not exists or not exists[0]:
        return set()
    rows = conn.execute(sql.SQL("SELECT version FROM {}").format(table)).fetchall()
    return {int(row[0]) for row in rows}


def migrate(
    conn: psycopg.Connection[TupleRow], schema: str, *, lock_timeout: str = "30s"
) -> list[int]:
    """Bring `schema` up to the newest migration; returns the versions applied now.

    `conn` must be in autocommit mode (each run is its own transaction). Errors propagate
    as psycopg errors; the caller turns them into StoreUnavailableError.
    """
    migrations = load_migrations()
    wanted = {m.version for m in migrations}
    if wanted <= applied_versions(conn, schema):
        return []
    applied_now: list[int] = []
    with conn.transaction():
        conn.execute(
            "SELECT set_config('lock_timeout', %s, true), set_config('search_path', %s, true)",
            (lock_timeout, sql.Identifier(schema).as_string(conn) + ", pg_temp"),
        )
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (migration_lock_key(schema),))
        exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
        if exists is None:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                " version integer PRIMARY KEY,"
                " name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            ).format(sql.Identifier(schema, VERSION_TABLE))
        )
        done = applied_versions(conn, schema)
        for migration in migrations:
            if migration.version in done:
                continue
            # Packaged SQL text, not user input; bytes because it holds several statements.
            conn.execute(migration.render(schema).encode("utf-8"))
            conn.execute(
                sql.SQL("INSERT INTO {} (version, name) VALUES (%s, %s)").format(
                    sql.Identifier(schema, VERSION_TABLE)
                ),
                (migration.version, migration.name),
            )
            applied_now.append(migration.version)
    return applied_now
