"""The checkpoint log and the evidence checks, without servers: the in-memory journal's
log (an in-memory SQLite database) and its SQLite file twin."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from sagacity.activities._checkpointing import CheckpointedStore
from sagacity.audit._evidence import ChainCheckpoints, LogAudit, Problem, RootBuilder
from sagacity.audit._evidence_walk import audit_log, check_all
from sagacity.journal._chain import VerifyReport
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase
from sagacity.stores import JournalStore, MemoryJournalStore, open_store
from sagacity.stores._base import utc_now
from sagacity.tlog._checkpoint import (
    CheckpointError,
    open_saga_checkpoint,
    open_tree_head,
    sign_saga_checkpoint,
)
from sagacity.tlog._log import (
    CheckpointConflictError,
    CheckpointLog,
    LogNodeMissingError,
    LogProofError,
    LogRowError,
)
from sagacity.tlog._merkle import MemoryTree, leaf_hash, verify_consistency, verify_inclusion
from sagacity.tlog._note_keys import NoteSigner
from tests.support.evidence import Tamperer

SIGNER = NoteSigner.generate("sagacity.test/unit")
KEYS = [SIGNER.verifier]


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> JournalStore:
    if request.param == "memory":
        return MemoryJournalStore()
    return open_store(f"sqlite:///{tmp_path}/journal.db")


def closed_saga(store: JournalStore, saga_id: str, steps: int = 1) -> JournalEntry:
    store.append(EntryDraft.new(saga_id, Phase.SAGA_OPENED, input={"goal": "g"}))
    for step in range(1, steps + 1):
        store.append(EntryDraft.new(saga_id, Phase.EXECUTED, step=step, tool="t", result=step))
    return store.append(EntryDraft.new(saga_id, Phase.SAGA_CLOSED, result={"status": "COMPLETED"}))


def test_every_leaf_is_provable_and_every_head_consistent(store: JournalStore) -> None:
    log = store.checkpoint_log(SIGNER)
    mirror = MemoryTree()
    for i in range(37):
        logged = log.record(closed_saga(store, f"s{i:02}"))
        assert logged.index == i
        mirror.append(logged.note.encode())
    head = log.head()
    assert head is not None and head.size == 37 and head.root == mirror.root()
    assert open_tree_head(head.note, KEYS).root == head.root
    for leaf in log.leaves():
        proof = log.prove_inclusion(leaf.index, head.size)
        assert verify_inclusion(leaf_hash(leaf.note.encode()), leaf.index, 37, proof, head.root)
    for old in log.heads():
        proof = log.prove_consistency(old.size, head.size)
        assert verify_consistency(old.size, head.size, old.root, head.root, proof)
    assert [leaf.saga_id for leaf in log.by_saga()] == sorted(f"s{i:02}" for i in range(37))


def test_recording_twice_returns_the_first_and_a_changed_head_is_refused(
    store: JournalStore,
) -> None:
    log = store.checkpoint_log(SIGNER)
    close = closed_saga(store, "once")
    first = log.record(close)
    assert log.record(close) == first  # an activity retried after its commit
    assert len(list(log.leaves())) == 1
    with pytest.raises(CheckpointConflictError, match="the journal changed after it was"):
        log.record(replace(close, hash="00" * 32))


def test_a_reader_without_the_key_cannot_append(store: JournalStore) -> None:
    with pytest.raises(Exception, match="no log key"):
        store.checkpoint_log().record(closed_saga(store, "nokey"))


def test_the_checkpoint_says_what_was_signed_and_refuses_look_alikes() -> None:
    now = utc_now()
    note = sign_saga_checkpoint(SIGNER, saga_id="a b+c/ü", entries=7, head_hash="ab" * 32, now=now)
    opened = open_saga_checkpoint(note, KEYS)
    assert (opened.saga_id, opened.entries, opened.head_hash) == ("a b+c/ü", 7, "ab" * 32)
    assert "a%20b%2Bc%2F%C3%BC" in note  # the origin line carries no space and no "+"
    with pytest.raises(CheckpointError, match="no signature by a known key"):
        open_saga_checkpoint(note, [NoteSigner.generate(SIGNER.name).verifier])
    store = MemoryJournalStore()
    log = store.checkpoint_log(SIGNER)
    log.record(closed_saga(store, "x"))
    head = log.head()
    assert head is not None
    with pytest.raises(CheckpointError, match="is not"):
        open_saga_checkpoint(head.note, KEYS)  # a tree head is not a saga checkpoint
    with pytest.raises(CheckpointError, match="is not the log"):
        open_tree_head(note, KEYS)  # nor the other way round


def test_the_store_wrapper_checkpoints_every_n_entries() -> None:
    inner = MemoryJournalStore()
    wrapped = CheckpointedStore(inner, inner.checkpoint_log(SIGNER), every=3)
    closed_saga(wrapped, "long", steps=7)  # 9 entries: checkpoints at 3, 6 and 9
    assert [leaf.entries for leaf in wrapped.log.of_saga("long")] == [3, 6, 9]
    with pytest.raises(ValueError, match="at least 1"):
        CheckpointedStore(inner, wrapped.log, every=0)


def test_chain_checks_name_each_problem() -> None:
    store = MemoryJournalStore()
    log = store.checkpoint_log(SIGNER)
    close = closed_saga(store, "c", steps=2)
    checkpoint = open_saga_checkpoint(log.record(close).note, KEYS)
    entries = list(store.entries("c"))

    def finish(chain: list[JournalEntry], report: VerifyReport) -> set[Problem]:
        check = ChainCheckpoints("c", [checkpoint])
        for entry in chain:
            check.observe(entry)
        return {f.problem for f in check.finish(report)}

    whole = VerifyReport("c", True, 4, close.hash, True)
    assert finish(entries, whole) == set()
    assert finish(entries[:2], VerifyReport("c", True, 2, "", False)) == {Problem.TRUNCATED}
    assert finish([], VerifyReport("c", True, 0, "", False)) == {Problem.DELETED}
    rewritten = [*entries[:3], replace(entries[3], hash="11" * 32)]
    assert finish(rewritten, whole) == {Problem.REWRITTEN}
    bare = ChainCheckpoints("c", [])
    assert {f.problem for f in bare.finish(whole)} == {Problem.NOT_CHECKPOINTED}
    assert ChainCheckpoints("c", []).finish(whole, expect_close=False) == []


def test_the_log_audit_recomputes_roots_from_leaves(store: JournalStore) -> None:
    log: CheckpointLog = store.checkpoint_log(SIGNER)
    for i in range(9):
        log.record(closed_saga(store, f"r{i}"))
    audit = audit_log(log, KEYS)
    assert audit.findings == [] and audit.leaves == 9 and audit.latest is not None
    assert audit.heads == 9
    leaves = list(log.leaves())
    heads = list(log.heads())
    moved = [*leaves[:4], replace(leaves[4], note=leaves[5].note), *leaves[5:]]
    changed = LogAudit(KEYS)
    changed.check(moved, heads)
    assert {f.problem for f in changed.findings} == {Problem.BAD_CHECKPOINT, Problem.LOG_BROKEN}
    gap = LogAudit(KEYS)
    gap.check([*leaves[:4], *leaves[5:]], heads)
    assert "leaf 4 is missing" in gap.findings[0].detail
    unsigned = LogAudit(KEYS)
    unsigned.check(leaves, heads[:-1])
    assert "in no signed tree head" in unsigned.findings[0].detail
    assert [s.findings for s in check_all(store, log, KEYS)] == [[]] * 9


def test_root_builder_matches_the_tree_at_every_size() -> None:
    tree, builder = MemoryTree(), RootBuilder()
    for i in range(70):
        data = f"leaf {i}".encode()
        tree.append(data)
        builder.add(data)
        assert builder.root() == tree.root()


def test_a_proof_between_sizes_no_proof_relates_is_a_typed_error() -> None:
    """Sizes from an edited row (a head's size column) once reached merkle as a bare
    ValueError and a traceback; a missing node as a bare KeyError."""
    store = MemoryJournalStore()
    log = store.checkpoint_log(NoteSigner.generate("acme/log"))
    for saga_id in ("a", "b"):
        store.append(EntryDraft.new(saga_id, Phase.SAGA_OPENED))
        log.record(store.append(EntryDraft.new(saga_id, Phase.SAGA_CLOSED, result={})))
    with pytest.raises(LogProofError, match="from a tree of 2 leaves to one of 1"):
        log.prove_consistency(2, 1)
    with pytest.raises(LogProofError, match="leaf 5 in a tree of 2 leaves"):
        log.prove_inclusion(5, 2)
    with pytest.raises(LogNodeMissingError, match="stored node at level 0, index 7 is missing"):
        log.subtree(0, 7)


def test_the_newest_head_row_must_say_what_its_note_says(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/journal.db")
    log = store.checkpoint_log(NoteSigner.generate("acme/log"))
    for saga_id in ("a", "b"):
        store.append(EntryDraft.new(saga_id, Phase.SAGA_OPENED))
        log.record(store.append(EntryDraft.new(saga_id, Phase.SAGA_CLOSED, result={})))
    Tamperer("sqlite", str(tmp_path / "journal.db")).run(
        ("DELETE FROM {heads} WHERE size=2", ()), ("UPDATE {heads} SET size=99 WHERE size=1", ())
    )
    with pytest.raises(LogRowError, match=r"row says size 99, .* its signed note says size 1"):
        log.head()
    store.close()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("UPDATE {nodes} SET hash=x'0102' WHERE level=1 AND idx=0", "is not a 32-byte hash"),
        ("UPDATE {heads} SET root='text' WHERE size=2", "holds str where a hash belongs"),
    ],
    ids=["short-node", "text-root"],
)
def test_a_malformed_log_row_is_a_typed_error_not_a_crash(
    tmp_path: Path, edit: str, message: str
) -> None:
    """Rows written by hand with the wrong shape (found by an outside attack: a traceback
    from merkle, or a TypeError): a LogRowError naming what was changed and what to run."""
    store = open_store(f"sqlite:///{tmp_path}/journal.db")
    log = store.checkpoint_log(SIGNER)
    for saga_id in ("a", "b"):
        log.record(closed_saga(store, saga_id))
    Tamperer("sqlite", str(tmp_path / "journal.db")).run((edit, ()))
    with pytest.raises(LogRowError, match=message):
        log.root(2) if "nodes" in edit else log.head()
    store.close()
