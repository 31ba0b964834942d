"""How the PostgreSQL journal store claims a tool step (`begin_step`), and the locked
transaction it shares with appends.

Two paths, as for append (sagacity.stores._postgres), decided by the store's head cache:

- Optimistic (one round trip, one commit): the store wrote the saga's last entry, so it
  seals INTENT against that head and calls `sagacity_append` as a claim (migration 0001),
  which takes the saga's advisory lock and inserts only if the step has no entry and no
  fence and the head is still that one. Only a plain claim is decided on the guess, and
  the database checks it under the lock.
- Locked (two round trips, one commit), taken on any miss: ``BEGIN``, the lock and one
  statement reading the step's rows, the head and the fence | the insert and ``COMMIT``.
  The read is a statement after the lock's, so under READ COMMITTED its one snapshot
  sees every write committed before the lock was granted. A recorded outcome, an
  earlier attempt's INTENT, the fence and conflicts are decided here (`decide_step`).

The three reads were three statements, each fetched on its own (a fetch flushes the
pipeline and waits): a step took five round trips, now two (docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import psycopg
from psycopg.pq import TransactionStatus

from sagacity._errors import JournalConflictError, JournalWriteError, SagaClosedError
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.stores._base import Clock, StepClaim, decide_step
from sagacity.stores._postgres_sql import _RETRY, Conn, _Queries, append_args, row_to_entry

__all__ = ["claim_locked", "claim_optimistic", "locked_transaction"]


@contextlib.contextmanager
def locked_transaction(conn: Conn, lock: bytes, key: int) -> Iterator[None]:
    """One pipelined transaction holding the saga's advisory lock (`lock` is the prepared
    lock statement); rolled back on any failure (a broken connection is discarded by the
    pool)."""
    try:
        with conn.pipeline():
            conn.execute(b"BEGIN")
            conn.execute(lock, (key,), prepare=True)
            yield
            conn.execute(b"COMMIT")
    except BaseException:
        if conn.info.transaction_status != TransactionStatus.IDLE:
            with contextlib.suppress(psycopg.Error):
                conn.rollback()
        raise


def claim_optimistic(
    conn: Conn,
    q: _Queries,
    draft: EntryDraft,
    key: int,
    head: JournalEntry,
    *,
    clock: Clock,
) -> tuple[StepClaim, JournalEntry] | None:
    """(claim, the INTENT inserted) in one round trip if the step is untouched and `head`
    (cached) is still the head; None on any miss, for the locked path to decide from the
    facts. A non-INTENT draft raises ValueError before anything is sent."""
    try:
        claim, entry = decide_step(draft, prior=[], head=head, fenced=False, now=clock())
    except (JournalConflictError, SagaClosedError):
        return None
    if entry is None:
        return None
    row = conn.execute(q.append, append_args(key, entry, claim=True), prepare=True).fetchone()
    if row is None or row[0] != 0:
        return None
    return claim, entry


def claim_locked(
    conn: Conn, q: _Queries, draft: EntryDraft, key: int, *, clock: Clock
) -> tuple[StepClaim, JournalEntry | None, JournalEntry | None]:
    """(claim, the INTENT inserted or None, the head read under the lock), decided from
    the step's rows, the head and the fence read in one statement under the lock."""
    saga, step = draft.saga_id, draft.step
    inserted = None
    with locked_transaction(conn, q.lock, key):
        rows = conn.execute(q.claim_facts, {"saga": saga, "step": step}, prepare=True).fetchall()
        head = next((row_to_entry(row[1:]) for row in rows if row[0] == 1), None)
        claim, entry = decide_step(
            draft,
            prior=[row_to_entry(row[1:]) for row in rows if row[0] == 0],
            head=head,
            fenced=any(row[0] == 2 for row in rows),
            now=clock(),
        )
        if entry is not None:
            inserted = conn.execute(q.append, append_args(key, entry), prepare=True)
    if entry is None:
        return claim, None, head
    outcome = inserted.fetchone() if inserted is not None else None
    if outcome is None or outcome[0] != 0:
        raise JournalWriteError(
            f"saga {saga!r}: the database refused INTENT step {step} under the saga's lock "
            f"({outcome}): something writes without the lock; {_RETRY}"
        )
    return claim, entry, head
