"""SQL and URL plumbing of the PostgreSQL journal store: statements, row conversion,
the saga lock key, schema and URL handling, per-connection session setup."""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import fields
from typing import Any, LiteralString
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from sagacity._errors import JournalError, StoreUnavailableError, UnreadableEntryError
from sagacity.journal._entry import JournalEntry, parse_timestamp, render_timestamp
from sagacity.journal._phases import Phase
from sagacity.stores._mark_tables import mark_params
from sagacity.stores._stored_row import stored_entry

DEFAULT_SCHEMA = "public"
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
COLUMNS = tuple(f.name for f in fields(JournalEntry))
"""Journal columns: named and ordered as JournalEntry's fields (migration 0001)."""
_RETRY = "it was NOT written; retry it (appends are idempotent, so retrying is safe)"
_RETRY_UNSURE = (
    "it may or may not have been written (a connection lost mid-transaction cannot tell); "
    "retry it: appends are idempotent, so retrying is safe"
)


def retry_note(exc: BaseException) -> str:
    """What a failed append's caller should know: refused before anything could commit
    (a lock timeout, a closed or exhausted pool) versus lost mid-transaction."""

    certain = (
        psycopg.errors.LockNotAvailable,
        psycopg.errors.QueryCanceled,
        PoolClosed,
        PoolTimeout,
    )
    return _RETRY if isinstance(exc, certain) else _RETRY_UNSURE


_INT4_MAX = 2**31 - 1
"""step and attempt are `integer` columns."""

Conn = psycopg.Connection[TupleRow]


