"""A log is its key, not its name; a leaf is filed by its note, not its columns. Without
servers: the in-memory journal's log, exports in memory."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from sagacity.audit._evidence import LogAudit, Problem, open_leaf
from sagacity.audit._evidence_walk import _with_misfiled, check_all, check_one
from sagacity.audit._export import verify_jsonl
from sagacity.audit._file_evidence import FileEvidence
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import open_store
from sagacity.tlog._checkpoint import (
    CheckpointError,
    LogKey,
    open_saga_checkpoint,
    open_tree_head,
    same_log,
)
from sagacity.tlog._log import LoggedCheckpoint
from sagacity.tlog._note_keys import NoteSigner
from sagacity.tlog._signed_note import SignedNote, parse_note
from sagacity.worker._log_keys import LOG_NAME_PREFIX, new_log_name
from tests.support.evidence import Tamperer
from tests.support.logged_journals import exported, logged_journal

NAME = "sagacity.local/journal"
PROD = NoteSigner.generate(NAME)
STAGING = NoteSigner.generate(NAME)  # two deployments, one default name
BOTH = [PROD.verifier, STAGING.verifier]


def test_opened_notes_name_the_key_that_signed_them() -> None:
    _, log = logged_journal(PROD, "a")
    head = log.head()
    assert head is not None and head.signers == ()  # as stored: not opened
    opened = open_tree_head(head.note, BOTH)
    assert opened.log == LogKey(NAME, PROD.key_hash)
    assert str(opened.log) == f"{NAME} (key {PROD.key_hash.hex()})"
    leaf = next(log.leaves())
    checkpoint = open_saga_checkpoint(leaf.note, BOTH)
    assert same_log(checkpoint.signers, opened.signers)
    assert not same_log(checkpoint.signers, (LogKey(NAME, STAGING.key_hash),))
    assert not same_log((), opened.signers)


def test_a_staging_checkpoint_under_the_same_name_is_not_one_of_production() -> None:
    prod = exported(*logged_journal(PROD, "order-1"))
    staging = exported(*logged_journal(STAGING, "refund-to-attacker"))
    pasted = []
    for line in staging[1:]:  # entry lines as exported (format 2 is byte-exact)
        record = json.loads(line)
        if "checkpoint" in record:
            line = json.dumps({**record, "log_index": 10**6, "inclusion_proof": None})
        pasted.append(line)
    evidence = FileEvidence(BOTH)
    reports = verify_jsonl(prod + pasted, evidence.observe, evidence.evidence)
    found = evidence.finish(reports)
    assert [(f.saga_id, f.problem) for f in found] == [
        ("refund-to-attacker", Problem.BAD_CHECKPOINT),
        ("refund-to-attacker", Problem.NOT_CHECKPOINTED),  # its close: no checkpoint of ours
    ]
    assert f"(key {STAGING.key_hash.hex()}), but the tree head by" in found[0].detail
    assert evidence.newer == 0


def test_a_kept_head_of_another_key_with_the_same_name_is_another_log() -> None:
    store, log = logged_journal(PROD, "order-1")
    kept = logged_journal(STAGING, "x")[1].head()
    assert kept is not None
    evidence = FileEvidence(BOTH, known=open_tree_head(kept.note, BOTH))
    found = evidence.finish(verify_jsonl(exported(store, log), evidence.observe, evidence.evidence))
    assert [f.problem for f in found] == [Problem.LOG_BROKEN]
    assert "this export is of another log" in found[0].detail


def test_a_leaf_of_another_log_in_this_one_is_a_bad_checkpoint() -> None:
    _, prod_log = logged_journal(PROD, "a")
    _, staging_log = logged_journal(STAGING, "b")
    head = open_tree_head(prod_log.head().note, BOTH)  # type: ignore[union-attr]
    foreign = next(staging_log.leaves())
    checkpoint, problem = open_leaf(foreign, BOTH, head.signers)
    assert checkpoint is None and problem is not None
    assert problem.problem is Problem.BAD_CHECKPOINT and "another log" in problem.detail
    own = next(prod_log.leaves())
    assert open_leaf(own, BOTH, head.signers)[1] is None
    assert open_leaf(foreign, BOTH)[1] is None  # no log given: any trusted key


def test_the_audit_files_a_renamed_leaf_under_the_saga_its_note_names() -> None:
    _, log = logged_journal(PROD, "a", "b", "c")
    leaves = list(log.leaves())
    renamed = replace(leaves[1], saga_id="b~")
    audit = LogAudit([PROD.verifier], want="b")
    audit.check([leaves[0], renamed, leaves[2]], log.heads())
    assert [(f.saga_id, f.problem) for f in audit.findings] == [("b", Problem.BAD_CHECKPOINT)]
    assert "its columns (saga 'b~'" in audit.findings[0].detail
    assert audit.misfiled == {"b": [leaves[1]]} and audit.misfiled_at == {1}
    assert audit.wanted == [leaves[1]]  # by the note, columns restored
    assert audit.log_key == (LogKey(NAME, PROD.key_hash),)


def test_after_a_gap_the_audit_still_files_every_leaf() -> None:
    _, log = logged_journal(PROD, "a", "b", "c")
    leaves = list(log.leaves())
    audit = LogAudit([PROD.verifier], want="c")
    audit.check([leaves[0], leaves[2]], log.heads())
    assert "leaf 1 is missing" in audit.findings[0].detail
    assert audit.wanted == [leaves[2]]
    assert audit.latest is not None and audit.latest.signers  # opened with the key


def test_misfiled_leaves_are_merged_in_saga_order() -> None:
    def leaf(saga_id: str, entries: int) -> LoggedCheckpoint:
        return LoggedCheckpoint(entries, saga_id, entries, "", "")

    groups = iter([("b", [leaf("b", 3)]), ("d", [leaf("d", 1)])])
    merged = list(_with_misfiled(groups, {"a": [leaf("a", 1)], "b": [leaf("b", 2)], "e": []}))
    assert [(saga, [x.entries for x in leaves]) for saga, leaves in merged] == [
        ("a", [1]),
        ("b", [2, 3]),
        ("d", [1]),
        ("e", []),
    ]


def test_verify_finds_a_cut_tail_whose_checkpoint_was_renamed(tmp_path: Path) -> None:
    """The online walk, one saga and all, on a SQLite file whose leaf was renamed: the
    renamed leaf still covers the saga's close, so the cut shows as `truncated`."""
    store = open_store(f"sqlite:///{tmp_path}/journal.db")
    log = store.checkpoint_log(PROD)
    store.append(EntryDraft.new("v", Phase.SAGA_OPENED))
    log.record(store.append(EntryDraft.new("v", Phase.SAGA_CLOSED, result={})))
    Tamperer("sqlite", str(tmp_path / "journal.db")).run(
        ("UPDATE {cp} SET saga_id='v~'", ()), ("DELETE FROM {journal} WHERE seq=2", ())
    )
    assert [leaf.saga_id for leaf in log.leaves()] == ["v~"]
    saga, audit = check_one(store, log, "v", [PROD.verifier])
    assert {f.problem for f in audit.findings} == {Problem.BAD_CHECKPOINT}
    assert [f.problem for f in saga.findings] == [Problem.TRUNCATED]
    walked = {s.saga_id: s for s in check_all(store, log, [PROD.verifier])}
    assert "v~" not in walked and [f.problem for f in walked["v"].findings] == [Problem.TRUNCATED]
    store.close()


