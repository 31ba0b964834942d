"""In-memory journal store: for unit tests and benchmarks' lower bound. Not durable."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from sagacity.approval._registry_marks import JournaledMark
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.stores._base import (
    Clock,
    JournalStore,
    StepClaim,
    decide_step,
    entry_mark,
    newest_marks,
    next_entry,
)

if TYPE_CHECKING:
    from sagacity.tlog._log import CheckpointLog
    from sagacity.tlog._note_keys import NoteSigner


class MemoryJournalStore(JournalStore):
    """One list per saga behind one lock: appends are totally ordered by construction."""

    def __init__(self, clock: Clock | None = None) -> None:
        super().__init__(clock)
        self.url = "memory://"
        self._lock = threading.Lock()
        self._chains: dict[str, list[JournalEntry]] = {}
        self._keys: dict[tuple[str, int, str, int], JournalEntry] = {}
        self._fences: set[tuple[str, int]] = set()
        self._marks: dict[tuple[int, str], tuple[str, int]] = {}
        """(registry version, sha256) -> (saga, seq) of the first entry recording it."""
        self._log_database: Any = None

    def append(self, draft: EntryDraft) -> JournalEntry:
        with self._lock:
            chain = self._chains.get(draft.saga_id)
            existing = self._keys.get(draft.key)
            entry = next_entry(
                draft,
                existing=existing,
                head=chain[-1] if chain else None,
                now=self.clock(),
            )
            if entry is None:
                assert existing is not None
                return existing
            self._add(entry)
            return entry

    def begin_step(self, draft: EntryDraft) -> StepClaim:
        with self._lock:
            chain = self._chains.get(draft.saga_id, [])
            claim, entry = decide_step(
                draft,
                prior=[e for e in chain if e.step == draft.step],
                head=chain[-1] if chain else None,
                fenced=(draft.saga_id, draft.step) in self._fences,
                now=self.clock(),
            )
            if entry is not None:
                self._add(entry)
            return claim

    def _add(self, entry: JournalEntry) -> None:
        """Insert under the lock: the entry, its key and the registry it records."""
        self._chains.setdefault(entry.saga_id, []).append(entry)
        self._keys[entry.key] = entry
        mark = entry_mark(entry)
        if mark is not None and mark.sha256 is not None:
            self._marks.setdefault((mark.version, mark.sha256), (entry.saga_id, entry.seq))

    def registry_marks(self) -> list[JournaledMark]:
        with self._lock:
            rows = [(v, h, s, q) for (v, h), (s, q) in self._marks.items()]
        return newest_marks(rows)

    def entries(self, saga_id: str, *, after_seq: int = 0) -> Iterator[JournalEntry]:
        with self._lock:
            snapshot = list(self._chains.get(saga_id, ()))
        return iter(snapshot[after_seq:])

    def head(self, saga_id: str) -> JournalEntry | None:
        with self._lock:
            chain = self._chains.get(saga_id)
            return chain[-1] if chain else None

    def sagas(self) -> Iterator[str]:
        with self._lock:
            return iter(sorted(self._chains))

    def step_entries(self, saga_id: str, step: int) -> list[JournalEntry]:
        with self._lock:
            return [e for e in self._chains.get(saga_id, ()) if e.step == step]

    def fence(self, saga_id: str, step: int) -> None:
        with self._lock:
            self._fences.add((saga_id, step))

    def is_fenced(self, saga_id: str, step: int) -> bool:
        with self._lock:
            return (saga_id, step) in self._fences

    def checkpoint_log(self, signer: NoteSigner | None = None) -> CheckpointLog:
        from sagacity.stores._checkpoint_tables import memory_database, memory_log

        with self._lock:
            if self._log_database is None:
                self._log_database = memory_database()
        return memory_log(self._log_database, signer, self.clock)

    def replace_for_test(self, saga_id: str, chain: list[JournalEntry]) -> None:
        """Overwrite a saga's chain: lets tamper tests edit 'stored' entries in memory."""
        with self._lock:
            self._chains[saga_id] = list(chain)
