"""Checkpoints, proofs and the tree head inside an export: written by export_jsonl, checked
by verify_jsonl with FileEvidence, and refused when they are malformed or lie."""

from __future__ import annotations

import io
import json

import pytest

from sagacity._errors import AuditFileError
from sagacity.audit._evidence import Problem
from sagacity.audit._export import export_jsonl, verify_jsonl
from sagacity.audit._file_evidence import FileEvidence
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import MemoryJournalStore
from sagacity.tlog._note_keys import NoteSigner

SIGNER = NoteSigner.generate("sagacity.test/export")


def exported(sagas: int = 3) -> list[str]:
    store = MemoryJournalStore()
    log = store.checkpoint_log(SIGNER)
    for i in range(sagas):
        saga_id = f"e{i}"
        store.append(EntryDraft.new(saga_id, Phase.SAGA_OPENED))
        store.append(EntryDraft.new(saga_id, Phase.EXECUTED, step=1, tool="t", result=i))
        log.record(store.append(EntryDraft.new(saga_id, Phase.SAGA_CLOSED, result={})))
    out = io.StringIO()
    export_jsonl(store, out, log=log, head=log.head())
    return out.getvalue().splitlines()


def check(lines: list[str], keys: bool = True) -> set[tuple[str, Problem]]:
    evidence = FileEvidence([SIGNER.verifier] if keys else None)
    reports = verify_jsonl(lines, evidence.observe, evidence.evidence)
    assert all(r.ok for r in reports)
    return {(f.saga_id, f.problem) for f in evidence.finish(reports)}


def test_an_honest_export_carries_and_passes_every_proof() -> None:
    lines = exported()
    assert json.loads(lines[0]) == {
        "tree_head": json.loads(lines[0])["tree_head"],
        "complete": True,
    }
    assert json.loads(lines[1]).keys() == {"checkpoint", "log_index", "inclusion_proof"}
    evidence = FileEvidence([SIGNER.verifier])
    verify_jsonl(lines, evidence.observe, evidence.evidence)
    assert (evidence.checkpoints, evidence.proved) == (3, 3)
    assert check(lines, keys=False) == set()  # no key: shapes and proofs still checked


def test_a_checkpoint_that_the_chain_in_the_file_does_not_reach_is_found() -> None:
    lines = exported()
    last_entry = max(i for i, line in enumerate(lines) if '"seq":3' in line)
    assert check(lines[:last_entry]) == {("e2", Problem.TRUNCATED)}
    without = [line for line in lines if "/saga/e1\\n" not in line]
    found = check(without)
    assert ("e1", Problem.NOT_CHECKPOINTED) in found  # its close is covered by nothing
    assert ("(export)", Problem.LOG_BROKEN) in found  # and the complete export lacks a leaf


def test_a_forged_checkpoint_or_a_wrong_proof_is_found() -> None:
    lines = exported()
    record = json.loads(lines[1])
    forged = dict(
        record, checkpoint=NoteSigner.generate(SIGNER.name).sign("x\n1\n" + "A" * 43 + "=\n")
    )
    assert ("(export)", Problem.BAD_CHECKPOINT) in check([lines[0], json.dumps(forged), *lines[2:]])
    proof = record["inclusion_proof"]
    bent = dict(record, inclusion_proof=[("B" if p[0] == "A" else "A") + p[1:] for p in proof])
    assert proof and bent["inclusion_proof"] != proof
    assert ("e0", Problem.NOT_INCLUDED) in check([lines[0], json.dumps(bent), *lines[2:]])
    other = next(i for i, line in enumerate(lines) if i > 1 and '"log_index"' in line)
    moved = dict(record, log_index=json.loads(lines[other])["log_index"])
    with pytest.raises(AuditFileError, match=f"line {other + 1}: log index .* repeats line 2"):
        check([lines[0], json.dumps(moved), *lines[2:]])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: {**r, "extra": 1}, "exactly the fields"),
        (lambda r: {**r, "inclusion_proof": ["not base64!"]}, "non-base64"),
        (lambda r: {**r, "inclusion_proof": ["AA=="] * 65}, "a list of hashes"),
        (lambda r: {**r, "log_index": -1}, "non-negative"),
        (lambda r: {**r, "log_index": True}, "non-negative"),
        (lambda r: {**r, "checkpoint": 7}, "signed note"),
    ],
)
def test_malformed_evidence_lines_are_refused_by_line(change: object, message: str) -> None:
    lines = exported(1)
    record = change(json.loads(lines[1]))  # type: ignore[operator]
    with pytest.raises(AuditFileError, match=f"line 2: .*{message}"):
        check([lines[0], json.dumps(record), *lines[2:]])


def test_the_tree_head_must_come_first_and_once() -> None:
    lines = exported(1)
    with pytest.raises(AuditFileError, match="first line"):
        check([lines[1], lines[0], *lines[2:]])
    with pytest.raises(AuditFileError, match="first line"):
        check([lines[0], lines[0], *lines[1:]])


def test_a_checkpoint_line_after_its_sagas_entries_is_refused() -> None:
    """Moved after the entries, it could not be checked against them: a chain rewritten
    in the file would pass. Refused by line instead."""
    lines = exported(1)
    with pytest.raises(AuditFileError, match="line 5: the checkpoint of saga 'e0' comes after"):
        check([lines[0], *lines[2:], lines[1]])
