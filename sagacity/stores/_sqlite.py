"""SQLite journal store: the embedded default (`sqlite:///relative/journal.db`, or
`sqlite:////absolute/journal.db`).

A worker and a CLI may open the same file from different processes, so appends take
SQLite's write lock up front (BEGIN IMMEDIATE) and then read the head: the database file
lock is the cross-process mutex. WAL mode lets readers stream while a writer appends.
Triggers refuse UPDATE and DELETE; SQLite has no TRUNCATE (its `DELETE FROM t` without
WHERE is refused by the same trigger).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote, urlparse

from sagacity._errors import JournalError, JournalWriteError, StoreUnavailableError
from sagacity.approval._registry_marks import JournaledMark
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase
from sagacity.stores._base import Clock, JournalStore, Snapshot, StepClaim, decide_step, next_entry
from sagacity.stores._checkpoint_tables import SQLITE_LOG_SCHEMA, sqlite_log
from sagacity.stores._mark_tables import (
    SQLITE_MARKS_SCHEMA,
    SQLITE_NEWEST,
    marks_of,
    sqlite_record_mark,
)
from sagacity.stores._sqlite_schema import (
    JOURNAL_SCHEMA,
    check_file,
    check_journal_file,
    open_schema,
)
from sagacity.stores._sqlite_values import (
    NotUtf8Text,
    check_row_types,
    fetch,
    fetch_rows,
    needs_type_check,
    row_params,
    row_to_entry,
    saga_match,
    saga_name,
)

if TYPE_CHECKING:
    from sagacity.tlog._log import CheckpointLog
    from sagacity.tlog._note_keys import NoteSigner

_COLUMNS = (
    "saga_id, seq, step, attempt, tool, phase, input_json, result_json, error_json, "
    "actor_json, recorded_at, prev_hash, hash, material"
)
_BATCH = 500
T = TypeVar("T")


_ROWID_TOKEN = "journal-rowid:"


def _rowid_bound(snapshot: str | None) -> int | None:
    if snapshot is None:
        return None
    if not snapshot.startswith(_ROWID_TOKEN) or not snapshot[len(_ROWID_TOKEN) :].isdigit():
        raise ValueError(f"{snapshot!r} is not a SQLite journal snapshot (journal-rowid:N)")
    return int(snapshot[len(_ROWID_TOKEN) :])


def sqlite_path(url: str) -> Path:
    """The file a sqlite: URL names (SQLAlchemy convention: sqlite:///relative.db,
    sqlite:////absolute/path.db)."""
    parsed = urlparse(url)
    raw = unquote(parsed.netloc + parsed.path)
    if not raw or raw == "/":
        raise StoreUnavailableError(
            f"SQLite URL {url!r} names no file; use sqlite:///path/journal.db"
        )
    return Path(raw[1:] if raw.startswith("/") else raw)


@dataclass
class _Slot:
    conn: sqlite3.Connection
    lock: threading.Lock
    closed: bool = False


class SqliteJournalStore(JournalStore):
    """One connection per thread; appends serialized by SQLite's write lock."""

    def __init__(
        self,
        path: Path,
        clock: Clock | None = None,
        *,
        busy_timeout_s: float = 30.0,
        read_only: bool = False,
    ):
        super().__init__(clock)
        self.path = path
        self.url = f"sqlite:///{path}"
        self._busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._slots: list[_Slot] = []
        self._all_lock = threading.Lock()
        self._closed = False
        try:
            if read_only:  # a reader creates no file and no table (NoJournalError)
                check_journal_file(path)
                return
            path.parent.mkdir(parents=True, exist_ok=True)
            check_file(path)
            with self._using() as conn:
                open_schema(conn, path, JOURNAL_SCHEMA + SQLITE_LOG_SCHEMA + SQLITE_MARKS_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            self.close()
            raise StoreUnavailableError(
                f"cannot open the SQLite journal at {path}: {exc}; check the path is writable"
            ) from exc
        except JournalError:
            self.close()
            raise

    @classmethod
    def from_url(cls, url: str, *, clock: Clock | None = None) -> SqliteJournalStore:
        return cls(sqlite_path(url), clock)

    @contextmanager
    def _using(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection, held under its own lock.

        A sqlite3 connection must not be closed while a statement runs on it: `close()`
        takes each connection's lock first, so a straggling thread (an activity's
        to_thread call outliving a cancel) finishes its statement before the close.
        """
        slot: _Slot | None = getattr(self._local, "slot", None)
        if slot is None:
            with self._all_lock:
                if self._closed:
                    raise StoreUnavailableError(f"the SQLite journal at {self.path} is closed")
                conn = sqlite3.connect(
                    self.path,
                    timeout=self._busy_timeout_s,
                    isolation_level=None,
                    check_same_thread=False,
                )
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=FULL")
                slot = _Slot(conn, threading.Lock())
                self._slots.append(slot)
            self._local.slot = slot
        with slot.lock:
            if slot.closed:
                raise StoreUnavailableError(f"the SQLite journal at {self.path} is closed")
            yield slot.conn

    def append(self, draft: EntryDraft) -> JournalEntry:
        def decide(conn: sqlite3.Connection) -> tuple[JournalEntry, JournalEntry | None]:
            existing = self._one(
                conn,
                f"SELECT {_COLUMNS} FROM journal "
                "WHERE saga_id=? AND step=? AND phase=? AND attempt=?",
                (draft.saga_id, draft.step, draft.phase.value, draft.attempt),
            )
            entry = next_entry(
                draft,
                existing=existing,
                head=self._head(conn, draft.saga_id),
                now=self.clock(),
            )
            if entry is None:
                assert existing is not None
                return existing, None
            return entry, entry

        return self._write(draft, decide)

    def begin_step(self, draft: EntryDraft) -> StepClaim:
        def decide(conn: sqlite3.Connection) -> tuple[StepClaim, JournalEntry | None]:
            prior = fetch_rows(
                conn,
                f"SELECT {_COLUMNS} FROM journal WHERE saga_id=? AND step=? ORDER BY seq",
                (draft.saga_id, draft.step),
            )
            fenced = conn.execute(
                "SELECT 1 FROM fences WHERE saga_id=? AND step=?", (draft.saga_id, draft.step)
            ).fetchone()
            return decide_step(
                draft,
                prior=[row_to_entry(row) for row in prior],
                head=self._head(conn, draft.saga_id),
                fenced=fenced is not None,
                now=self.clock(),
            )

        return self._write(draft, decide)

    @staticmethod
    def _one(conn: sqlite3.Connection, sql: str, params: tuple[object, ...]) -> JournalEntry | None:
        rows = fetch_rows(conn, sql, params)
        return row_to_entry(rows[0]) if rows else None

    def _head(self, conn: sqlite3.Connection, saga_id: str) -> JournalEntry | None:
        return self._one(
            conn,
            f"SELECT {_COLUMNS} FROM journal WHERE saga_id=? ORDER BY seq DESC LIMIT 1",
            (saga_id,),
        )

    def _write(
        self,
        draft: EntryDraft,
        decide: Callable[[sqlite3.Connection], tuple[T, JournalEntry | None]],
    ) -> T:
        """One write transaction: SQLite's write lock (BEGIN IMMEDIATE) is the saga lock,
        across threads and processes; `decide` reads and says what to insert. Any failure
        rolls back, so the lock is never left held."""
        with self._using() as conn:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise JournalWriteError(f"journal append not written (lock: {exc}); retry") from exc
            try:
                result, entry = decide(conn)
                if entry is not None:
                    conn.execute(
                        f"INSERT INTO journal ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        row_params(entry),
                    )
                    sqlite_record_mark(conn, entry)  # commits with its entry
                conn.execute("COMMIT")
                return result
            except BaseException as exc:
                conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise JournalWriteError(
                        f"journal append for saga {draft.saga_id!r} not written: {exc}; retry"
                    ) from exc
                if isinstance(exc, ValueError) and not isinstance(exc, JournalError):
                    raise JournalError(
                        f"saga {draft.saga_id!r}: a stored journal row cannot be read ({exc}); "
                        "the journal file was edited outside sagacity: run `sagacity verify`"
                    ) from exc
                raise

    def _rows(self, sql: str, params: tuple[object, ...]) -> list[tuple[object, ...]]:
        with self._using() as conn:
            return fetch_rows(conn, sql, params)

    @contextmanager
    def reading(self, snapshot: str | None = None) -> Iterator[Snapshot]:
        """One read transaction on this thread's connection until the block ends
        (JournalStore.reading): in WAL mode writers go on, and this thread reads the
        journal and the log as of the transaction's first read. Another process cannot
        join it; `snapshot` (share_snapshot's `journal-rowid:N`) bounds the chains this
        block reads to the rows that were in the sharer's snapshot instead: SQLite
        gives a new row a larger row id than every row committed before it (the journal
        deletes nothing; a VACUUM of the file during the walk renumbers rows: run again)."""
        held: Snapshot | None = getattr(self._local, "snapshot", None)
        if held is not None:
            yield held
            return
        upto = _rowid_bound(snapshot)
        with self._using() as conn:
            conn.execute("BEGIN")
            try:  # a deferred BEGIN takes its snapshot at the first read: now
                conn.execute("SELECT 1 FROM journal LIMIT 1").fetchall()
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        self._local.snapshot, self._local.upto = Snapshot(self.clock()), upto
        try:
            yield self._local.snapshot
        finally:
            self._local.snapshot = self._local.upto = None
            with suppress(StoreUnavailableError), self._using() as conn:  # closed: ended
                conn.execute("ROLLBACK")

    def share_snapshot(self) -> str | None:
        if getattr(self._local, "snapshot", None) is None:
            return None
        ((last,),) = self._rows("SELECT COALESCE(MAX(rowid), 0) FROM journal", ())
        return f"{_ROWID_TOKEN}{last}"

    def entries(self, saga_id: str, *, after_seq: int = 0) -> Iterator[JournalEntry]:
        return map(self.entry_of, self.stored_rows(saga_id, after_seq=after_seq))

    def entry_of(self, row: Sequence[Any]) -> JournalEntry:
        return row_to_entry(tuple(row))

    def stored_rows(self, saga_id: str, *, after_seq: int = 0) -> Iterator[Sequence[Any]]:
        """Keyset pagination in batches: constant memory, and no read transaction but
        `reading()`'s (whose row-id bound, from another process, applies here). Paged on
        the stored seq itself (a seq edited to text or a BLOB is read, not a
        reason to stop or repeat); `saga_id` as `sagas()` lists it. A row with a column
        of the wrong storage type (a BLOB, text that is not UTF-8) raises
        UnreadableEntryError naming it, as `entry_of` would: verification reports it at
        its seq before any check of its values sees a type it does not expect."""
        match, key = saga_match(saga_id)
        last: object = after_seq
        after, place = "?", after_seq + 1
        upto: int | None = getattr(self._local, "upto", None)
        bound, bounds = ("", ()) if upto is None else (" AND rowid<=?", (upto,))
        while True:
            with self._using() as conn:
                rows, undecodable = fetch(
                    conn,
                    f"SELECT {_COLUMNS} FROM journal WHERE saga_id={match} "
                    f"AND seq>{after}{bound} ORDER BY seq LIMIT ?",
                    (key, last, *bounds, _BATCH),
                )
            for row in rows:
                if undecodable or needs_type_check(row):
                    check_row_types(row, place)
                place = int(row[1]) + 1 if type(row[1]) is int else place
                yield row
            if len(rows) < _BATCH:
                return
            last = rows[-1][1]
            after = "?"
            if isinstance(last, NotUtf8Text):
                after, last = "CAST(? AS TEXT)", last.raw

    def head(self, saga_id: str) -> JournalEntry | None:
        rows = self._rows(
            f"SELECT {_COLUMNS} FROM journal WHERE saga_id=? ORDER BY seq DESC LIMIT 1",
            (saga_id,),
        )
        return row_to_entry(rows[0]) if rows else None

    def sagas(self) -> Iterator[str]:
        """Every stored saga_id in SQLite's order (TEXT by its bytes, then BLOBs), paged
        on the stored value itself, so the walk always moves on. A saga_id that is not
        UTF-8 TEXT is listed under its odd name (sqlite_values): its rows are verified,
        and reported unreadable, never hidden."""
        after = ">=?"
        last: object = ""  # from here every TEXT and BLOB (the schema refuses NULL)
        while True:
            rows = self._rows(
                f"SELECT DISTINCT saga_id FROM journal WHERE saga_id{after} "
                "ORDER BY saga_id LIMIT ?",
                (last, _BATCH),
            )
            for (saga,) in rows:
                yield saga_name(saga)
            if len(rows) < _BATCH:
                return
            match, last = saga_match(saga_name(rows[-1][0]))
            after = f">{match}"

    def open_sagas(self) -> Iterator[str]:
        """One query over every chain's head (SQLite takes `phase` from the row of the
        group's max(seq)); odd saga ids named as `sagas()` names them."""
        rows = self._rows(
            "SELECT saga_id, phase, max(seq) FROM journal GROUP BY saga_id ORDER BY saga_id", ()
        )
        for saga, phase, _ in rows:
            if phase != Phase.SAGA_CLOSED.value:
                yield saga_name(saga)

    def step_entries(self, saga_id: str, step: int) -> list[JournalEntry]:
        rows = self._rows(
            f"SELECT {_COLUMNS} FROM journal WHERE saga_id=? AND step=? ORDER BY seq",
            (saga_id, step),
        )
        return [row_to_entry(row) for row in rows]

    def registry_marks(self) -> list[JournaledMark]:
        return marks_of(self._rows(SQLITE_NEWEST, ()))

    def fence(self, saga_id: str, step: int) -> None:
        with self._using() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO fences (saga_id, step) VALUES (?, ?)", (saga_id, step)
            )

    def is_fenced(self, saga_id: str, step: int) -> bool:
        return bool(self._rows("SELECT 1 FROM fences WHERE saga_id=? AND step=?", (saga_id, step)))

    def checkpoint_log(self, signer: NoteSigner | None = None) -> CheckpointLog:
        return sqlite_log(self._using, self.url, signer, self.clock)

    checks_columns = True

    def close(self) -> None:
        with self._all_lock:
            self._closed = True
            slots, self._slots = self._slots, []
        for slot in slots:
            with slot.lock:
                slot.closed = True
                slot.conn.close()