def test_new_log_names_are_the_deployments_own() -> None:
    names = {new_log_name() for _ in range(50)}
    assert len(names) == 50
    assert all(n.startswith(LOG_NAME_PREFIX) and len(n) == len(LOG_NAME_PREFIX) + 8 for n in names)
    NoteSigner.generate(names.pop())  # a valid key name


def _cosigned(note: str, *signers: NoteSigner) -> str:
    parsed = parse_note(note)
    added = tuple(s for signer in signers for s in parse_note(signer.sign(parsed.text)).signatures)
    return SignedNote(parsed.text, parsed.signatures + added).encode()


def test_a_head_is_one_trusted_keys_and_its_checkpoints_are_that_keys() -> None:
    """Finding 3 of the second attack: staging's key, which the attacker holds, cosigns
    production's head, and staging's checkpoints passed as production's."""
    _, log = logged_journal(PROD, "a")
    head = log.head()
    assert head is not None
    both = _cosigned(head.note, STAGING)
    with pytest.raises(CheckpointError) as refused:
        open_tree_head(both, BOTH)
    assert "signed by 2 keys you trust" in str(refused.value)
    assert PROD.key_hash.hex() in str(refused.value) and STAGING.key_hash.hex() in str(
        refused.value
    )
    assert open_tree_head(both, [PROD.verifier]).log == LogKey(NAME, PROD.key_hash)
    witness = NoteSigner.generate("witness.example/w1")  # a cosigner nobody trusts here
    assert open_tree_head(_cosigned(head.note, witness), BOTH).log == LogKey(NAME, PROD.key_hash)
    staging_leaf = next(logged_journal(STAGING, "b")[1].leaves())
    staging_note = open_saga_checkpoint(staging_leaf.note, BOTH)
    prod_head = open_tree_head(head.note, BOTH)
    assert not same_log(staging_note.signers, prod_head.signers)
    cosigned_leaf = open_saga_checkpoint(_cosigned(staging_leaf.note, PROD), BOTH)
    assert same_log(cosigned_leaf.signers, prod_head.signers)  # production's key signed it

    evidence = FileEvidence(BOTH)
    lines = exported(*logged_journal(PROD, "c"))
    first = json.loads(lines[0])
    lines[0] = json.dumps({**first, "tree_head": _cosigned(first["tree_head"], STAGING)})
    found = evidence.finish(verify_jsonl(lines, evidence.observe, evidence.evidence))
    assert found[0].problem is Problem.LOG_BROKEN
    assert "line 1: tree head: signed by 2 keys you trust" in found[0].detail


def test_a_head_rows_columns_are_checked_against_its_note() -> None:
    """Finding 6 of the second attack: a head's size column set to 99 placed it where its
    note is not, and `log consistency` crashed on the sizes."""
    _, log = logged_journal(PROD, "a", "b", "c")
    heads = list(log.heads())
    edited = replace(heads[1], size=99)
    audit = LogAudit([PROD.verifier])
    audit.check(log.leaves(), [heads[0], edited])
    details = [f.detail for f in audit.findings]
    assert "a tree head row's columns (size 99, root" in details[0]
    assert "are not what its signed note says (size 2, root" in details[0]
    assert "leaves 1..2 are in no signed tree head" in details[1]
    assert audit.latest is not None and audit.latest.size == 1
