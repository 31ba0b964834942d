"""A saga's progress as events a person can follow while `sagacity start --wait` waits.

Two sources, one kind of event:

- the journal (when the CLI can read the worker's journal: SAGACITY_JOURNAL_URL or
  --journal): every entry, followed by seq, each one turned into an event exactly once.
  This is the whole story: each INTENT, outcome, approval, decision, compensation,
  refusal, wait for a person and the close, in the order they were recorded;
- the workflow's queries (`steps`, `status`), when the journal cannot be read here (a
  memory:// journal, another machine's file, a database out of reach): each step's
  report, with the phases its status implies (an EXECUTED step that was approved was
  first AWAITING_APPROVAL, then APPROVED; a COMPENSATED one was EXECUTED first), each
  (step, phase) shown once. Polls can miss an intermediate state, never a phase: what a
  later status implies is shown then. Repeated phases of one step (a compensation that
  fails twice) are shown once; the journal has them all.

JournalTracker and WorkflowTracker are pure (entries or reports in, new events out);
worker.progress_follow is the loop that feeds them until the workflow closes, and
worker.progress_view prints the events.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from sagacity._errors import SagacityError
from sagacity.approval._models import approval_hash, approval_payload
from sagacity.journal._canonical import canonical_text
from sagacity.journal._entry import JournalEntry
from sagacity.journal._phases import Phase, SagaStatus, StepStatus
from sagacity.worker.cli._render import entry_detail
from sagacity.workflows._models import PendingApproval, SagaResult, SagaView, StepReport

__all__ = [
    "ApprovalShown",
    "JournalTracker",
    "ProgressEvent",
    "WorkflowTracker",
    "entry_event",
    "report_events",
]

Source = Literal["journal", "workflow"]


@dataclass(frozen=True)
class ApprovalShown:
    """The approval a step waits for: the exact payload the hash covers, and the hash."""

    tool: str
    args: Any
    payload: str
    """The canonical JSON of {"tool", "args"}: the bytes the SHA-256 is of."""
    sha256: str
    matches: bool | None
    """The hash recomputed here from the payload shown equals the saga's (None: the
    payload shown is not the whole one, so it could not be checked)."""
    deadline: str | None = None
    needs: str | None = None


@dataclass(frozen=True)
class ProgressEvent:
    """One thing that happened to a saga: a journal entry, or a phase a step report
    implies. Every text in it is as the saga recorded it: escape it before printing."""

    saga_id: str
    phase: str
    """A journal Phase; from the workflow's reports also UNKNOWN, FENCED, NOT_COMPENSABLE,
    DID_NOT_HAPPEN and ACCEPTED (step statuses no single entry records)."""
    source: Source
    seq: int | None = None
    step: int = 0
    attempt: int = 1
    tool: str = ""
    args: Any = None
    result: Any = None
    error: str | None = None
    actor: str | None = None
    reason: str | None = None
    compensation: str | None = None
    status: str | None = None
    """The saga's status: SAGA_CLOSED's final one, NEEDS_HUMAN's."""
    detail: str | None = None
    approval: ApprovalShown | None = None
    dirty: list[dict[str, Any]] = field(default_factory=list)
    deadline: str | None = None

    @property
    def key(self) -> tuple[int, str]:
        return (self.step, self.phase)

    def to_json(self) -> dict[str, Any]:
        return {"event": "progress", **asdict(self)}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _approval(tool: str, args: Any, sha256: str, **more: Any) -> ApprovalShown:
    try:
        payload = canonical_text(approval_payload(tool, args))
        matches: bool | None = approval_hash(tool, args) == sha256
    except SagacityError:  # not a canonical JSON value: show it, vouch for nothing
        payload, matches = str(args), False
    return ApprovalShown(tool, args, payload, sha256, matches, **more)


def _quorum(result: dict[str, Any]) -> str | None:
    quorum = result.get("quorum")
    approvals = result.get("approvals")
    if isinstance(quorum, int) and quorum > 1 and isinstance(approvals, list):
        met = "quorum met" if result.get("quorum_met") else "quorum not met yet"
        return f"{len(approvals)} of {quorum} approvals, {met}"
    return None


_AS_JOURNALED = ("saga_id", "seq", "step", "attempt", "tool", "error", "actor")
"""What the event of a journal entry takes from it unchanged, under the same names."""


