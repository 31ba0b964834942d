"""Checking a journal against the evidence kept outside its chain: signed checkpoints.

A hash chain shows an edit in the middle; it cannot show its own tail cut, a whole saga
deleted, or a rewrite that recomputed every hash. A signed checkpoint can: it pins a
saga's entry count and head hash under the worker's key. This module compares chains
with checkpoints (from the checkpoint log or from an export) and the checkpoint log with
its signed tree heads; every problem names the saga (or the log leaf) and what is wrong.

Used by `sagacity verify` (journal and log in the store) and `verify-file` (an export
carrying its checkpoints, their inclusion proofs and a signed tree head).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from sagacity.audit._evidence_pending import PendingWindow, uncovered_detail
from sagacity.journal._chain import VerifyReport
from sagacity.journal._entry import JournalEntry
from sagacity.tlog._checkpoint import (
    CheckpointError,
    LogKey,
    SagaCheckpoint,
    TreeHead,
    open_saga_checkpoint,
    open_tree_head,
    same_log,
)
from sagacity.tlog._log import LoggedCheckpoint
from sagacity.tlog._merkle import EMPTY_ROOT, leaf_hash, node_hash, verify_inclusion
from sagacity.tlog._note_keys import NoteVerifier


class Problem(StrEnum):
    """What a comparison with the evidence found wrong."""

    TRUNCATED = "truncated"
    """A checkpoint covers more entries than the chain holds: its tail was cut."""
    REWRITTEN = "rewritten"
    """The chain's entry at a checkpointed position hashes otherwise than the checkpoint."""
    DELETED = "deleted"
    """A checkpointed saga has no entries in the journal."""
    NOT_CHECKPOINTED = "not_checkpointed"
    """A closed chain whose close no checkpoint covers, closed longer ago than the
    pending window: inserted by hand (or closed by a worker with no log key, or one that
    stopped between the close and its checkpoint and has not run since)."""
    BAD_CHECKPOINT = "bad_checkpoint"
    """A checkpoint that does not verify under the log key, or whose stored columns say
    something else than its signed note."""
    LOG_BROKEN = "log_broken"
    """The checkpoint log disagrees with its signed tree heads (a leaf changed, removed or
    added without the key)."""
    NOT_INCLUDED = "not_included"
    """An export's inclusion proof does not put the checkpoint in the signed tree head."""
    WITNESS = "witness"
    """Temporal history disagrees with the journal."""


@dataclass(frozen=True, slots=True)
class Finding:
    saga_id: str
    problem: Problem
    detail: str

    def describe(self) -> str:
        return f"{self.saga_id}: {self.problem.value}: {self.detail}"


@dataclass
class ChainCheckpoints:
    """One saga's checkpoints, checked against its chain as the chain streams past.

    `observe` every entry read; `finish` with the chain's report. Memory is the saga's
    checkpoints, never its entries."""

    saga_id: str
    checkpoints: list[SagaCheckpoint]
    findings: list[Finding] = field(default_factory=list)
    pending: datetime | None = None
    """When the chain closed, if its close's checkpoint is pending (see PendingWindow)."""
    _at: dict[int, SagaCheckpoint] = field(default_factory=dict)
    _last_at: datetime | None = None

    def __post_init__(self) -> None:
        self._at = {cp.entries: cp for cp in self.checkpoints}

    def add(self, checkpoint: SagaCheckpoint) -> None:
        self.checkpoints.append(checkpoint)
        self._at[checkpoint.entries] = checkpoint

    def observe(self, entry: JournalEntry) -> None:
        self._last_at = entry.recorded_at
        checkpoint = self._at.get(entry.seq)
        if (
            checkpoint is not None
            and entry.saga_id == self.saga_id
            and checkpoint.head_hash != entry.hash
        ):
            self._found(
                Problem.REWRITTEN,
                f"entry {entry.seq} hashes to {entry.hash[:16]}…, the checkpoint signed "
                f"{_when(checkpoint)} says {checkpoint.head_hash[:16]}…: the chain was rewritten",
            )

    def finish(
        self,
        report: VerifyReport,
        *,
        expect_close: bool = True,
        window: PendingWindow | None = None,
    ) -> list[Finding]:
        """Compare the chain's end with the checkpoints. With `expect_close` (the journal
        is checkpointed: its log is in use, or a log key is configured), a closed chain
        whose close no checkpoint covers is a finding too, unless the close (the last
        entry observed) is within `window`: then its checkpoint is `pending`."""
        covered = max((cp.entries for cp in self.checkpoints), default=0)
        if report.entries == 0 and self.checkpoints:
            self._found(
                Problem.DELETED,
                f"the journal holds no entry of this saga, but it was checkpointed at "
                f"{covered} entries {_when(self.checkpoints[-1])}: the saga was deleted",
            )
        elif covered > report.entries:
            self._found(
                Problem.TRUNCATED,
                f"the chain holds {report.entries} entries, but a checkpoint signed "
                f"{_when(self.checkpoints[-1])} covers {covered}: its tail was cut",
            )
        elif expect_close and report.ok and report.closed and covered != report.entries:
            closed = self._last_at
            if window is not None and closed is not None and window.allows(closed):
                self.pending = closed
            else:
                self._found(
                    Problem.NOT_CHECKPOINTED, uncovered_detail(report.entries, closed, window)
                )
        return self.findings

    def _found(self, problem: Problem, detail: str) -> None:
        self.findings.append(Finding(self.saga_id, problem, detail))


