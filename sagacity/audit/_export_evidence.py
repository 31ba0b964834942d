"""The evidence lines of a JSON Lines export: checkpoints, inclusion proofs, a tree head.

An export made from a journal with a checkpoint log carries, besides the entry lines:

- first, one tree-head line: ``{"tree_head": "<signed note>"}``, the newest signed head
  of the checkpoint log when the export began; an export of the whole journal says so:
  ``{"tree_head": "…", "complete": true}``;
- before each saga's entry lines, one line per checkpoint of that saga:
  ``{"checkpoint": "<signed note>", "log_index": N, "inclusion_proof": ["<base64>", …]}``.
  Every leaf the tree head covers carries its proof; a checkpoint signed after the head
  (the saga ran on during the export) carries ``null``.

A complete export holds every leaf of its tree head, including the checkpoints of sagas
no longer in the journal (they follow the last saga), so `verify-file` can see a leaf
left out of the file: that is what shows a closed saga cut back to look open, or a saga
deleted with its checkpoints. Checkpoint lines come before their saga's entries so the
file is still checked in one pass, line by line (sagacity.audit._file_evidence).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from sagacity._errors import AuditFileError
from sagacity.tlog._checkpoint import CheckpointError, TreeHead, open_tree_head
from sagacity.tlog._log import CheckpointLog, LoggedCheckpoint

TREE_HEAD_FIELDS = frozenset({"tree_head"})
COMPLETE_HEAD_FIELDS = frozenset({"tree_head", "complete"})
CHECKPOINT_FIELDS = frozenset({"checkpoint", "log_index", "inclusion_proof"})
_MAX_PROOF = 64


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def tree_head_line(head: TreeHead, *, complete: bool = False) -> str:
    record: dict[str, Any] = {"tree_head": head.note}
    if complete:
        record["complete"] = True
    return _line(record)


def leaf_line(log: CheckpointLog, leaf: LoggedCheckpoint, head: TreeHead | None) -> str:
    """One checkpoint line, proved against `head` when the head covers it."""
    proof = None
    if head is not None and leaf.index < head.size:
        proof = [_b64(h) for h in log.prove_inclusion(leaf.index, head.size)]
    return _line({"checkpoint": leaf.note, "log_index": leaf.index, "inclusion_proof": proof})


def checkpoint_lines(
    log: CheckpointLog,
    saga_id: str,
    head: TreeHead | None,
    entries: int | None = None,
    leaves: list[LoggedCheckpoint] | None = None,
) -> list[str]:
    """The saga's checkpoint lines (of `leaves` when the caller has read them). With
    `entries` (how many of its entries the export holds), a checkpoint signed after
    `head` that covers more entries than that is left out: the saga grew between reading
    its entries and its checkpoints, and the export shows the saga as it read it. A leaf
    the head covers is never left out."""
    return [
        leaf_line(log, leaf, head)
        for leaf in (log.of_saga(saga_id) if leaves is None else leaves)
        if entries is None
        or leaf.entries <= entries
        or (head is not None and leaf.index < head.size)
    ]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def is_evidence(record: dict[str, Any]) -> bool:
    return "tree_head" in record or "checkpoint" in record


@dataclass(frozen=True, slots=True)
class HeadLine:
    """The tree-head line, its signature not yet checked."""

    number: int
    head: TreeHead
    complete: bool


@dataclass(frozen=True, slots=True)
class CheckpointLine:
    number: int
    note: str
    log_index: int
    proof: list[bytes] | None


def parse_evidence(number: int, record: dict[str, Any]) -> HeadLine | CheckpointLine:
    """A tree-head or checkpoint line, shape-checked (signatures are checked later)."""
    if "tree_head" in record:
        return _head_line(number, record)
    if record.keys() != CHECKPOINT_FIELDS:
        raise AuditFileError(
            f"line {number}: a checkpoint line has exactly the fields "
            f"{', '.join(sorted(CHECKPOINT_FIELDS))}"
        )
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


def _head_line(number: int, record: dict[str, Any]) -> HeadLine:
    if record.keys() not in (TREE_HEAD_FIELDS, COMPLETE_HEAD_FIELDS):
        raise AuditFileError(
            f"line {number}: a tree-head line has exactly the fields tree_head and, in a "
            "complete export, complete"
        )
    if record.get("complete", True) is not True:
        raise AuditFileError(
            f"line {number}: complete is true or absent (got {record['complete']!r})"
        )
    if not isinstance(record["tree_head"], str):
        raise AuditFileError(f"line {number}: tree_head must be a signed note (a string)")
    try:
        head = open_tree_head(record["tree_head"], None)
    except CheckpointError as exc:
        raise AuditFileError(f"line {number}: {exc}") from None
    return HeadLine(number, head, "complete" in record)
