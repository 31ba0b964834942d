"""Walking a journal store and its checkpoint log together (`sagacity verify`).

The journal's sagas and the log's leaves are both streamed in saga-id order (code-point
order on every backend) and merged, so a saga deleted from the journal is found as a
checkpointed id with no chain, in memory bounded by one saga's checkpoints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sagacity.audit._evidence import ChainCheckpoints, Finding, LogAudit, open_leaf
from sagacity.audit._evidence_pending import PendingWindow
from sagacity.audit._export import verify_store
from sagacity.journal._chain import VerifyReport
from sagacity.journal._entry import JournalEntry
from sagacity.stores._base import JournalStore
from sagacity.tlog._checkpoint import LogKey, SagaCheckpoint
from sagacity.tlog._log import CheckpointLog, LoggedCheckpoint
from sagacity.tlog._note_keys import NoteVerifier

Observe = Callable[[JournalEntry], None]


@dataclass
class SagaEvidence:
    """One saga's chain report (None when the journal holds none of it) and what the
    checkpoints say is wrong with it."""

    saga_id: str
    report: VerifyReport | None
    findings: list[Finding] = field(default_factory=list)
    checkpoints: int = 0
    pending: datetime | None = None
    """When it closed, if the checkpoint of its close is on its way (PendingWindow)."""


def _opened(
    leaves: Sequence[LoggedCheckpoint],
    verifiers: Sequence[NoteVerifier] | None,
    log: tuple[LogKey, ...] = (),
) -> tuple[list[SagaCheckpoint], list[Finding]]:
    good: list[SagaCheckpoint] = []
    bad: list[Finding] = []
    for leaf in leaves:
        checkpoint, problem = open_leaf(leaf, verifiers, log)
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
    log: tuple[LogKey, ...] = (),
    window: PendingWindow | None = None,
) -> SagaEvidence:
    """Verify one saga's chain and compare it with its checkpoints (`expect_close` and
    `window`: see ChainCheckpoints.finish; `log`: the key every checkpoint must be signed
    by, see open_leaf). `leaves` are trusted to be all of the saga's: `check_one` finds
    them by what their notes say, not by the log's saga_id column. The chain and the
    leaves must come from one snapshot (`JournalStore.reading()`)."""
    checkpoints, findings = _opened(leaves, verifiers, log)
    check = ChainCheckpoints(saga_id, checkpoints)

    def both(entry: JournalEntry) -> None:
        check.observe(entry)
        if observe is not None:
            observe(entry)

    report = verify_store(store, saga_id, both)
    findings += check.finish(report, expect_close=expect_close, window=window)
    shown = report if report.entries else None
    return SagaEvidence(saga_id, shown, findings, len(leaves), check.pending)


def check_one(
    store: JournalStore,
    log: CheckpointLog,
    saga_id: str,
    verifiers: Sequence[NoteVerifier] | None,
    observe: Observe | None = None,
    *,
    expect_close: bool = True,
    window: PendingWindow | None = None,
) -> tuple[SagaEvidence, LogAudit]:
    """One saga against the whole log: the log is audited (its leaves against its signed
    heads, each leaf's columns against its note) and the saga's checkpoints are the
    leaves whose signed notes name it, whatever the saga_id column says. A checkpoint
    renamed or deleted to hide a cut tail is found (`bad_checkpoint`, `log_broken`, and
    `truncated` from the note). It reads every leaf once: O(log size)."""
    audit = LogAudit(verifiers, want=saga_id)
    audit.check(log.leaves(), log.heads())
    saga = check_saga(
        store,
        saga_id,
        audit.wanted,
        verifiers,
        observe,
        expect_close=expect_close,
        log=audit.log_key,
        window=window,
    )
    return saga, audit


def _grouped(
    leaves: Iterator[LoggedCheckpoint], skip: set[int]
) -> Iterator[tuple[str, list[LoggedCheckpoint]]]:
    group: list[LoggedCheckpoint] = []
    for leaf in leaves:
        if leaf.index in skip:
            continue
        if group and leaf.saga_id != group[0].saga_id:
            yield group[0].saga_id, group
            group = []
        group.append(leaf)
    if group:
        yield group[0].saga_id, group


def _with_misfiled(
    groups: Iterator[tuple[str, list[LoggedCheckpoint]]],
    misfiled: dict[str, list[LoggedCheckpoint]],
) -> Iterator[tuple[str, list[LoggedCheckpoint]]]:
    """The column-ordered groups with each misfiled leaf put back under the saga its note
    names, still in saga-id order."""
    extra = sorted(misfiled.items())
    at = 0
    for saga_id, leaves in groups:
        while at < len(extra) and extra[at][0] < saga_id:
            yield extra[at]
            at += 1
        if at < len(extra) and extra[at][0] == saga_id:
            leaves = sorted([*leaves, *extra[at][1]], key=lambda leaf: leaf.entries)
            at += 1
        yield saga_id, leaves
    yield from extra[at:]


def sagas_with_checkpoints(
    store: JournalStore, log: CheckpointLog | None, audit: LogAudit | None
) -> Iterator[tuple[str, list[LoggedCheckpoint]]]:
    """(saga id, its checkpoints) for every saga of the journal and every checkpointed
    saga missing from it, in id order: the one merge both `check_all` and the parallel
    walk (`verify --jobs`) check, so both see the same sagas with the same leaves. No
    checkpoints at all when `log` or its `audit` is None."""
    sagas = iter(store.sagas())
    groups: Iterator[tuple[str, list[LoggedCheckpoint]]] = iter(())
    if log is not None and audit is not None:
        groups = _with_misfiled(_grouped(iter(log.by_saga()), audit.misfiled_at), audit.misfiled)
    saga = next(sagas, None)
    group = next(groups, None)
    while saga is not None or group is not None:
        if group is not None and (saga is None or group[0] < saga):
            yield group
            group = next(groups, None)
            continue
        assert saga is not None
        leaves: list[LoggedCheckpoint] = []
        if group is not None and group[0] == saga:
            leaves = group[1]
            group = next(groups, None)
        yield saga, leaves
        saga = next(sagas, None)


def check_all(
    store: JournalStore,
    log: CheckpointLog | None,
    verifiers: Sequence[NoteVerifier] | None,
    observe: Observe | None = None,
    *,
    expect_close: bool = True,
    audit: LogAudit | None = None,
    window: PendingWindow | None = None,
) -> Iterator[SagaEvidence]:
    """Every saga of the journal, and every checkpointed saga missing from it, in id
    order, each compared with its checkpoints (none when `log` is None). The checkpoints
    are filed by what their notes say, and must be signed by the log's own key, as
    `audit` (of this log; made here when not given) found them. Walk it inside the
    store's `reading()`, the audit too: one snapshot of chains, leaves and heads."""
    if log is not None and audit is None:
        audit = audit_log(log, verifiers)
    key: tuple[LogKey, ...] = ()
    if log is not None and audit is not None:
        key = audit.log_key
    for saga_id, leaves in sagas_with_checkpoints(store, log, audit):
        yield check_saga(
            store,
            saga_id,
            leaves,
            verifiers,
            observe,
            expect_close=expect_close,
            log=key,
            window=window,
        )


def checkpointed(log: CheckpointLog, verifiers: Sequence[NoteVerifier] | None) -> bool:
    """Whether closed sagas are expected to carry a checkpoint: the log is in use (it has
    a leaf or a tree head) or the auditor holds its key. A log emptied by someone who
    could drop its triggers still expects them when the key is given (and `log
    consistency` against an earlier head shows the loss)."""
    return bool(verifiers) or log.in_use()


def audit_log(log: CheckpointLog, verifiers: Sequence[NoteVerifier] | None) -> LogAudit:
    """The whole log recomputed from its leaves and compared with every signed head."""
    audit = LogAudit(verifiers)
    audit.check(log.leaves(), log.heads())
    return audit