def _when(checkpoint: SagaCheckpoint) -> str:
    return f"at {checkpoint.signed_at:%Y-%m-%dT%H:%M:%SZ}"


def open_leaf(
    leaf: LoggedCheckpoint,
    verifiers: Sequence[NoteVerifier] | None,
    log: tuple[LogKey, ...] = (),
) -> tuple[SagaCheckpoint | None, Finding | None]:
    """A stored leaf's signed checkpoint, checked against the key, against the log's own
    key (`log`: the signer of its tree head; a checkpoint another log signed, with a key
    the auditor also trusts, is not one of this log) and against its own columns."""
    try:
        checkpoint = open_saga_checkpoint(leaf.note, verifiers)
    except CheckpointError as exc:
        return None, Finding(leaf.saga_id, Problem.BAD_CHECKPOINT, f"log leaf {leaf.index}: {exc}")
    if log and not same_log(checkpoint.signers, log):
        return None, Finding(
            checkpoint.saga_id,
            Problem.BAD_CHECKPOINT,
            f"log leaf {leaf.index}: signed by {_keys(checkpoint.signers)}, but the log's tree "
            f"head by {_keys(log)}: a checkpoint of another log was put in this one",
        )
    if _columns(leaf) != _columns(checkpoint):
        return None, _misfiled(leaf, checkpoint)
    return checkpoint, None


def _columns(row: LoggedCheckpoint | SagaCheckpoint) -> tuple[str, int, str]:
    if isinstance(row, LoggedCheckpoint):
        return row.saga_id, row.entries, row.head_hash
    return row.saga_id, row.entries, row.head_hash


def _misfiled(leaf: LoggedCheckpoint, checkpoint: SagaCheckpoint) -> Finding:
    return Finding(
        checkpoint.saga_id,
        Problem.BAD_CHECKPOINT,
        f"log leaf {leaf.index}: its columns (saga {leaf.saga_id!r}, {leaf.entries} "
        f"entries) are not what its signed note says (saga {checkpoint.saga_id!r}, "
        f"{checkpoint.entries} entries): the row was edited",
    )


def _keys(signers: tuple[LogKey, ...]) -> str:
    return ", ".join(str(key) for key in signers) or "no key"


class RootBuilder:
    """The Merkle root of a stream of leaves at every size, in O(log n) memory: verify
    recomputes the log's roots from its leaves without trusting the stored nodes."""

    def __init__(self) -> None:
        self.size = 0
        self._stack: list[tuple[int, bytes]] = []  # (level, hash), levels decreasing

    def add(self, data: bytes) -> None:
        self.add_leaf_hash(leaf_hash(data))

    def add_leaf_hash(self, digest: bytes) -> None:
        level = 0
        while self._stack and self._stack[-1][0] == level:
            _, left = self._stack.pop()
            digest = node_hash(left, digest)
            level += 1
        self._stack.append((level, digest))
        self.size += 1

    def root(self) -> bytes:
        if not self._stack:
            return EMPTY_ROOT
        digest = self._stack[-1][1]
        for _, left in reversed(self._stack[:-1]):
            digest = node_hash(left, digest)
        return digest


