"""Checking an export's evidence lines offline, as the file streams past.

The lines themselves are written and parsed by sagacity.audit._export_evidence. What an export
can show depends on what it is:

- every checkpoint must be signed by the log key, and the chain in the file must reach
  it (its entry count, its head hash); every leaf the tree head covers must be proved
  in it; a closed chain must have a checkpoint of its close;
- a **complete** export (`sagacity export --all`) must hold every leaf of its tree head,
  so a checkpoint cannot be left out of the file: a closed saga cut back to look open,
  or deleted with its checkpoints, shows as a missing leaf;
- given a tree head the auditor kept earlier (`known`), the export's head must not be
  older, a head of the same size must have the same root (else the log shows two
  histories), and in a complete export the leaves it proves must rebuild the known
  root: the log was only appended to.

Every checkpoint must be of the tree head's log, signed by the head's key (a log is its
key, not its name: two deployments may name their keys alike): a checkpoint another log
signed (a staging log whose key the auditor also trusts) cannot pass for one of this
log, not even as a leaf newer than the head, which no proof ties to it; nor can a kept
head of another key.

Memory: one integer per checkpoint line (to see a leaf repeated or left out), in a
complete export checked against a known head 32 bytes per leaf it covers, and each
saga's checkpoints; never the entries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sagacity._errors import AuditFileError
from sagacity.audit._evidence import (
    ChainCheckpoints,
    Finding,
    Problem,
    RootBuilder,
    check_inclusion,
)
from sagacity.audit._export_evidence import CheckpointLine, HeadLine
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
from sagacity.tlog._merkle import leaf_hash
from sagacity.tlog._note_keys import NoteVerifier

EXPORT = "(export)"


@dataclass
class FileEvidence:
    """The evidence lines of one export: feed `evidence` and `observe`, then `finish`."""

    verifiers: Sequence[NoteVerifier] | None
    """None: no log key was given, so signatures are not checked (proofs still are)."""
    known: TreeHead | None = None
    """A tree head the auditor kept, its signature already checked by the caller."""
    head: TreeHead | None = None
    """The export's tree head once its signature checked (None: absent or bad)."""
    head_line: int | None = None
    complete: bool = False
    checkpoints: int = 0
    proved: int = 0
    newer: int = 0
    """Checkpoints signed after the tree head (the saga ran on during the export)."""
    consistent: bool | None = None
    """Whether the export's head extends `known`: None when it could not be checked."""
    unvouched: int = 0
    """Open chains with no checkpoint: only their own hashes vouch for them."""
    findings: list[Finding] = field(default_factory=list)
    _sagas: dict[str, ChainCheckpoints] = field(default_factory=dict)
    _started: set[str] = field(default_factory=set)
    """Sagas whose entry lines have begun: a checkpoint line for one of them comes too
    late to be checked against the entries already read, so it is refused."""
    _leaves: dict[int, int] = field(default_factory=dict)
    """Log index -> the line that carried it."""
    _foreign_known: bool = False
    """The known head is of another log than the export's: nothing to compare."""
    _known_leaves: bytearray = field(default_factory=bytearray)
    """The leaf hashes of the known head's leaves, at 32 * index, as they are proved
    (grown as leaves arrive: only a complete export checked against a known head)."""

    def __post_init__(self) -> None:
        if self.known is not None and not self.known.signers:
            # A head read from a store, not opened: its key is what ties it to a log.
            self.known = open_tree_head(self.known.note, self.verifiers)

    def evidence(self, number: int, item: HeadLine | CheckpointLine) -> None:
        if isinstance(item, HeadLine):
            self._head(item)
            return
        self.checkpoints += 1
        earlier = self._leaves.setdefault(item.log_index, number)
        if earlier != number:
            raise AuditFileError(
                f"line {number}: log index {item.log_index} repeats line {earlier}; an export "
                "carries each checkpoint once"
            )
        try:
            checkpoint = open_saga_checkpoint(item.note, self.verifiers)
        except CheckpointError as exc:
            self._found(EXPORT, Problem.BAD_CHECKPOINT, f"line {number}: {exc}")
            return
        if self.head is not None and not same_log(checkpoint.signers, self.head.signers):
            self._found(
                checkpoint.saga_id,
                Problem.BAD_CHECKPOINT,
                f"line {number}: a checkpoint signed by {_keys(checkpoint.signers)}, but the "
                f"tree head by {_keys(self.head.signers)}: a checkpoint of another log was put "
                "in this export",
            )
            return
        if checkpoint.saga_id in self._started:
            raise AuditFileError(
                f"line {number}: the checkpoint of saga {checkpoint.saga_id!r} comes after "
                "its entries; an export puts each saga's checkpoint lines before its entries"
            )
        self._chain(checkpoint.saga_id).add(checkpoint)
        self._prove(item, checkpoint)

    def _head(self, item: HeadLine) -> None:
        if self.head_line is not None or self.checkpoints or self._started:
            raise AuditFileError(
                f"line {item.number}: the tree head must be the file's first line, and only once"
            )
        self.head_line = item.number
        self.complete = item.complete
        try:
            self.head = open_tree_head(item.head.note, self.verifiers)
        except CheckpointError as exc:
            self._found(EXPORT, Problem.LOG_BROKEN, f"line {item.number}: {exc}")
            return
        if self.known is not None and not same_log(self.known.signers, self.head.signers):
            self._found(
                EXPORT,
                Problem.LOG_BROKEN,
                f"the head you kept is signed by {_keys(self.known.signers)}, the export's by "
                f"{_keys(self.head.signers)}: this export is of another log",
            )
            self._foreign_known = True

    def _prove(self, item: CheckpointLine, checkpoint: SagaCheckpoint) -> None:
        head = self.head
        if head is None:
            return
        if item.proof is None:
            if item.log_index < head.size:
                self._found(
                    checkpoint.saga_id,
                    Problem.NOT_INCLUDED,
                    f"line {item.number}: leaf {item.log_index} carries no inclusion proof, but "
                    f"the tree head covers {head.size} leaves: an export proves every leaf its "
                    "head covers, so the proof was removed",
                )
            else:
                self.newer += 1
            return
        problem = check_inclusion(checkpoint, item.log_index, item.proof, head)
        if problem is not None:
            self.findings.append(problem)
            return
        self.proved += 1
        known = self.known
        if self.complete and known is not None and item.log_index < known.size <= head.size:
            at = 32 * item.log_index
            if len(self._known_leaves) < at + 32:
                self._known_leaves.extend(bytes(at + 32 - len(self._known_leaves)))
            self._known_leaves[at : at + 32] = leaf_hash(checkpoint.note.encode("utf-8"))

    def _chain(self, saga_id: str) -> ChainCheckpoints:
        if saga_id not in self._sagas:
            self._sagas[saga_id] = ChainCheckpoints(saga_id, [])
        return self._sagas[saga_id]

    def observe(self, entry: JournalEntry) -> None:
        self._started.add(entry.saga_id)
        check = self._sagas.get(entry.saga_id)
        if check is not None:
            check.observe(entry)

    def checkpointed(self, saga_id: str) -> bool:
        return saga_id in self._sagas

    def finish(self, reports: list[VerifyReport]) -> list[Finding]:
        """Once the file was read: is the tree head there, is every leaf there (complete
        export), does the head extend the known one, and does each chain match its
        checkpoints? With a tree head in the file (or a log key given), a closed chain
        with no checkpoint of its close is flagged."""
        if self.head_line is None and (self.checkpoints or self.known or self.verifiers):
            self._found(
                EXPORT,
                Problem.LOG_BROKEN,
                "the file carries no signed tree head"
                + (f" but {self.checkpoints} checkpoint(s)" if self.checkpoints else "")
                + ": the head line was removed (or the export was made from a journal with no "
                "checkpoint log; then do not give --log-key or --known-head)",
            )
        if self.head is not None:
            if self.complete:
                self._every_leaf(self.head)
            if self._foreign_known:
                self.consistent = False
            elif self.known is not None:
                self._extends(self.known, self.head)
        by_id = {r.saga_id: r for r in reports}
        expect = self.head_line is not None or bool(self.verifiers)
        for saga_id, check in self._sagas.items():
            report = by_id.get(saga_id) or VerifyReport(saga_id, True, 0, "", False)
            self.findings += check.finish(report, expect_close=expect)
        for report in reports:
            if report.saga_id in self._sagas:
                continue
            if expect and report.ok and report.closed:
                self.findings += ChainCheckpoints(report.saga_id, []).finish(report)
            elif not report.closed:
                self.unvouched += 1
        return self.findings

    def _every_leaf(self, head: TreeHead) -> None:
        # Bounded by the lines read, not by the head's size: an unsigned head (no log key
        # given) may claim 2**63 leaves, and the first gap is at most len(self._leaves).
        missing = next((i for i in range(head.size) if i not in self._leaves), None)
        if missing is not None:
            present = sum(1 for i in self._leaves if i < head.size)
            self._found(
                EXPORT,
                Problem.LOG_BROKEN,
                f"this complete export holds {present} of the {head.size} leaves its tree head "
                f"covers; leaf {missing} is the first missing: checkpoints were removed "
                "from the file (a saga cut back to look open, or deleted with them)",
            )

    def _extends(self, known: TreeHead, head: TreeHead) -> None:
        if head.size < known.size:
            self._found(
                EXPORT,
                Problem.LOG_BROKEN,
                f"the export's tree head covers {head.size} leaves, fewer than the {known.size} "
                "of the head you kept: its head line was swapped for an older one, or the "
                "export was made from a rolled-back log",
            )
            self.consistent = False
        elif head.size == known.size:
            self.consistent = head.root == known.root
            if not self.consistent:
                self._split(known, head)
        elif self.complete and all(i in self._leaves for i in range(known.size)):
            builder = RootBuilder()
            for at in range(0, len(self._known_leaves), 32):
                builder.add_leaf_hash(bytes(self._known_leaves[at : at + 32]))
            self.consistent = builder.root() == known.root
            if not self.consistent:
                self._split(known, head)

    def _split(self, known: TreeHead, head: TreeHead) -> None:
        self._found(
            EXPORT,
            Problem.LOG_BROKEN,
            f"the export's first {known.size} leaves hash to another root than the head you "
            f"kept ({known.root.hex()[:16]}…): the log was rewritten since, or shows two "
            "histories",
        )

    def _found(self, saga_id: str, problem: Problem, detail: str) -> None:
        self.findings.append(Finding(saga_id, problem, detail))


def _keys(signers: tuple[LogKey, ...]) -> str:
    return ", ".join(str(key) for key in signers) or "no key"
