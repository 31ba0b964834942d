"""The checkpoint log's tables on each journal backend (sagacity.tlog._log).

The log shares its journal's database and connections: SQLite's file (or, for the
in-memory journal, a private in-memory SQLite database) and PostgreSQL's pool and schema
(migration 0001). Only locking and placeholders differ.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sagacity._errors import JournalError, StoreUnavailableError
from sagacity.journal._entry import Clock
from sagacity.tlog._log import CheckpointLog, CheckpointLogUnavailableError, Execute, Rows
from sagacity.tlog._note_keys import NoteSigner

Using = Callable[[], contextlib.AbstractContextManager[Any]]
"""A connection held for the block: the store's own (its lock, its pool, its snapshot)."""

SQLITE_LOG_SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (
    log_index INTEGER NOT NULL PRIMARY KEY CHECK (log_index >= 0),
    saga_id TEXT NOT NULL,
    entries INTEGER NOT NULL CHECK (entries >= 1),
    head_hash TEXT NOT NULL,
    note TEXT NOT NULL,
    UNIQUE (saga_id, entries)
);
CREATE TABLE IF NOT EXISTS log_nodes (
    level INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    hash BLOB NOT NULL,
    PRIMARY KEY (level, idx)
);
CREATE TABLE IF NOT EXISTS log_heads (
    size INTEGER NOT NULL PRIMARY KEY,
    root BLOB NOT NULL,
    note TEXT NOT NULL
);
""" + "".join(
    f"CREATE TRIGGER IF NOT EXISTS {table}_no_{op.lower()} BEFORE {op} ON {table} BEGIN "
    f"SELECT RAISE(ABORT, 'sagacity checkpoint log is append-only: {op} refused'); END;\n"
    for table in ("checkpoints", "log_nodes", "log_heads")
    for op in ("UPDATE", "DELETE")
)
_SQLITE_NAMES = {"cp": "checkpoints", "nodes": "log_nodes", "heads": "log_heads"}


def _write_error(what: str, exc: Exception) -> CheckpointLogUnavailableError:
    return CheckpointLogUnavailableError(
        f"the checkpoint log at {what} was not written ({exc}); retry"
    )


class _SqliteLog(CheckpointLog):
    """The log in a SQLite database; BEGIN IMMEDIATE takes the file's write lock."""

    def __init__(
        self,
        using: Callable[[], contextlib.AbstractContextManager[sqlite3.Connection]],
        url: str,
        signer: NoteSigner | None,
        clock: Clock | None,
    ) -> None:
        super().__init__(signer, clock)
        self._using = using
        self.url = url

    def _sql(self, template: str) -> str:
        return template.format(**_SQLITE_NAMES)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[Execute]:
        with self._using() as conn:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _write_error(self.url, exc) from exc
            try:
                yield lambda sql, params: conn.execute(sql, tuple(params)).fetchall()
                conn.execute("COMMIT")
            except BaseException as exc:
                conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise _write_error(self.url, exc) from exc
                raise

    def _read(self, sql: str, params: Sequence[object]) -> Rows:
        try:
            with self._using() as conn:
                return conn.execute(sql, tuple(params)).fetchall()
        except sqlite3.Error as exc:
            raise JournalError(f"reading the checkpoint log at {self.url} failed: {exc}") from exc


def sqlite_log(
    using: Using, url: str, signer: NoteSigner | None, clock: Clock | None
) -> CheckpointLog:
    """The log in the SQLite journal file `url`, on the store's connections (`using`)."""
    return _SqliteLog(using, url, signer, clock)


def memory_database() -> Callable[[], contextlib.AbstractContextManager[sqlite3.Connection]]:
    """A private in-memory SQLite database for the in-memory journal's log (tests), with
    the same SQL as the file backend."""
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    conn.executescript(SQLITE_LOG_SCHEMA)
    lock = threading.Lock()

    @contextlib.contextmanager
    def using() -> Iterator[sqlite3.Connection]:
        with lock:
            yield conn

    return using


def memory_log(
    using: Callable[[], contextlib.AbstractContextManager[sqlite3.Connection]],
    signer: NoteSigner | None,
    clock: Clock | None,
) -> CheckpointLog:
    return _SqliteLog(using, "memory://", signer, clock)


class PostgresLog(CheckpointLog):
    """The log in the PostgreSQL journal's `schema`, with one advisory transaction lock for
    the whole log: written on a pooled connection (`writing`), read on the store's
    `reading()` one when in a block (`reading`)."""

    LOCK_KEY = 0x5A6A_C17E_C0DE_0001
    """Advisory lock key of the log (journal sagas use keys hashed from their ids)."""

    def __init__(
        self,
        writing: Using,
        reading: Using,
        schema: str,
        url: str,
        signer: NoteSigner | None,
        clock: Clock | None,
    ) -> None:
        super().__init__(signer, clock)
        from psycopg import sql

        self._writing, self._reading = writing, reading
        self.url = url
        names = {
            key: sql.Identifier(schema, table).as_string(None)
            for key, table in (
                ("cp", "sagacity_checkpoints"),
                ("nodes", "sagacity_log_nodes"),
                ("heads", "sagacity_log_heads"),
            )
        }
        self._names = names

    def _sql(self, template: str) -> str:
        return template.format(**self._names).replace("?", "%s")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[Execute]:
        import psycopg

        def execute(sql: str, params: Sequence[object]) -> Rows:
            cursor = conn.execute(sql.encode(), params, prepare=True)
            return list(cursor.fetchall()) if cursor.description else []

        try:
            with self._writing() as conn, conn.transaction():
                conn.execute(b"SELECT pg_advisory_xact_lock(%s)", (self.LOCK_KEY,))
                yield execute
        except psycopg.Error as exc:
            raise _write_error(self.url, exc) from exc

    def _read(self, sql: str, params: Sequence[object]) -> Rows:
        import psycopg

        try:  # on the store's `reading()` connection when in one: the same snapshot
            with self._reading() as conn:
                return list(conn.execute(sql.encode(), params, prepare=True).fetchall())
        except psycopg.OperationalError as exc:
            raise StoreUnavailableError(
                f"cannot read the checkpoint log at {self.url} ({exc}); retry"
            ) from exc
        except psycopg.Error as exc:
            raise JournalError(f"reading the checkpoint log at {self.url} failed ({exc})") from exc