@dataclass
class LogAudit:
    """The checkpoint log's leaves against its signed tree heads, recomputed from the
    leaves alone. Feed leaves in index order and heads in size order (`check`).

    Every head's root is compared with the root recomputed at its size; the newest head's
    signature is checked (one Ed25519 verification, not one per head: a root that matches
    the leaves needs no signature to be right), and its key is the log's (`log_key`).
    Leaves are checked for shape and against their own columns here; their signatures
    are checked saga by saga (check_all). The columns are only an index: a leaf whose
    columns disagree with its signed note is found, and filed under the saga its note
    names (`misfiled`), so a checkpoint cannot be hidden from its saga by renaming it."""

    verifiers: Sequence[NoteVerifier] | None
    """None: no log key is known, so signatures are not checked (the roots still are)."""
    want: str | None = None
    """A saga whose leaves to keep in `wanted`, found by what their signed notes say."""
    findings: list[Finding] = field(default_factory=list)
    leaves: int = 0
    """The leaves in order from index 0 (up to the first gap): the roots compared."""
    read: int = 0
    """Every leaf read, gaps or not."""
    heads: int = 0
    latest: TreeHead | None = None
    wanted: list[LoggedCheckpoint] = field(default_factory=list)
    misfiled: dict[str, list[LoggedCheckpoint]] = field(default_factory=dict)
    """Leaves whose columns disagree with their note, by the note's saga, columns as the
    note says."""
    misfiled_at: set[int] = field(default_factory=set)
    """Their log indexes: a walk by the saga_id column skips them."""

    @property
    def log_key(self) -> tuple[LogKey, ...]:
        """The key of the log (its newest tree head's signer, checked): every leaf must be
        signed by it. Empty when the log has no usable head."""
        return self.latest.signers if self.latest is not None else ()

    def check(self, leaves: Iterable[LoggedCheckpoint], heads: Iterable[TreeHead]) -> None:
        builder = RootBuilder()
        pending = self._as_signed(heads)
        head = next(pending, None)
        gap = False
        for leaf in leaves:
            self.read += 1
            self._file(leaf)
            if gap:
                continue  # the roots cannot be compared past a gap; the leaves are still read
            if leaf.index != builder.size:
                self._broken(
                    f"leaf {builder.size} is missing (the next leaf is {leaf.index}): "
                    "checkpoints were deleted from the log"
                )
                gap = True
                continue
            builder.add(leaf.note.encode("utf-8"))
            while head is not None and head.size <= builder.size:
                if head.size == builder.size:
                    self._head(head, builder.root())
                else:
                    self._broken(f"a tree head of size {head.size} is out of order")
                head = next(pending, None)
        self.leaves = builder.size
        self.wanted.sort(key=lambda leaf: (leaf.entries, leaf.index))
        if gap:
            pass
        elif head is not None:
            self._broken(
                f"a signed tree head covers {head.size} leaves, but the log holds "
                f"{builder.size}: leaves were deleted"
            )
        elif self.latest is None and builder.size:
            self._broken(f"the log holds {builder.size} leaves but no signed tree head")
        elif self.latest is not None and self.latest.size != builder.size:
            self._broken(
                f"leaves {self.latest.size}..{builder.size - 1} are in no signed tree head: "
                "they were added without the log key"
            )
        if self.latest is not None and self.verifiers is not None:
            try:
                self.latest = open_tree_head(self.latest.note, self.verifiers)
            except CheckpointError as exc:
                self._broken(f"the newest tree head (size {self.latest.size}): {exc}")
                self.latest = None

    def _file(self, leaf: LoggedCheckpoint) -> None:
        """Read a leaf's note (unchecked: signatures are checked per saga) and file it
        under the saga it names."""
        try:
            said = open_saga_checkpoint(leaf.note, None)
        except CheckpointError as exc:
            self.findings.append(
                Finding(leaf.saga_id, Problem.BAD_CHECKPOINT, f"log leaf {leaf.index}: {exc}")
            )
            return
        filed = leaf
        if _columns(leaf) != _columns(said):
            self.findings.append(_misfiled(leaf, said))
            filed = LoggedCheckpoint(
                leaf.index, said.saga_id, said.entries, said.head_hash, leaf.note
            )
            self.misfiled.setdefault(said.saga_id, []).append(filed)
            self.misfiled_at.add(leaf.index)
        if said.saga_id == self.want:
            self.wanted.append(filed)

    def _as_signed(self, heads: Iterable[TreeHead]) -> Iterator[TreeHead]:
        """The stored heads as their notes say (unchecked: only the newest one's signature
        is checked). A row whose size or root columns are not its note's was edited: it is
        reported and left out, so a forged size column can neither place a head where its
        note is not, nor reach a proof between sizes the notes do not name."""
        for head in heads:
            try:
                said = open_tree_head(head.note, None)
            except CheckpointError as exc:
                self._broken(f"the tree head stored at size {head.size}: {exc}")
                continue
            if (said.size, said.root) != (head.size, head.root):
                self._broken(
                    f"a tree head row's columns (size {head.size}, root "
                    f"{head.root.hex()[:16]}…) are not what its signed note says (size "
                    f"{said.size}, root {said.root.hex()[:16]}…): the row was edited"
                )
                continue
            yield said

    def _head(self, head: TreeHead, root: bytes) -> None:
        self.heads += 1
        if head.root != root:
            self._broken(
                f"the leaves hash to root {root.hex()[:16]}… at size {head.size}, the signed "
                f"tree head says {head.root.hex()[:16]}…: the log was rewritten"
            )
            return
        self.latest = head

    def _broken(self, detail: str) -> None:
        self.findings.append(Finding("(checkpoint log)", Problem.LOG_BROKEN, detail))


def check_inclusion(
    checkpoint: SagaCheckpoint, index: int, proof: Sequence[bytes], head: TreeHead
) -> Finding | None:
    """Whether an export's checkpoint is leaf `index` of the tree `head` signs."""
    leaf = leaf_hash(checkpoint.note.encode("utf-8"))
    if verify_inclusion(leaf, index, head.size, list(proof), head.root):
        return None
    return Finding(
        checkpoint.saga_id,
        Problem.NOT_INCLUDED,
        f"the inclusion proof does not put its checkpoint ({checkpoint.entries} entries) at "
        f"leaf {index} of the signed tree head of size {head.size}",
    )