def entry_event(entry: JournalEntry) -> ProgressEvent:
    """The event of one journal entry: what a person following the saga needs of it."""
    inp, res = _dict(entry.input), _dict(entry.result)
    more: dict[str, Any] = {}
    phase = entry.phase
    if phase in (Phase.INTENT, Phase.CALL_REFUSED):
        more["args"] = entry.input
    elif phase is Phase.EXECUTED:
        more["result"] = entry.result
    elif phase is Phase.AWAITING_APPROVAL:
        approval = _dict(res.get("approval"))
        quorum = approval.get("quorum")
        more["approval"] = _approval(
            _str(inp.get("tool")) or entry.tool,
            inp.get("args"),
            _str(res.get("payload_sha256")) or "",
            deadline=_str(res.get("deadline")),
            needs=f"{quorum} approvals" if isinstance(quorum, int) and quorum > 1 else None,
        )
    elif phase in (Phase.APPROVED, Phase.REJECTED):
        more["reason"] = _str(res.get("reason")) or None
        more["detail"] = _quorum(res)
    elif phase is Phase.COMPENSATED:
        more["compensation"] = _str(inp.get("compensation"))
    elif phase is Phase.NEEDS_HUMAN:
        listed = inp.get("dirty")
        listed = listed if isinstance(listed, list) else []
        more["dirty"] = [d for d in listed if isinstance(d, dict)]
        more["deadline"] = _str(res.get("deadline"))
        more["status"] = SagaStatus.NEEDS_HUMAN.value
    elif phase is Phase.RESOLVED:
        more["detail"] = entry_detail(entry)
    elif phase is Phase.SAGA_CLOSED:
        more["status"] = _str(res.get("status"))
        more["detail"] = _str(res.get("first_failure"))
    taken = {name: getattr(entry, name) for name in _AS_JOURNALED}
    return ProgressEvent(phase=phase.value, source="journal", **taken, **more)


class JournalTracker:
    """Follows a saga's journal by seq: each entry becomes an event once, in seq order,
    however the reads overlap."""

    def __init__(self) -> None:
        self.last_seq = 0
        self.seen: set[tuple[int, str]] = set()
        """(step, phase) of every event given: what a WorkflowTracker taking over skips."""

    def feed(self, entries: Iterable[JournalEntry]) -> list[ProgressEvent]:
        events = []
        for entry in sorted(entries, key=lambda e: e.seq):
            if entry.seq <= self.last_seq:
                continue
            self.last_seq = entry.seq
            event = entry_event(entry)
            self.seen.add(event.key)
            events.append(event)
        return events


OUTCOMES: dict[StepStatus, tuple[str, ...]] = {
    StepStatus.EXECUTED: (Phase.EXECUTED,),
    StepStatus.FAILED: (Phase.FAILED,),
    StepStatus.REFUSED: (Phase.CALL_REFUSED,),
    StepStatus.UNKNOWN: ("UNKNOWN",),
    StepStatus.FENCED: ("FENCED",),
    StepStatus.COMPENSATED: (Phase.EXECUTED, Phase.COMPENSATED),
    StepStatus.COMPENSATION_FAILED: (Phase.EXECUTED, Phase.COMPENSATION_FAILED),
    StepStatus.NOT_COMPENSABLE: (Phase.EXECUTED, "NOT_COMPENSABLE"),
    StepStatus.DID_NOT_HAPPEN: ("DID_NOT_HAPPEN",),
    StepStatus.ACCEPTED: ("ACCEPTED",),
}
"""The phases a step status implies after its INTENT, in the order they happened. The
report's seq is its latest entry's: the last phase's (NOT_COMPENSABLE, which no entry
records: the EXECUTED one)."""
WAITING = (StepStatus.AWAITING_APPROVAL, StepStatus.NEEDS_APPROVAL)


def _pending_approval(report: StepReport, pending: PendingApproval | None) -> ApprovalShown:
    """The request a step waits for: the workflow's pending request when it is this
    step's, else what the step report says of it."""
    if pending is not None and pending.step == report.step:
        return _approval(
            pending.tool,
            pending.payload,
            pending.payload_sha256,
            deadline=pending.deadline.isoformat() if pending.deadline else None,
            needs=pending.needs,
        )
    digest = report.payload_sha256 or ""
    if "_omitted" in report.args:  # the report left the arguments out: nothing to check
        return ApprovalShown(report.tool, report.args, str(report.args), digest, None)
    return _approval(report.tool, report.args, digest)


