"""PostgreSQL journal store: the production backend.

URL: ``postgresql://user[:password]@host[:port]/database[?schema=NAME&<libpq params>]``.
Tables live in the schema named by the optional ``schema`` parameter (default ``public``),
which sagacity strips before libpq sees the URL, creates if needed, and uses to qualify
every name, so nothing depends on search_path. Tests isolate each module in a fresh
schema this way; deployments can keep the journal apart from other tables.

Opening migrates (a read-only opening only checks: sagacity.stores._migrations) over one
direct connection first, which reports an unreachable database promptly with libpq's
reason and leaves no pool; then the pool opens with a bounded wait, closed on any failure.

Append has two paths; next_entry (sagacity.stores._base) makes every decision on both.

- Locked (two round trips, pipeline mode): ``BEGIN; pg_advisory_xact_lock(key);
  <existing-key lookup UNION ALL head>``, decide in Python, ``SELECT sagacity_append(...);
  COMMIT``. Lock and lookup are separate statements: under READ COMMITTED a statement's
  snapshot is taken when it starts, so a head read in the lock's statement could be stale.
- Optimistic (one round trip): when this store itself saw the saga's last entry, it
  seals the next entry against that cached head and calls `sagacity_append` (migration
  0001), which takes the lock and inserts only if the key is free and the head is still
  the one the entry links to. A miss falls back to the locked path; a saga that saw
  another writer stays there until this store is alone on it again. Only inserts are
  decided on the guess, checked by the database under the lock; returning an existing
  entry, conflicts and closed sagas are decided from rows read under the lock.

begin_step (a tool step's claim) has the same two paths, with `sagacity_append` as a
claim for the one-round-trip check: sagacity.stores._postgres_claim.

Measured for one writer: locked path about 0.4x a plain INSERT, optimistic about 0.65x
(target 0.6x). Pooled connections set lock_timeout once (instead of a SET LOCAL per
append) and READ COMMITTED, which the after-the-lock checks rely on.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool

from sagacity._errors import (
    InvalidEntryError,
    JournalConflictError,
    JournalWriteError,
    SagaClosedError,
    StoreUnavailableError,
)
from sagacity.approval._registry_marks import JournaledMark
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.stores._base import Clock, JournalStore, Snapshot, StepClaim, next_entry
from sagacity.stores._mark_tables import marks_of
from sagacity.stores._migrations import check_readable, migrate
from sagacity.stores._postgres_claim import claim_locked, claim_optimistic, locked_transaction
from sagacity.stores._postgres_sql import (
    _INT4_MAX,
    _RETRY,
    _SCHEMA_NAME,
    COLUMNS,
    DEFAULT_SCHEMA,
    Conn,
    _one_line,
    _Queries,
    append_args,
    begin_snapshot,
    end_snapshot,
    lock_key,
    open_pool,
    read_errors,
    redact_url,
    retry_note,
    row_to_entry,
    split_schema,
)

__all__ = [
    "COLUMNS",
    "DEFAULT_SCHEMA",
    "PostgresJournalStore",
    "lock_key",
    "redact_url",
    "row_to_entry",
    "split_schema",
]

if TYPE_CHECKING:
    from sagacity.tlog._log import CheckpointLog
    from sagacity.tlog._note_keys import NoteSigner

T = TypeVar("T")


class PostgresJournalStore(JournalStore):
    """Journal in PostgreSQL: one chain per saga, appends serialized per saga by an advisory
    transaction lock, (saga_id, seq) unique as the safety net, UPDATE/DELETE/TRUNCATE
    refused by triggers enabled ALWAYS."""

    batch_size = 1000
    """Rows per round trip when streaming entries or saga ids (keyset pagination keeps
    memory constant and holds no connection between batches)."""
    head_cache_size = 10_000

    def __init__(
        self,
        pool: ConnectionPool[Conn],
        *,
        schema: str,
        url: str,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(clock)
        self.url = url
        self.schema = schema
        self._pool = pool
        self._q = _Queries(schema)
        self._heads: dict[str, tuple[JournalEntry, bool]] = {}
        """saga -> (last head this store saw, whether to try the one-round-trip path)."""
        self._stripes = [threading.Lock() for _ in range(64)]
        self._reader = threading.local()
        """This thread's pinned read connection and snapshot during `reading()`."""

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        clock: Clock | None = None,
        max_size: int = 10,
        open_timeout: float = 5.0,
        lock_timeout: str = "5s",
        read_only: bool = False,
    ) -> PostgresJournalStore:
        """Open (and migrate; `read_only`: only check, check_readable) the journal at `url`;
        StoreUnavailableError promptly when it cannot be reached, logged into or migrated.

        `max_size` bounds the pool, `open_timeout` (seconds) bounds connecting and
        opening, and `lock_timeout` (a Postgres interval) bounds how long an append waits
        for its saga's lock before failing with JournalWriteError."""
        shown = redact_url(url)
        conninfo, schema = split_schema(url)
        if not _SCHEMA_NAME.match(schema):
            raise StoreUnavailableError(
                f"journal URL {shown}: schema {schema!r} is not a plain identifier; "
                "use letters, digits and underscores (at most 63)"
            )
        kwargs: dict[str, Any] = {"autocommit": True}
        try:
            if "connect_timeout" not in psycopg.conninfo.conninfo_to_dict(conninfo):
                kwargs["connect_timeout"] = max(2, round(open_timeout))
            conn = psycopg.connect(conninfo, **kwargs)
        except psycopg.Error as exc:
            raise StoreUnavailableError(
                f"cannot reach the sagacity journal at {shown} ({_one_line(exc)}); "
                "check that PostgreSQL is running and the URL's host, port, database, "
                "user and password are right"
            ) from exc
        try:
            with conn:
                (check_readable if read_only else migrate)(conn, schema)
        except psycopg.Error as exc:
            raise StoreUnavailableError(
                f"cannot migrate the sagacity journal schema {schema!r} at {shown} "
                f"({_one_line(exc)}); open it once as a role that may create the schema "
                "and its tables"
            ) from exc
        pool = open_pool(conninfo, kwargs, shown, max_size, open_timeout, lock_timeout)
        return cls(pool, schema=schema, url=shown, clock=clock)

    def append(self, draft: EntryDraft) -> JournalEntry:
        for value, what in ((draft.step, "step"), (draft.attempt, "attempt")):
            if value > _INT4_MAX:
                raise InvalidEntryError(
                    f"{what} {value} is over {_INT4_MAX}, the PostgreSQL journal's limit; "
                    "nothing was written"
                )
        return self._on_saga_connection(draft, f"{draft.phase} step {draft.step}", self._append_on)

    def _append_on(self, conn: Conn, draft: EntryDraft, key: int) -> JournalEntry:
        cached = self._heads.get(draft.saga_id)
        if cached is not None and cached[1]:
            entry = self._append_optimistic(conn, draft, key, cached[0])
            if entry is not None:
                return entry
        return self._append_locked(conn, draft, key, cached[0] if cached else None)

    def _append_optimistic(
        self, conn: Conn, draft: EntryDraft, key: int, head: JournalEntry
    ) -> JournalEntry | None:
        """One round trip if `head` (cached) is still the head and the key is free; None
        on any miss. Only an insert is decided here, and the database checks it under the
        lock; the cache knows nothing of `existing`, so refusals are left to the locked
        path, which reads the facts."""
        try:
            entry = next_entry(draft, existing=None, head=head, now=self.clock())
        except (JournalConflictError, SagaClosedError):
            return None
        if entry is None:
            return None
        row = conn.execute(self._q.append, append_args(key, entry), prepare=True).fetchone()
        if row is None or row[0] != 0:
            return None
        self._remember(entry, True)
        return entry

    def _append_locked(
        self, conn: Conn, draft: EntryDraft, key: int, previous: JournalEntry | None
    ) -> JournalEntry:
        """Lock, read, decide, insert, commit: one transaction in two round trips (pipeline
        mode). Waiting in the lock queue, it cannot lose a race, so contention costs time,
        never starvation. Conflict and closed-saga errors propagate after rollback."""
        saga, step, phase, attempt = draft.key
        lookup = {"saga": saga, "step": step, "phase": phase, "attempt": attempt}
        with locked_transaction(conn, self._q.lock, key):
            found: list[JournalEntry | None] = [None, None]
            for row in conn.execute(self._q.lookup, lookup, prepare=True).fetchall():
                found[row[0]] = row_to_entry(row[1:])
            existing, head = found
            entry = next_entry(draft, existing=existing, head=head, now=self.clock())
            if entry is not None:
                inserted = conn.execute(self._q.append, append_args(key, entry), prepare=True)
        # Optimistic next time only if nobody else wrote since our last append here.
        alone = previous is None or (head is not None and head.hash == previous.hash)
        if entry is None:
            assert existing is not None
            if head is not None:
                self._remember(head, alone)
            return existing
        outcome = inserted.fetchone()
        if outcome is None or outcome[0] != 0:
            raise JournalWriteError(
                f"saga {draft.saga_id!r}: the database refused {draft.phase} step {draft.step} "
                f"under the saga's lock ({outcome}): something writes without the lock; "
                f"{_RETRY}"
            )
        self._remember(entry, alone)
        return entry

    def begin_step(self, draft: EntryDraft) -> StepClaim:
        """Claim a step under the saga's lock, so two attempts of one step cannot both
        claim it: one round trip when this store wrote the saga's head, else two (three
        when the one-round-trip try misses); sagacity.stores._postgres_claim says how."""
        return self._on_saga_connection(draft, f"INTENT for step {draft.step}", self._begin_step_on)

    def _begin_step_on(self, conn: Conn, draft: EntryDraft, key: int) -> StepClaim:
        cached = self._heads.get(draft.saga_id)
        if cached is not None and cached[1]:
            won = claim_optimistic(conn, self._q, draft, key, cached[0], clock=self.clock)
            if won is not None:
                self._remember(won[1], True)
                return won[0]
        return self._begin_step_locked(conn, draft, key)

    def _begin_step_locked(self, conn: Conn, draft: EntryDraft, key: int) -> StepClaim:
        claim, entry, head = claim_locked(conn, self._q, draft, key, clock=self.clock)
        if entry is not None:
            cached = self._heads.get(draft.saga_id)
            alone = cached is None or (head is not None and head.hash == cached[0].hash)
            self._remember(entry, alone)
        return claim

    def _on_saga_connection(
        self, draft: EntryDraft, what: str, work: Callable[[Conn, EntryDraft, int], T]
    ) -> T:
        """Run `work` on a pooled connection, holding this process's stripe of the saga's
        lock (so local threads queue here instead of in the database), and turn database
        errors into JournalWriteError saying whether the write may have happened."""
        key = lock_key(draft.saga_id)
        try:
            with self._stripes[key % len(self._stripes)], self._pool.connection() as conn:
                return work(conn, draft, key)
        except psycopg.Error as exc:
            raise self._not_written(
                draft.saga_id, f"{what} could not be journaled", exc, retry_note(exc)
            ) from exc

    def _not_written(
        self, saga_id: str, what: str, exc: psycopg.Error, advice: str
    ) -> JournalWriteError:
        """A failed write, said one way: saga, what and where, the error, what to do."""
        return JournalWriteError(
            f"saga {saga_id!r}: {what} at {self.url} ({_one_line(exc)}); {advice}"
        )

    def _remember(self, head: JournalEntry, optimistic: bool) -> None:
        if len(self._heads) >= self.head_cache_size:
            self._heads.clear()  # a miss costs one locked append; correctness never depends on it
        self._heads[head.saga_id] = (head, optimistic)

    @contextlib.contextmanager
    def reading(self, snapshot: str | None = None) -> Iterator[Snapshot]:
        """Read through one pooled connection, in one REPEATABLE READ READ ONLY
        transaction, until the block ends (this thread only; JournalStore.reading):
        chains, saga ids, checkpoint leaves and tree heads all as of one snapshot (an
        exported one with `snapshot`). One connection, not one per query, also saves the
        pool's 1-3 µs per entry (docs/benchmarks.md)."""
        held: Snapshot | None = getattr(self._reader, "snapshot", None)
        if held is not None:
            yield held
            return
        with self._pool.connection() as conn:
            with read_errors(self.url):
                begin_snapshot(conn, snapshot)
            self._reader.conn, self._reader.snapshot = conn, Snapshot(self.clock())
            try:
                yield self._reader.snapshot
            finally:
                self._reader.conn = self._reader.snapshot = None
                end_snapshot(conn)

    def share_snapshot(self) -> str | None:
        pinned: Conn | None = getattr(self._reader, "conn", None)
        if pinned is None:
            return None
        rows = self._fetch(b"SELECT pg_export_snapshot()", ())
        return str(rows[0][0])

    @contextlib.contextmanager
    def connection(self) -> Iterator[Conn]:
        """This thread's `reading()` connection, or a pooled one for one read."""
        pinned: Conn | None = getattr(self._reader, "conn", None)
        if pinned is not None:
            yield pinned
            return
        with self._pool.connection() as conn:
            yield conn

    def _fetch(self, query: bytes, params: Sequence[Any]) -> list[TupleRow]:
        with read_errors(self.url), self.connection() as conn:
            return conn.execute(query, params, prepare=True).fetchall()

    def entries(self, saga_id: str, *, after_seq: int = 0) -> Iterator[JournalEntry]:
        return map(row_to_entry, self.stored_rows(saga_id, after_seq=after_seq))

    def stored_rows(self, saga_id: str, *, after_seq: int = 0) -> Iterator[Sequence[Any]]:
        last = after_seq
        while True:
            rows = self._fetch(self._q.entries, (saga_id, last, self.batch_size))
            yield from rows
            if len(rows) < self.batch_size:
                return
            last = rows[-1][1]

    def entry_of(self, row: Sequence[Any]) -> JournalEntry:
        return row_to_entry(row)

    def head(self, saga_id: str) -> JournalEntry | None:
        rows = self._fetch(self._q.head, (saga_id,))
        return row_to_entry(rows[0]) if rows else None

    def sagas(self) -> Iterator[str]:
        rows = self._fetch(self._q.first_sagas, (self.batch_size,))
        while True:
            for row in rows:
                yield row[0]
            if len(rows) < self.batch_size:
                return
            rows = self._fetch(self._q.next_sagas, (rows[-1][0], self.batch_size))

    def open_sagas(self) -> Iterator[str]:
        """One query over every chain's head (a head read per saga cost ~0.6 ms each)."""
        for row in self._fetch(self._q.open_sagas, ()):
            yield row[0]

    def step_entries(self, saga_id: str, step: int) -> list[JournalEntry]:
        return [row_to_entry(row) for row in self._fetch(self._q.step, (saga_id, step))]

    def registry_marks(self) -> list[JournaledMark]:
        return marks_of(self._fetch(self._q.newest_marks, ()))

    def fence(self, saga_id: str, step: int) -> None:
        try:
            with self._pool.connection() as conn:
                conn.execute(self._q.fence, (saga_id, step), prepare=True)
        except psycopg.Error as exc:
            raise self._not_written(
                saga_id,
                f"fence for step {step} could not be written",
                exc,
                "retry it (fencing is idempotent)",
            ) from exc

    def is_fenced(self, saga_id: str, step: int) -> bool:
        rows = self._fetch(self._q.is_fenced, (saga_id, step))
        return bool(rows and rows[0][0])

    def checkpoint_log(self, signer: NoteSigner | None = None) -> CheckpointLog:
        from sagacity.stores._checkpoint_tables import PostgresLog

        return PostgresLog(
            self._pool.connection, self.connection, self.schema, self.url, signer, self.clock
        )

    checks_columns = True

    def close(self) -> None:
        self._pool.close()
