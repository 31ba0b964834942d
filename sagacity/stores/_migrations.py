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
- Each version row keeps the SHA-256 of the file it applied. A schema whose rows are not
  a prefix of this package's files (a version this package does not have, a file of the
  same number with other text, rows without a digest, as pre-release journals have) is
  refused with IncompatibleJournalError before anything is read or written: otherwise
  its entries would read as tampered and its first write would fail on a function the
  schema does not have.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

from sagacity._errors import IncompatibleJournalError, NoJournalError

VERSION_TABLE = "sagacity_schema_version"
_FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql_text: str

    @property
    def sha256(self) -> str:
        """The digest recorded with the version: what was applied, not only its number."""
        return hashlib.sha256(self.sql_text.encode("utf-8")).hexdigest()

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


@dataclass(frozen=True, slots=True)
class Applied:
    """A version row: the file's name and digest (None where the table keeps none)."""

    name: str
    sha256: str | None


def applied_versions(conn: psycopg.Connection[TupleRow], schema: str) -> dict[int, Applied]:
    """Versions recorded in `schema` with their file's name and digest (None in a version
    table that has no digest column); empty when the version table does not exist yet."""
    table = sql.Identifier(schema, VERSION_TABLE)
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table.as_string(conn),)).fetchone()
    if not exists or not exists[0]:
        return {}
    digest = conn.execute(
        "SELECT 1 FROM information_schema.columns"
        " WHERE table_schema = %s AND table_name = %s AND column_name = 'sha256'",
        (schema, VERSION_TABLE),
    ).fetchone()
    column = sql.SQL("sha256" if digest else "NULL")
    query = sql.SQL("SELECT version, name, {} FROM {}").format(column, table)
    rows = conn.execute(query).fetchall()
    return {int(row[0]): Applied(str(row[1]), row[2]) for row in rows}


def check_applied(applied: dict[int, Applied], migrations: list[Migration], schema: str) -> None:
    """Refuses a schema this package did not make: every recorded version must be one of
    its files, with the same name and digest."""
    known = {m.version: m for m in migrations}
    for version in sorted(applied):
        row, ours = applied[version], known.get(version)
        if ours is not None and (row.name, row.sha256) == (ours.name, ours.sha256):
            continue
        what = (
            f"version {version} ({row.name[:80]!r}), which this sagacity does not have"
            if ours is None
            else f"version {version} ({row.name[:80]!r}) applied from another text than this "
            f"sagacity's {version:04d}_{ours.name}.sql"
            + (" (no digest recorded: a pre-release journal)" if row.sha256 is None else "")
        )
        raise IncompatibleJournalError(
            f"the journal schema {schema!r} records {what}: it was made by another version "
            "of sagacity, which this one does not read or write. Keep it as evidence with "
            "the version that wrote it (sagacity export), and give this worker a new schema "
            "(?schema=NAME in the journal URL) or a new database"
        )


def check_readable(conn: psycopg.Connection[TupleRow], schema: str) -> None:
    """What a reader (`sagacity journal`, verify, export...) does instead of migrating:
    refuse a schema with no journal (NoJournalError), one another sagacity made, or one
    not migrated to this version yet, and create nothing at all: reading a journal must
    not leave a schema and six empty tables behind a mistyped URL."""
    applied = applied_versions(conn, schema)
    if not applied:
        raise NoJournalError(
            f"no sagacity journal in schema {schema!r} of this database: no worker has "
            "written one there (nothing was created); check the URL and its ?schema="
        )
    migrations = load_migrations()
    check_applied(applied, migrations, schema)
    missing = sorted({m.version for m in migrations} - applied.keys())
    if missing:
        raise IncompatibleJournalError(
            f"the journal schema {schema!r} lacks migration(s) {missing} of this sagacity; "
            "a read changes nothing: start a worker of this version on it once to migrate it"
        )


def migrate(
    conn: psycopg.Connection[TupleRow], schema: str, *, lock_timeout: str = "30s"
) -> list[int]:
    """Bring `schema` up to the newest migration; returns the versions applied now.

    `conn` must be in autocommit mode (each run is its own transaction). Errors propagate
    as psycopg errors; the caller turns them into StoreUnavailableError.
    """
    migrations = load_migrations()
    wanted = {m.version for m in migrations}
    applied = applied_versions(conn, schema)
    check_applied(applied, migrations, schema)
    if wanted <= applied.keys():
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
                " sha256 text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            ).format(sql.Identifier(schema, VERSION_TABLE))
        )
        done = applied_versions(conn, schema)
        check_applied(done, migrations, schema)  # another opener may have written meanwhile
        for migration in migrations:
            if migration.version in done:
                continue
            # Packaged SQL text, not user input; bytes because it holds several statements.
            conn.execute(migration.render(schema).encode("utf-8"))
            conn.execute(
                sql.SQL("INSERT INTO {} (version, name, sha256) VALUES (%s, %s, %s)").format(
                    sql.Identifier(schema, VERSION_TABLE)
                ),
                (migration.version, migration.name, migration.sha256),
            )
            applied_now.append(migration.version)
    return applied_now
