"""The journal as the activities see it when the worker holds a log key: every append
goes to the store, and every `every`-th entry of a saga is also checkpointed.

A saga's close is checkpointed by the journal_event activity itself (its checkpoint goes
into the saga's result); the periodic checkpoints bound how much of a long saga a
rewrite could recompute unseen before it closes. Wrapping the store keeps this in one
place for every path that appends (tool runs, compensations, resolutions, events).

A checkpoint that cannot be written fails the activity after its entry was appended; the
retry finds the entry (appends are idempotent) and writes the checkpoint then.
"""

from __future__ import annotations

from collections.abc import Iterator

from sagacity.approval._registry_marks import JournaledMark
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.stores._base import JournalStore, StepClaim
from sagacity.tlog._log import CheckpointLog, LoggedCheckpoint

DEFAULT_CHECKPOINT_EVERY = 1000


class CheckpointedStore(JournalStore):
    """A JournalStore that checkpoints each saga every `every` entries into `log`."""

    def __init__(
        self, store: JournalStore, log: CheckpointLog, every: int = DEFAULT_CHECKPOINT_EVERY
    ) -> None:
        super().__init__(store.clock)
        if every < 1:
            raise ValueError(f"checkpoint interval must be at least 1 entry, got {every}")
        self.inner = store
        self.log = log
        self.every = every
        self.url = store.url

    def close_checkpoint(self, entry: JournalEntry) -> LoggedCheckpoint:
        """The checkpoint of a closed chain (written now, or found if already written)."""
        return self.log.record(entry)

    def _periodic(self, entry: JournalEntry | None) -> None:
        if entry is not None and entry.seq % self.every == 0:
            self.log.record(entry)

    def append(self, draft: EntryDraft) -> JournalEntry:
        entry = self.inner.append(draft)
        self._periodic(entry)
        return entry

    def begin_step(self, draft: EntryDraft) -> StepClaim:
        claim = self.inner.begin_step(draft)
        if claim.claimed:
            self._periodic(claim.intent)
        return claim

    def entries(self, saga_id: str, *, after_seq: int = 0) -> Iterator[JournalEntry]:
        return self.inner.entries(saga_id, after_seq=after_seq)

    def head(self, saga_id: str) -> JournalEntry | None:
        return self.inner.head(saga_id)

    def sagas(self) -> Iterator[str]:
        return self.inner.sagas()

    def step_entries(self, saga_id: str, step: int) -> list[JournalEntry]:
        return self.inner.step_entries(saga_id, step)

    def registry_marks(self) -> list[JournaledMark]:
        return self.inner.registry_marks()

    def fence(self, saga_id: str, step: int) -> None:
        self.inner.fence(saga_id, step)

    def is_fenced(self, saga_id: str, step: int) -> bool:
        return self.inner.is_fenced(saga_id, step)

    def checkpoint_log(self, signer: object = None) -> CheckpointLog:
        return self.log

    def close(self) -> None:
        self.inner.close()
