"""`JournalStore.reading()`: chains, saga ids, checkpoint leaves and tree heads read as of
one moment while another writer goes on, on SQLite and PostgreSQL; and the same moment
shared with another process's store (`share_snapshot`), as `verify --all --jobs N` does.

The writer is a second store on the same database (its own connections), as a worker
beside the verifier is; each write is read back outside the block to show it happened.
"""

from __future__ import annotations

from sagacity.audit._decisions import DecisionAudit
from sagacity.audit._evidence_walk import audit_log, check_all, checkpointed
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase
from sagacity.stores import JournalStore, open_store
from sagacity.tlog._note_keys import NoteSigner
from sagacity.worker.cli._verify_parallel import check_all_parallel

SIGNER = NoteSigner.generate("sagacity.test/snapshots")


def _saga(store: JournalStore, saga_id: str, *, close: bool = True) -> JournalEntry:
    """A saga of two entries (three closed), its close checkpointed as a worker does."""
    store.append(EntryDraft.new(saga_id, Phase.SAGA_OPENED, input={"plan": ["charge"]}))
    last = store.append(EntryDraft.new(saga_id, Phase.INTENT, step=1, tool="charge", input={}))
    if close:
        last = store.append(EntryDraft.new(saga_id, Phase.SAGA_CLOSED, result={"status": "OK"}))
        store.checkpoint_log(SIGNER).record(last)
    return last


def _close(store: JournalStore, saga_id: str) -> None:
    closed = store.append(EntryDraft.new(saga_id, Phase.SAGA_CLOSED, result={"status": "OK"}))
    store.checkpoint_log(SIGNER).record(closed)


def test_a_reading_block_sees_one_moment_while_another_store_writes(journal_url: str) -> None:
    with open_store(journal_url) as reader, open_store(journal_url) as writer:
        _saga(writer, "a-closed")
        _saga(writer, "b-running", close=False)
        log = reader.checkpoint_log()
        with reader.reading() as snapshot:
            before = (list(reader.sagas()), [leaf.saga_id for leaf in log.leaves()])
            _close(writer, "b-running")  # a close and its checkpoint, committed
            _saga(writer, "c-new")
            head = log.head()
            assert head is not None and head.size == 1
            assert list(reader.sagas()) == before[0] == ["a-closed", "b-running"]
            assert [leaf.saga_id for leaf in log.leaves()] == before[1] == ["a-closed"]
            assert [e.phase for e in reader.entries("b-running")] == [
                Phase.SAGA_OPENED,
                Phase.INTENT,
            ]
            assert len(list(log.heads())) == 1
            assert reader.clock() >= snapshot.taken_at
        assert list(reader.sagas()) == ["a-closed", "b-running", "c-new"]  # the writes happened
        assert len(list(log.leaves())) == 3
        closed = reader.head("b-running")
        assert closed is not None and closed.phase is Phase.SAGA_CLOSED


def test_a_snapshot_is_shared_only_inside_a_reading_block(journal_url: str) -> None:
    with open_store(journal_url) as store:
        _saga(store, "a")
        assert store.share_snapshot() is None
        with store.reading(), store.reading():  # the inner block is the outer one
            assert store.share_snapshot() is not None
        assert store.share_snapshot() is None


def test_another_store_reads_the_chains_as_of_a_shared_snapshot(journal_url: str) -> None:
    with (
        open_store(journal_url) as reader,
        open_store(journal_url) as writer,
        open_store(journal_url) as joiner,
    ):
        _saga(writer, "b-running", close=False)
        with reader.reading():
            token = reader.share_snapshot()
            assert token is not None
            _close(writer, "b-running")
            _saga(writer, "c-new")
            with joiner.reading(token):
                assert [e.seq for e in joiner.entries("b-running")] == [1, 2]
                assert list(joiner.entries("c-new")) == []
        assert [e.seq for e in joiner.entries("b-running")] == [1, 2, 3]


def test_parallel_workers_check_the_chains_of_the_main_snapshot(journal_url: str) -> None:
    """A saga closed (and checkpointed) after the snapshot was taken is open for every
    process of the walk: the main process read the log before its close, and a worker
    that read the chain as it is now would find a close no checkpoint covers."""
    with open_store(journal_url) as reader, open_store(journal_url) as writer:
        _saga(writer, "a-running", close=False)
        for i in range(7):
            _saga(writer, f"b-{i}")
        log = reader.checkpoint_log()
        with reader.reading():
            audit = audit_log(log, [SIGNER.verifier])
            expect = checkpointed(log, [SIGNER.verifier])
            _close(writer, "a-running")
            workers: dict[int, float] = {}
            walked = list(
                check_all_parallel(
                    reader,
                    journal_url,
                    log,
                    [SIGNER.verifier],
                    DecisionAudit(),
                    None,
                    jobs=2,
                    sagas=8,
                    expect_close=expect,
                    audit=audit,
                    workers=workers,
                    wait_for_workers=True,
                )
            )
        assert len(workers) == 2, "a worker process checked chunks"
        first = walked[0]
        assert first.saga_id == "a-running" and first.report is not None
        assert (first.report.entries, first.report.closed, first.findings) == (2, False, [])
        assert all(s.report is not None and s.report.closed and not s.findings for s in walked[1:])
        after = list(check_all(reader, log, [SIGNER.verifier], expect_close=expect))
        assert after[0].report is not None and after[0].report.closed  # the close happened
        assert not after[0].findings
