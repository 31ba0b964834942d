"""In-memory journals with a checkpoint log, and their exports: the material of the tests
that check how exports of several logs are told apart."""

from __future__ import annotations

import io

from sagacity.audit._export import export_jsonl
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import MemoryJournalStore
from sagacity.tlog._log import CheckpointLog
from sagacity.tlog._note_keys import NoteSigner


def logged_journal(signer: NoteSigner, *ids: str) -> tuple[MemoryJournalStore, CheckpointLog]:
    """A journal of closed sagas `ids` (opened, one step, closed), each close
    checkpointed in a log signed by `signer`."""
    store = MemoryJournalStore()
    log = store.checkpoint_log(signer)
    for saga_id in ids:
        store.append(EntryDraft.new(saga_id, Phase.SAGA_OPENED))
        store.append(EntryDraft.new(saga_id, Phase.EXECUTED, step=1, tool="t", result=saga_id))
        log.record(store.append(EntryDraft.new(saga_id, Phase.SAGA_CLOSED, result={})))
    return store, log


def exported(store: MemoryJournalStore, log: CheckpointLog) -> list[str]:
    """The journal's complete export (with the log's newest head), as lines."""
    out = io.StringIO()
    export_jsonl(store, out, log=log, head=log.head())
    return out.getvalue().splitlines()