def report_events(
    saga_id: str, report: StepReport, pending: PendingApproval | None = None
) -> list[ProgressEvent]:
    """Every phase a step report implies, in order (the workflow reports a step once it
    has an outcome or waits for approval, so INTENT alone is never seen)."""
    r = report

    def event(phase: str, **more: Any) -> ProgressEvent:
        return ProgressEvent(
            saga_id=saga_id, phase=str(phase), source="workflow", step=r.step, tool=r.tool, **more
        )

    events: list[ProgressEvent] = []
    asked = r.payload_sha256 is not None or r.status in WAITING
    if asked:
        events.append(event(Phase.AWAITING_APPROVAL, approval=_pending_approval(r, pending)))
    if r.status is StepStatus.REJECTED:
        return [*events, event(Phase.REJECTED, actor=r.approver, reason=r.error)]
    if r.status in WAITING:
        return events
    if asked and r.approver:
        events.append(event(Phase.APPROVED, actor=r.approver))
    if r.intent_seq is not None:
        events.append(event(Phase.INTENT, seq=r.intent_seq, args=r.args))
    phases = OUTCOMES.get(r.status, (r.status.value,))
    recorded = phases[0] if r.status is StepStatus.NOT_COMPENSABLE else phases[-1]
    for phase in phases:
        more: dict[str, Any] = {"seq": r.seq} if phase == recorded else {}
        if phase == Phase.EXECUTED:
            more["result"] = r.result
        elif phase == phases[-1]:
            more["error"] = r.error
        events.append(event(phase, **more))
    return events


UNDOING = frozenset({Phase.COMPENSATED.value, Phase.COMPENSATION_FAILED.value, "NOT_COMPENSABLE"})
AFTERWARDS = frozenset({"DID_NOT_HAPPEN", "ACCEPTED"})


def _order(event: ProgressEvent, index: int) -> tuple[int, int, int]:
    """Where an event goes among the new events of one poll: steps run one after the
    other, so their phases come first, by step; then the compensations, which run once
    the saga stopped, newest step first (as the compensator runs them); then what
    people resolved afterwards."""
    if event.phase in UNDOING:
        return (1, -event.step, index)
    return (2 if event.phase in AFTERWARDS else 0, event.step, index)


class WorkflowTracker:
    """Follows a saga through its step reports: each (step, phase) once; the new ones of
    one poll in the order they happened (see _order)."""

    def __init__(self, saga_id: str, seen: Iterable[tuple[int, str]] = ()) -> None:
        self.saga_id = saga_id
        self.seen: set[tuple[int, str]] = set(seen)

    def _new(self, events: Iterable[ProgressEvent]) -> list[ProgressEvent]:
        fresh = [e for e in events if e.key not in self.seen]
        self.seen.update(e.key for e in fresh)
        return fresh

    def update(self, steps: Iterable[StepReport], view: SagaView | None) -> list[ProgressEvent]:
        pending = view.pending_approval if view is not None else None
        fresh = [self._new(report_events(self.saga_id, r, pending)) for r in steps]
        placed = [(_order(e, i), e) for group in fresh for i, e in enumerate(group)]
        events = [event for _, event in sorted(placed, key=lambda p: p[0])]
        if view is not None and view.status is SagaStatus.NEEDS_HUMAN:
            events += self._new([self._needs_human(view)])
        return events

    def _needs_human(self, view: SagaView) -> ProgressEvent:
        shown = {"step", "tool", "kind", "known"}
        dirty = [d.model_dump(mode="json", include=shown) for d in view.dirty]
        deadline = view.human_deadline.isoformat() if view.human_deadline else None
        return ProgressEvent(
            saga_id=self.saga_id,
            phase=Phase.NEEDS_HUMAN.value,
            source="workflow",
            status=SagaStatus.NEEDS_HUMAN.value,
            dirty=dirty,
            deadline=deadline,
        )

    def closed(self, result: SagaResult) -> list[ProgressEvent]:
        """What the result adds (the last reports, the close): a closed workflow is not
        asked again."""
        closing = ProgressEvent(
            saga_id=self.saga_id,
            phase=Phase.SAGA_CLOSED.value,
            source="workflow",
            seq=result.head_seq,
            status=result.status.value,
            detail=result.first_failure,
        )
        return self.update(result.steps, None) + self._new([closing])
