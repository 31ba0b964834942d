"""Walking a journal store and its checkpoint log together (`sagacity verify`).

The journal's sagas and the log's leaves are both streamed in saga-id order (code-point
order on every backend) and merged, so a saga deleted from the journal is found as a
checkpointed id with no chain, in memory bounded by one saga's checkpoints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from sagacity.audit import verify_store
from sagacity.chain import VerifyReport
from sagacity.checkpoint import SagaCheckpoint
from sagacity.checkpoint_log import CheckpointLog, LoggedCheckpoint
from sagacity.entry import JournalEntry
from sagacity.evidence import ChainCheckpoints, Finding, LogAudit, open_leaf
from sagacity.note_keys import NoteVerifier
from sagacity.stores.base import JournalStore

Observe = Callable[[JournalEntry], None]


@dataclass
class SagaEvidence:
    """One saga's chain report (None when the journal holds none of it) and what the
    checkpoints say is wrong with it."""

    saga_id: str
    report: VerifyReport | None
    findings: list[Finding] = field(default_factory=list)
    checkpoints: int = 0


def _opened(
    leaves: Sequence[LoggedCheckpoint], verifiers: Sequence[NoteVerifier] | None
) -> tuple[list[SagaCheckpoint], list[Finding]]:
    good: list[SagaCheckpoint] = []
    bad: list[Finding] = []
    for leaf in leaves:
        checkpoint, problem = open_leaf(leaf, verifiers)
        if checkpoint is not None:
            good.append(checkpoint)
        if problem is not None:
            bad.append(problem)
    return good, bad


def check_saga(
    store: JournalStore,
    saga_id: str,
    leaves: Sequence[LoggedCheckpoint],
    verifiers: Sequence[NoteVerifier] | None,
    observe: Observe | None = None,
    *,
    expect_close: bool = True,
) -> SagaEvidence:
    """Verify one saga's chain and compare it with its checkpoints (`expect_close`: see
    ChainCheckpoints.finish)."""
    checkpoints, findings = _opened(leaves, verifiers)
    check = ChainCheckpoints(saga_id, checkpoints)

    def both(entry: JournalEntry) -> None:
        check.observe(entry)
        if observe is not None:
            observe(entry)

    report = verify_store(store, saga_id, both)
    findings += check.finish(report, expect_close=expect_close)
    return SagaEvidence(saga_id, report if report.entries else None, findings, len(leaves))


def _grouped(leaves: Iterator[LoggedCheckpoint]) -> Iterator[tuple[str, list[LoggedCheckpoint]]]:
    group: list[LoggedCheckpoint] = []
    for leaf in leaves:
        if group and leaf.saga_id != group[0].saga_id:
            yield group[0].saga_id, group
            group = []
        group.append(leaf)
    if group:
        yield group[0].saga_id, group


def check_all(
    store: JournalStore,
    log: CheckpointLog | None,
    verifiers: Sequence[NoteVerifier] | None,
    observe: Observe | None = None,
    *,
    expect_close: bool = True,
) -> Iterator[SagaEvidence]:
    """Every saga of the journal, and every checkpointed saga missing from it, in id
    order, each compared with its checkpoints (none when `log` is None)."""
    sagas = iter(store.sagas())
    groups = _grouped(iter(log.by_saga())) if log is not None else iter(())
    saga = next(sagas, None)
    group = next(groups, None)
    while saga is not None or group is not None:
        if group is not None and (saga is None or group[0] < saga):
            yield check_saga(
                store, group[0], group[1], verifiers, observe, expect_close=expect_close
            )
            group = next(groups, None)
            continue
        assert saga is not None
        leaves: list[LoggedCheckpoint] = []
        if group is not None and group[0] == saga:
            leaves = group[1]
            group = next(groups, None)
        yield check_saga(store, saga, leaves, verifiers, observe, expect_close=expect_close)
        saga = next(sagas, None)


def checkpointed(log: CheckpointLog, verifiers: Sequence[NoteVerifier] | None) -> bool:
    """Whether closed sagas are expected to carry a checkpoint: the log is in use (it has
    a tree head) or the auditor holds its key. A log emptied by someone who could drop its
    triggers still expects them when the key is given (and `log consistency` against an
    earlier head shows the loss)."""
    return bool(verifiers) or log.head() is not None


def audit_log(log: CheckpointLog, verifiers: Sequence[NoteVerifier] | None) -> LogAudit:
    """The whole log recomputed from its leaves and compared with every signed head."""
    audit = LogAudit(verifiers)
    audit.check(log.leaves(), log.heads())
    return audit
