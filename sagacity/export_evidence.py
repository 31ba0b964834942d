"""Checkpoints, inclusion proofs and a signed tree head inside a JSON Lines export.

An export made from a journal with a checkpoint log carries, besides the entry lines:

- first, one tree-head line: ``{"tree_head": "<signed note>"}``, the newest signed head
  of the checkpoint log when the export began;
- before each saga's entry lines, one line per checkpoint of that saga:
  ``{"checkpoint": "<signed note>", "log_index": N, "inclusion_proof": ["<base64>", …]}``
  (the proof is null for a checkpoint newer than the tree head).

So `verify-file` can check offline, with the log's public key only, that each checkpoint
is signed, that the chain in the file reaches it (its entry count and head hash), that
it is leaf N of the signed tree, and — with `sagacity log consistency` — that the log
was only appended to since any earlier head the auditor kept. Checkpoint lines come
before their saga's entries so the file is still checked in one pass, line by line.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sagacity.chain import VerifyReport
from sagacity.checkpoint import (
    CheckpointError,
    SagaCheckpoint,
    TreeHead,
    open_saga_checkpoint,
    open_tree_head,
)
from sagacity.checkpoint_log import CheckpointLog
from sagacity.entry import JournalEntry
from sagacity.errors import AuditFileError
from sagacity.evidence import ChainCheckpoints, Finding, Problem, check_inclusion
from sagacity.note_keys import NoteVerifier

TREE_HEAD_FIELDS = frozenset({"tree_head"})
CHECKPOINT_FIELDS = frozenset({"checkpoint", "log_index", "inclusion_proof"})
_MAX_PROOF = 64


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def tree_head_line(head: TreeHead) -> str:
    return _line({"tree_head": head.note})


def checkpoint_lines(log: CheckpointLog, saga_id: str, head: TreeHead | None) -> list[str]:
    """The saga's checkpoint lines, each proved against `head` when it is in it."""
    lines = []
    for leaf in log.of_saga(saga_id):
        proof = None
        if head is not None and leaf.index < head.size:
            proof = [_b64(h) for h in log.prove_inclusion(leaf.index, head.size)]
        lines.append(
            _line({"checkpoint": leaf.note, "log_index": leaf.index, "inclusion_proof": proof})
        )
    return lines


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def is_evidence(record: dict[str, Any]) -> bool:
    return "tree_head" in record or "checkpoint" in record


@dataclass(frozen=True, slots=True)
class CheckpointLine:
    number: int
    note: str
    log_index: int
    proof: list[bytes] | None


def parse_evidence(number: int, record: dict[str, Any]) -> TreeHead | CheckpointLine:
    """A tree-head or checkpoint line, shape-checked (signatures are checked later)."""
    fields = TREE_HEAD_FIELDS if "tree_head" in record else CHECKPOINT_FIELDS
    if record.keys() != fields:
        raise AuditFileError(
            f"line {number}: an evidence line has exactly the fields {', '.join(sorted(fields))}"
        )
    if "tree_head" in record:
        if not isinstance(record["tree_head"], str):
            raise AuditFileError(f"line {number}: tree_head must be a signed note (a string)")
        try:
            return open_tree_head(record["tree_head"], None)
        except CheckpointError as exc:
            raise AuditFileError(f"line {number}: {exc}") from None
    note, index, proof = record["checkpoint"], record["log_index"], record["inclusion_proof"]
    if not isinstance(note, str):
        raise AuditFileError(f"line {number}: checkpoint must be a signed note (a string)")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise AuditFileError(f"line {number}: log_index must be a non-negative integer")
    if proof is not None:
        if not isinstance(proof, list) or len(proof) > _MAX_PROOF:
            raise AuditFileError(f"line {number}: inclusion_proof must be a list of hashes")
        try:
            hashes = [base64.b64decode(h, validate=True) for h in proof]
        except (TypeError, binascii.Error, ValueError):
            raise AuditFileError(
                f"line {number}: inclusion_proof holds a non-base64 hash"
            ) from None
        proof = hashes
    return CheckpointLine(number, note, index, proof)


@dataclass
class FileEvidence:
    """The evidence lines of one export, checked as the file streams past."""

    verifiers: Sequence[NoteVerifier] | None
    head: TreeHead | None = None
    checkpoints: int = 0
    proved: int = 0
    findings: list[Finding] = field(default_factory=list)
    _sagas: dict[str, ChainCheckpoints] = field(default_factory=dict)
    _started: set[str] = field(default_factory=set)
    """Sagas whose entry lines have begun: a checkpoint line for one of them comes too
    late to be checked against the entries already read, so it is refused."""

    def evidence(self, number: int, item: TreeHead | CheckpointLine) -> None:
        if isinstance(item, TreeHead):
            if self.head is not None or self.checkpoints:
                raise AuditFileError(f"line {number}: the tree head must be the file's first line")
            try:
                self.head = open_tree_head(item.note, self.verifiers)
            except CheckpointError as exc:
                self._found("(export)", Problem.LOG_BROKEN, f"line {number}: {exc}")
            return
        self.checkpoints += 1
        try:
            checkpoint = open_saga_checkpoint(item.note, self.verifiers)
        except CheckpointError as exc:
            self._found("(export)", Problem.BAD_CHECKPOINT, f"line {number}: {exc}")
            return
        if checkpoint.saga_id in self._started:
            raise AuditFileError(
                f"line {item.number}: the checkpoint of saga {checkpoint.saga_id!r} comes after "
                "its entries; an export puts each saga's checkpoint lines before its entries"
            )
        self._chain(checkpoint.saga_id).add(checkpoint)
        self._prove(item, checkpoint)

    def _prove(self, item: CheckpointLine, checkpoint: SagaCheckpoint) -> None:
        if item.proof is None or self.head is None:
            return
        problem = check_inclusion(checkpoint, item.log_index, item.proof, self.head)
        if problem is not None:
            self.findings.append(problem)
        else:
            self.proved += 1

    def _chain(self, saga_id: str) -> ChainCheckpoints:
        if saga_id not in self._sagas:
            self._sagas[saga_id] = ChainCheckpoints(saga_id, [])
        return self._sagas[saga_id]

    def observe(self, entry: JournalEntry) -> None:
        self._started.add(entry.saga_id)
        check = self._sagas.get(entry.saga_id)
        if check is not None:
            check.observe(entry)

    def finish(self, reports: list[VerifyReport]) -> list[Finding]:
        """Compare each saga's chain with its checkpoints once the file was read; with a
        tree head in the file (or a log key given), a closed chain with no checkpoint of
        its close is flagged."""
        by_id = {r.saga_id: r for r in reports}
        expect = self.head is not None or bool(self.verifiers)
        for saga_id, check in self._sagas.items():
            report = by_id.get(saga_id) or VerifyReport(saga_id, True, 0, "", False)
            self.findings += check.finish(report, expect_close=expect)
        if expect:
            for report in reports:
                if report.saga_id not in self._sagas and report.ok and report.closed:
                    self.findings += ChainCheckpoints(report.saga_id, []).finish(report)
        return self.findings

    def _found(self, saga_id: str, problem: Problem, detail: str) -> None:
        self.findings.append(Finding(saga_id, problem, detail))
