"""The journal store interface, and the append decision every backend shares.

Backends differ only in how they serialize appends to one saga (a lock, SQLite's write
lock, a Postgres advisory lock); what to append is decided here, once, by `next_entry`.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from sagacity._errors import JournalConflictError, SagaClosedError
from sagacity.approval._registry_marks import MARK_FIELD, JournaledMark, RegistryMark, mark_in
from sagacity.journal._chain import GENESIS, seal
from sagacity.journal._entry import Clock, EntryDraft, JournalEntry, utc_now
from sagacity.journal._phases import Phase

if TYPE_CHECKING:
    from sagacity.tlog._log import CheckpointLog
    from sagacity.tlog._note_keys import NoteSigner

__all__ = [
    "Clock",
    "JournalStore",
    "Snapshot",
    "StepClaim",
    "decide_step",
    "entry_mark",
    "newest_marks",
    "next_entry",
    "utc_now",
]


def next_entry(
    draft: EntryDraft,
    *,
    existing: JournalEntry | None,
    head: JournalEntry | None,
    now: datetime,
) -> JournalEntry | None:
    """Decide an append under the saga's lock.

    Returns None when `existing` already records this logical entry (an at-least-once
    retry: the caller returns `existing`), the sealed entry to insert otherwise. Raises
    JournalConflictError when the same logical entry arrives with different content, and
    SagaClosedError when the chain already ends with SAGA_CLOSED.
    """
    if existing is not None:
        if draft.same_content(existing):
            return None
        raise JournalConflictError(
            f"saga {draft.saga_id!r} already has {draft.phase} for step {draft.step} attempt "
            f"{draft.attempt} (seq {existing.seq}) with different content; the first stands. "
            "Use a new attempt number for a new try."
        )
    if head is not None and head.phase is Phase.SAGA_CLOSED:
        raise SagaClosedError(
            f"saga {draft.saga_id!r} is closed (seq {head.seq}); refusing {draft.phase} for "
            f"step {draft.step}"
        )
    if head is None:
        return seal(draft, seq=1, prev_hash=GENESIS, recorded_at=now)
    return seal(draft, seq=head.seq + 1, prev_hash=head.hash, recorded_at=now)


def entry_mark(entry: JournalEntry) -> RegistryMark | None:
    """The approver registry `entry` records it was judged with (sagacity.approval._registry_marks),
    which its store keeps as a high-water mark in the append's own transaction. Only the
    one field that can hold it is read, and only when its text names a registry: plain
    json, as the store has just written that canonical text itself (measured: a full
    entry.input/entry.result read cost ~50 µs on every request and decision)."""
    field = MARK_FIELD.get(entry.phase)
    if field is None:
        return None
    text = entry.result_json if field == "result" else entry.input_json
    if '"registry"' not in text:
        return None
    try:
        payload = json.loads(text)
    except ValueError:
        return None
    return mark_in(entry.phase, payload)


def newest_marks(rows: Iterable[tuple[int, str, str, int]]) -> list[JournaledMark]:
    """(version, sha256, saga_id, seq) rows cut to those of the highest version, by sha256."""
    found = [JournaledMark(version=v, sha256=h, saga_id=s, seq=q) for v, h, s, q in rows]
    top = max((m.version for m in found), default=None)
    return sorted((m for m in found if m.version == top), key=lambda m: m.sha256)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A `reading()` block: everything read in it (chains, the saga list, the checkpoint
    log) is the journal as of one moment, so a walk never pairs a chain with checkpoints
    or tree heads of another moment."""

    taken_at: datetime
    """The store's clock (the one entries are stamped with) just after the snapshot was
    taken: how old a close read in it is (sagacity.audit._evidence.PendingWindow)."""


@dataclass(frozen=True, slots=True)
class StepClaim:
    """What `begin_step` found or did for one tool step, decided under the saga's lock."""

    claimed: bool
    """True when this attempt owns the step (its INTENT is journaled): run the tool."""
    intent: JournalEntry | None
    outcome: JournalEntry | None
    """EXECUTED or FAILED already journaled: return it, never run the tool again."""
    fenced: bool


def decide_step(
    draft: EntryDraft,
    *,
    prior: list[JournalEntry],
    head: JournalEntry | None,
    fenced: bool,
    now: datetime,
) -> tuple[StepClaim, JournalEntry | None]:
    """Decide a step's start under the saga's lock; returns the claim and the INTENT entry
    to insert (None when nothing is to be written).

    Reading the step and writing INTENT in one locked decision is what stops two attempts
    of one step (a zombie and its retry) from both running the tool.
    """
    if draft.phase is not Phase.INTENT:
        raise ValueError(f"begin_step needs an INTENT draft, got {draft.phase}")
    outcome = next((e for e in prior if e.phase in (Phase.EXECUTED, Phase.FAILED)), None)
    intents = [e for e in prior if e.phase is Phase.INTENT]
    if outcome is not None:
        intent = next((e for e in intents if e.attempt == outcome.attempt), None)
        return StepClaim(False, intent, outcome, fenced), None
    mine = next((e for e in intents if e.attempt == draft.attempt), None)
    if mine is not None:  # this attempt's own INTENT: a retried begin_step after commit
        if not draft.same_content(mine):
            next_entry(draft, existing=mine, head=head, now=now)  # the conflict
        return StepClaim(True, mine, None, fenced), None
    if intents:
        return StepClaim(False, intents[0], None, fenced), None
    if fenced:
        return StepClaim(False, None, None, True), None
    entry = next_entry(draft, existing=None, head=head, now=now)
    assert entry is not None
    return StepClaim(True, entry, None, False), entry


