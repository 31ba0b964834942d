"""Writing a JSON Lines export: the entries in their hashed form (payloads as JSON
values, sagacity.audit._export_lines) and, with a checkpoint log, the evidence lines of
sagacity.audit._export_evidence around them.

A journal changes while it is exported (sagas run on), so the export reads each saga's
entries first, then its checkpoints, and writes the checkpoints that match what it read:
every leaf the tree head covers (taken before any entry was read, so the entries always
reach it), and a newer leaf only when the entries read reach it too. The saga's entries
are spooled (in memory up to 4 MiB, then on disk) while its checkpoints are read, so
memory does not grow with a saga's length.

A saga read in the moment between its close and its checkpoint (the worker appends
SAGA_CLOSED, then signs the close) would go out with a close no checkpoint covers, which
verify-file rightly takes for one inserted by hand: so for a close that recent the
export waits a moment for its checkpoint, within a budget per export, before writing.

A complete export (every saga) also writes, after the last saga, the checkpoints its
tree head covers whose saga is no longer in the journal: the auditor sees the deletion.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import TextIO

from sagacity.audit._export_evidence import checkpoint_lines, leaf_line, tree_head_line
from sagacity.audit._export_lines import value_line
from sagacity.journal._entry import JournalEntry
from sagacity.journal._phases import Phase
from sagacity.stores._base import JournalStore
from sagacity.tlog._checkpoint import TreeHead
from sagacity.tlog._log import CheckpointLog, LoggedCheckpoint

_SPOOL_BYTES = 4 * 1024 * 1024
RECENT_CLOSE = timedelta(seconds=60)
"""A close this recent may still be getting its checkpoint signed: wait for it."""
CLOSE_WAITS = (0.02, 0.05, 0.1, 0.2, 0.4, 0.8)
"""Pauses while waiting for one close's checkpoint (about 1.6 s)."""
WAIT_BUDGET = 10.0
"""Seconds one export spends waiting for checkpoints in all (a worker that died
between a close and its checkpoint must not stall an export saga by saga)."""


def entry_line(entry: JournalEntry) -> str:
    """One entry as a JSON Lines line (without the newline): stable, diffable, valid JSON,
    payloads as JSON values (export_lines.value_line)."""
    return value_line(entry)


class JournalExport:
    """One export being written: `begin`, then `saga` per saga, then `finish`.

    Without a checkpoint log (or with an empty one) only entry lines are written."""

    def __init__(
        self,
        store: JournalStore,
        out: TextIO,
        log: CheckpointLog | None,
        head: TreeHead | None,
    ) -> None:
        self.store, self.out, self.log, self.head = store, out, log, head
        self.line = value_line
        self.entries = 0
        self.complete = False
        self._exported: set[str] = set()
        self._waited = 0.0

    def begin(self, *, complete: bool) -> None:
        """Write the tree-head line; `complete` promises every saga of the journal."""
        self.complete = complete
        if self.log is not None and self.head is not None:
            self.out.write(tree_head_line(self.head, complete=complete) + "\n")

    def saga(self, saga_id: str) -> int:
        """Write one saga (its checkpoints, then its entries); returns its entry count.
        An unknown saga writes nothing, or only its checkpoints if the log has some."""
        self._exported.add(saga_id)
        if self.log is None:
            written = 0
            for entry in self.store.entries(saga_id):
                self.out.write(self.line(entry) + "\n")
                written += 1
            self.entries += written
            return written
        with tempfile.SpooledTemporaryFile(_SPOOL_BYTES, mode="w+", encoding="utf-8") as spool:
            written, last = 0, None
            for entry in self.store.entries(saga_id):
                spool.write(self.line(entry) + "\n")
                written, last = written + 1, entry
            leaves = self._leaves(self.log, saga_id, last)
            for line in checkpoint_lines(self.log, saga_id, self.head, written, leaves):
                self.out.write(line + "\n")
            spool.seek(0)
            for line in spool:
                self.out.write(line)
        self.entries += written
        return written

    def _leaves(
        self, log: CheckpointLog, saga_id: str, last: JournalEntry | None
    ) -> list[LoggedCheckpoint]:
        """The saga's checkpoints; for a recent close that none covers yet, read again
        after short pauses until its checkpoint is there or the wait is over."""
        leaves = log.of_saga(saga_id)
        if last is None or last.phase is not Phase.SAGA_CLOSED:
            return leaves
        if datetime.now(UTC) - last.recorded_at > RECENT_CLOSE:
            return leaves
        for pause in CLOSE_WAITS:
            if any(leaf.entries == last.seq for leaf in leaves):
                break
            if self._waited + pause > WAIT_BUDGET:
                break
            time.sleep(pause)
            self._waited += pause
            leaves = log.of_saga(saga_id)
        return leaves

    def finish(self) -> None:
        """In a complete export, the checkpoints of sagas the journal no longer holds."""
        if not self.complete or self.log is None or self.head is None:
            return
        for leaf in self.log.leaves():
            if leaf.index >= self.head.size:
                break
            if leaf.saga_id not in self._exported:
                self.out.write(leaf_line(self.log, leaf, self.head) + "\n")


def export_jsonl(
    store: JournalStore,
    out: TextIO,
    saga_ids: Iterable[str] | None = None,
    *,
    log: CheckpointLog | None = None,
    head: TreeHead | None = None,
) -> int:
    """Write the journal (or the named sagas) to `out` as JSON Lines; returns the number of
    entries written (docs/hash-chain.md, section 4).

    Entries are streamed from the store in seq order per saga, sagas in `store.sagas()`
    order (or the order of `saga_ids`), so memory does not grow with the journal. With
    the checkpoint `log` and its tree `head` (read before the export begins), the export
    carries the evidence lines; without `saga_ids` it is a complete export.
    """
    export = JournalExport(store, out, log, head)
    export.begin(complete=saga_ids is None)
    for saga_id in store.sagas() if saga_ids is None else saga_ids:
        export.saga(saga_id)
    export.finish()
    return export.entries