def lock_key(saga_id: str) -> int:
    """Advisory lock key of a saga: signed 64 bits of a domain-separated SHA-256, computed
    here so that every client (any language) derives the same key from the id alone."""
    digest = hashlib.sha256(b"sagacity.lock:" + saga_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _query(url: str) -> tuple[str, list[tuple[str, str]]]:
    """(URL before "?", its query pairs). String surgery, not urlunsplit, which would turn
    `postgresql:///db` (local socket) into `postgresql:/db`."""
    base, _, query = url.partition("?")
    return base, parse_qsl(query, keep_blank_values=True)


def _with_query(base: str, pairs: list[tuple[str, str]]) -> str:
    return f"{base}?{urlencode(pairs, quote_via=quote)}" if pairs else base


def redact_url(url: str) -> str:
    """`url` without its password (userinfo or query parameter): safe for messages."""
    base, pairs = _query(url)
    netloc = urlsplit(base).netloc
    if "@" in netloc:
        userinfo, _, hostinfo = netloc.rpartition("@")
        base = base.replace(netloc, userinfo.split(":", 1)[0] + "@" + hostinfo, 1)
    return _with_query(base, [(k, v) for k, v in pairs if k != "password"])


def split_schema(url: str) -> tuple[str, str]:
    """(libpq URL without the `schema` parameter, schema name)."""
    base, pairs = _query(url)
    schemas = [v for k, v in pairs if k == "schema"]
    rest = [(k, v) for k, v in pairs if k != "schema"]
    return _with_query(base, rest), (schemas[-1] if schemas else DEFAULT_SCHEMA)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def row_to_entry(row: Sequence[Any]) -> JournalEntry:
    """A stored row (COLUMNS order) as an entry. A phase or timestamp no sagacity version
    writes can only come from an edit outside sagacity, and is reported as such; so is a
    row whose columns are not what its bytes say (TamperedEntryError)."""
    try:
        phase = _PHASES[row[5]]
        recorded_at = parse_timestamp(row[10])
    except (KeyError, ValueError, TypeError) as exc:
        raise UnreadableEntryError(
            f"saga {row[0]!r} seq {row[1]}: stored row is not a sagacity entry ({exc}); "
            "it was altered outside sagacity",
            int(row[1]),
        ) from exc
    try:
        return stored_entry(row, phase, recorded_at)
    except UnreadableEntryError as exc:
        raise type(exc)(f"saga {row[0]!r} seq {row[1]}: {exc}", exc.seq) from None


_PHASES = {phase.value: phase for phase in Phase}


def append_args(key: int, e: JournalEntry, *, claim: bool = False) -> tuple[Any, ...]:
    """sagacity_append's arguments: the saga's lock key, the entry (COLUMNS order,
    recorded_at as the hashed text, the payloads only in its material: their columns
    hold ""), the approver registry the entry records (NULLs for none), which the
    function inserts with it, and whether this is a step's claim (begin_step)."""
    return (
        key, e.saga_id, e.seq, e.step, e.attempt, e.tool, e.phase.value, "", "", "",
        e.actor_json, render_timestamp(e.recorded_at), e.prev_hash, e.hash, e.material,
        *mark_params(e), claim,
    )  # fmt: skip


class _Queries:
    """Every statement, rendered once per store with the schema quoted in, as bytes so
    psycopg prepares each one once per connection."""

    def __init__(self, schema: str) -> None:
        self.names: dict[str, sql.Composable] = {
            "cols": sql.SQL(", ").join(map(sql.Identifier, COLUMNS)),
            "journal": sql.Identifier(schema, "sagacity_journal"),
            "fences": sql.Identifier(schema, "sagacity_fences"),
            "append_fn": sql.Identifier(schema, "sagacity_append"),
            "marks": sql.Identifier(schema, "sagacity_registry_marks"),
            "nulls": sql.SQL(", ").join([sql.SQL("NULL")] * len(COLUMNS)),
        }
        self.lock = self._q("SELECT pg_advisory_xact_lock(%s)")
        args = ", ".join(["%s"] * (len(COLUMNS) + 1))
        self.append = self._q("SELECT {append_fn}(") + args.encode() + b", %s, %s, %s)"
        self.newest_marks = self._q(
            "SELECT version, sha256, saga_id, seq FROM {marks}"
            " WHERE version = (SELECT max(version) FROM {marks})"
        )
        self.lookup = self._q(
            "SELECT 0, {cols} FROM {journal} WHERE saga_id = %(saga)s AND step = %(step)s"
            " AND phase = %(phase)s AND attempt = %(attempt)s"
            " UNION ALL"
            " (SELECT 1, {cols} FROM {journal} WHERE saga_id = %(saga)s"
            " ORDER BY seq DESC LIMIT 1)"
        )
        # A step's claim reads its rows (tag 0, seq order), the saga's head (tag 1) and its
        # fence (tag 2, one row when fenced) in one statement: one snapshot, one round
        # trip, where three fetched statements took three.
        self.claim_facts = self._q(
            "SELECT 0, {cols} FROM {journal} WHERE saga_id = %(saga)s AND step = %(step)s"
            " UNION ALL"
            " (SELECT 1, {cols} FROM {journal} WHERE saga_id = %(saga)s"
            " ORDER BY seq DESC LIMIT 1)"
            " UNION ALL"
            " SELECT 2, {nulls} FROM {fences} WHERE saga_id = %(saga)s AND step = %(step)s"
            " ORDER BY 1, 3"
        )
        self.entries = self._q(
            "SELECT {cols} FROM {journal} WHERE saga_id = %s AND seq > %s ORDER BY seq LIMIT %s"
        )
        self.head = self._q(
            "SELECT {cols} FROM {journal} WHERE saga_id = %s ORDER BY seq DESC LIMIT 1"
        )
        self.step = self._q(
            "SELECT {cols} FROM {journal} WHERE saga_id = %s AND step = %s ORDER BY seq"
        )
        self.first_sagas = self._q(
            "SELECT DISTINCT saga_id FROM {journal} ORDER BY saga_id LIMIT %s"
        )
        self.next_sagas = self._q(
            "SELECT DISTINCT saga_id FROM {journal} WHERE saga_id > %s ORDER BY saga_id LIMIT %s"
        )
        self.open_sagas = self._q(
            "SELECT saga_id FROM (SELECT DISTINCT ON (saga_id) saga_id, phase FROM {journal}"
            " ORDER BY saga_id, seq DESC) AS heads WHERE phase <> 'SAGA_CLOSED' ORDER BY saga_id"
        )
        self.fence = self._q(
            "INSERT INTO {fences} (saga_id, step) VALUES (%s, %s) ON CONFLICT DO NOTHING"
        )
        self.is_fenced = self._q(
            "SELECT EXISTS (SELECT 1 FROM {fences} WHERE saga_id = %s AND step = %s)"
        )

    def _q(self, text: LiteralString) -> bytes:
        return sql.SQL(text).format(**self.names).as_bytes(None)


def open_pool(
    conninfo: str,
    kwargs: dict[str, Any],
    shown: str,
    max_size: int,
    open_timeout: float,
    lock_timeout: str,
) -> ConnectionPool[Conn]:
    """The store's connection pool, open, or StoreUnavailableError (`shown`: the URL
    without its password) with nothing left open."""
    pool: ConnectionPool[Conn] = ConnectionPool(
        conninfo,
        min_size=1,
        max_size=max_size,
        kwargs=kwargs,
        configure=_session_setup(lock_timeout),
        open=False,
        name="sagacity-journal",
        timeout=30.0,
    )
    try:
        pool.open(wait=True, timeout=open_timeout)
    except BaseException as exc:
        pool.close()
        if not isinstance(exc, Exception):
            raise
        raise StoreUnavailableError(
            f"cannot open a connection pool to the sagacity journal at {shown} "
            f"({_one_line(exc)}); check that PostgreSQL accepts more connections"
        ) from exc
    return pool


def _session_setup(lock_timeout: str) -> Callable[[Conn], None]:
    """Per-connection setup: bound every lock wait (an append that cannot get its saga's
    lock fails with JournalWriteError instead of hanging a worker), and READ COMMITTED,
    under which sagacity_append's check after the lock sees a fresh snapshot."""

    def configure(conn: Conn) -> None:
        conn.execute(
            "SELECT set_config('lock_timeout', %s, false),"
            " set_config('default_transaction_isolation', 'read committed', false)",
            (lock_timeout,),
        )

    return configure


_SNAPSHOT_ID = re.compile(r"^[0-9A-F]{8}-[0-9A-F]{8}-[0-9]+$")


def begin_snapshot(conn: Conn, snapshot: str | None) -> None:
    """Open the read transaction of `PostgresJournalStore.reading()` and take its
    snapshot now (REPEATABLE READ takes it at the first statement), or import
    `snapshot` (pg_export_snapshot's id, from the process walking beside this one)."""
    conn.execute(b"BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
    try:
        if snapshot is not None:
            if not _SNAPSHOT_ID.match(snapshot):
                raise ValueError(f"{snapshot!r} is not a PostgreSQL snapshot id")
            conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot)))
        conn.execute(b"SELECT 1")
    except BaseException:
        end_snapshot(conn)
        raise


def end_snapshot(conn: Conn) -> None:
    """End the read transaction (nothing was written in it); a connection already lost
    is the pool's to discard."""
    with contextlib.suppress(psycopg.Error):
        conn.execute(b"ROLLBACK")


@contextlib.contextmanager
def read_errors(url: str) -> Iterator[None]:
    """A failed read as the store's errors: the database unreachable (retry), or the
    statement refused."""
    try:
        yield
    except psycopg.OperationalError as exc:
        raise StoreUnavailableError(
            f"cannot read the sagacity journal at {url} ({_one_line(exc)}); "
            "check that PostgreSQL is up and retry"
        ) from exc
    except psycopg.Error as exc:
        raise JournalError(
            f"reading the sagacity journal at {url} failed ({_one_line(exc)})"
        ) from exc