class JournalStore(ABC):
    """Append-only, hash-chained journal of saga entries.

    Implementations must make `append` concurrency-safe (appends to one saga totally
    ordered, none lost, none forked) and idempotent per (saga, step, phase, attempt), and
    must fail loudly (JournalWriteError / StoreUnavailableError) rather than drop.
    """

    url: str
    checks_columns: bool = False
    """True when every entry this store reads back has had its columns compared with its
    bytes (sagacity.stores._stored_row), so verification checks only the bytes. The
    memory store keeps entry objects, whose fields verification compares itself."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or utc_now

    @abstractmethod
    def append(self, draft: EntryDraft) -> JournalEntry:
        """Append `draft` to its saga's chain and return the sealed entry (or the one
        already recorded for the same logical entry)."""

    @abstractmethod
    def begin_step(self, draft: EntryDraft) -> StepClaim:
        """Atomically: return the step's recorded outcome, or an earlier attempt's INTENT,
        or the fence; otherwise journal `draft` (an INTENT) and claim the step."""

    @abstractmethod
    def entries(self, saga_id: str, *, after_seq: int = 0) -> Iterator[JournalEntry]:
        """The saga's entries in seq order, streamed (constant memory)."""

    @abstractmethod
    def head(self, saga_id: str) -> JournalEntry | None:
        """The saga's last entry, or None for an unknown saga."""

    @abstractmethod
    def sagas(self) -> Iterator[str]:
        """Every saga id with at least one entry, sorted."""

    def open_sagas(self) -> Iterator[str]:
        """Every saga whose chain has no SAGA_CLOSED (its newest entry is not one), sorted:
        a saga running, or one whose workflow ended without closing. Over `sagas` and
        `head` here; a store may answer in one query."""
        with self.reading():
            for saga_id in self.sagas():
                head = self.head(saga_id)
                if head is not None and head.phase is not Phase.SAGA_CLOSED:
                    yield saga_id

    @abstractmethod
    def step_entries(self, saga_id: str, step: int) -> list[JournalEntry]:
        """Entries of one step in seq order (small: a handful per step)."""

    @abstractmethod
    def registry_marks(self) -> list[JournaledMark]:
        """The newest approver-registry version any entry of this journal records: one
        JournaledMark per SHA-256 recorded at that version (two or more: a fork), each
        with the first entry that recorded it; empty when none records a registry.
        Kept in the append's own transaction, so it is one small indexed read, never a
        scan of the journal (a worker asks at start and with every registry answer)."""

    @abstractmethod
    def fence(self, saga_id: str, step: int) -> None:
        """Leave a tombstone: a late forward attempt of this step must not apply.

        Working state, not evidence, so it lives beside the journal, not in it."""

    @abstractmethod
    def is_fenced(self, saga_id: str, step: int) -> bool:
        """True once `fence` was called for this step."""

    def reading(self, snapshot: str | None = None) -> AbstractContextManager[Snapshot]:
        """A read-only walk: until the block ends, this thread reads the journal and its
        checkpoint log as of one snapshot (PostgreSQL: one REPEATABLE READ transaction on
        one connection; SQLite: one read transaction). A block inside another on the same
        thread is the outer one. `snapshot` is `share_snapshot()`'s token from another
        process: this block then reads the chains as that one does. Nothing may be
        written on this thread inside the block.

        The memory store (tests) has no snapshots: it reads the entries as they are."""
        return nullcontext(Snapshot(self.clock()))

    def share_snapshot(self) -> str | None:
        """Inside `reading()`: a token another process passes to its own `reading()` to
        read the chains as of this block's snapshot (PostgreSQL: an exported snapshot,
        valid while this block lasts; SQLite: the journal's last row id). None outside a
        block, or when the store cannot share one."""
        return None

    def stored_rows(self, saga_id: str, *, after_seq: int = 0) -> Iterator[Sequence[Any]] | None:
        """The saga's rows as stored (COLUMNS order), streamed, for a verifier that checks
        rows without making entries of them (sagacity.journal._verify_rows); None when
        the store keeps entry objects, not rows. `entry_of` makes one row an entry."""
        return None

    def entry_of(self, row: Sequence[Any]) -> JournalEntry:
        """One of `stored_rows` as an entry (raising what `entries` would raise)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no rows")

    def checkpoint_log(self, signer: NoteSigner | None = None) -> CheckpointLog:
        """The checkpoint log kept beside this journal (sagacity.tlog._log), on the
        same database; `signer` (the log key) is needed only to append to it."""
        raise NotImplementedError(f"{type(self).__name__} keeps no checkpoint log")

    def close(self) -> None:  # noqa: B027 - optional for stores without resources
        """Release connections."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
