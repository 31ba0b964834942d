"""The approval gate of a saga: one pending request, decisions judged against it.

`wait` journals AWAITING_APPROVAL (with the step's approval requirement — the tool's
policy tightened by the saga — and the registry version it is judged under), then
journals each accepted decision as it is counted (workflows.approval_votes): the step
runs once the quorum of distinct people is met; one accepted rejection rejects; the
timeout rejects. How a decision is judged and a refusal kept is
workflows.approval_judging; the signal and update doors are workflows.approval_doors.

A request the saga stops waiting for (a cancel, a journal that failed) is closed in the
journal by a REJECTED of the saga's own (CANCELLED_ACTOR, FAILED_ACTOR) before the saga
closes, so every AWAITING_APPROVAL has its answer.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from sagacity.activities._models import EntryRef, JournalEventInput, ToolOutcome
    from sagacity.approval._judge import ApprovalRequest, approval_payload
    from sagacity.approval._policy import ApprovalRequirement
    from sagacity.approval._registry_file import KeyLookup
    from sagacity.approval._registry_marks import RegistryMark
    from sagacity.journal._canonical import canonical_text
    from sagacity.journal._phases import Phase
    from sagacity.workflows._models import PendingApproval

from sagacity.workflows._approval_doors import DEFERRED_LIMIT, Doors
from sagacity.workflows._approval_judging import (
    REFUSALS_JOURNALED_ELSEWHERE,
    REFUSALS_JOURNALED_PER_STEP,
    Lookup,
)
from sagacity.workflows._approval_votes import TIMEOUT_ACTOR, GateDecision, Journal, Vote

__all__ = [
    "CANCELLED_ACTOR",
    "DEFERRED_LIMIT",
    "FAILED_ACTOR",
    "REFUSALS_JOURNALED_ELSEWHERE",
    "REFUSALS_JOURNALED_PER_STEP",
    "TIMEOUT_ACTOR",
    "ApprovalGate",
    "GateDecision",
]

CANCELLED_ACTOR = "sagacity:cancelled"
FAILED_ACTOR = "sagacity:failed"
"""Actor of the REJECTED that closes a request the saga stopped waiting for because of a
failure (the journal could not record the decision), not a cancellation."""


class ApprovalGate(Doors):
    def __init__(
        self,
        saga_id: str,
        journal: Journal,
        reached: Callable[[], int],
        lookup: Lookup,
        tightening: ApprovalRequirement | None = None,
    ) -> None:
        self._saga_id = saga_id
        self.changed: Callable[[], None] = lambda: None
        """Called when what the gate shows changes (a request, an approval counted): the
        saga republishes its current details."""
        self._lookup = lookup
        self._tightening = tightening
        self.requester: str | None = None
        """The saga's requester (verified where a registry is configured), set at start."""
        self._judging = 0
        self._votes: list[Vote] = []
        self._vote_refs: dict[int, EntryRef] = {}
        self._vote_count = 0
        self._counted: list[tuple[str, datetime]] = []
        self._approvals_journaled = 0
        self._requirement = ApprovalRequirement()
        self._registry: KeyLookup | None = None
        self._registry_seen: RegistryMark | None = None
        self._reached = reached  # the step the saga is at (the last one it started)
        self._deferred = 0
        self._released = False
        self._journal = journal
        self._pending: ApprovalRequest | None = None
        self._decided_steps: set[int] = set()
        self._decision_refs: dict[int, EntryRef] = {}
        self._refusals: dict[int, int] = {}
        self._abandoned: dict[int, tuple[ApprovalRequest, str | None]] = {}
        self._closed = False

    async def wait(self, outcome: ToolOutcome, now: datetime, timeout: timedelta) -> GateDecision:
        """Journal AWAITING_APPROVAL, then each accepted decision, until a rejection, the
        quorum or the timeout decides the request."""
        assert outcome.payload is not None  # NEEDS_APPROVAL always carries it
        args = outcome.payload.args
        request = ApprovalRequest.for_call(
            self._saga_id,
            outcome.step,
            outcome.tool,
            args,
            requested_at=now,
            deadline=now + timeout,
        )
        if request.payload_sha256 != outcome.payload.sha256:
            raise ApplicationError(
                f"worker and workflow disagree on the payload hash of step {outcome.step}; "
                "refusing to ask for approval",
                type="PayloadHashDisagreement",
                non_retryable=True,
            )
        self._requirement = self.requirement(outcome.approval)
        self._counted, self._votes, self._approvals_journaled = [], [], 0
        self._registry = await self._lookup(None)
        self.rolled_back(self._registry)
        result: dict[str, Any] = {
            "payload_sha256": request.payload_sha256,
            "deadline": request.deadline.isoformat() if request.deadline else None,
            "approval": self._requirement.model_dump(mode="json"),
            "registry": self._registry.registry_ref,
        }
        await self._journal(
            JournalEventInput(
                saga_id=self._saga_id,
                phase=Phase.AWAITING_APPROVAL,
                step=outcome.step,
                tool=outcome.tool,
                input=approval_payload(outcome.tool, args),
                result=result,
            )
        )
        self._pending = request
        self.changed()
        try:
            return await self._gather(request, timeout)
        except BaseException as exc:
            # Cancelled (or the journal failed) while waiting or journaling the decision:
            # nothing stays pending, late decisions are refused, a waiting update returns.
            self._pending, self._votes = None, []
            self._decided_steps.add(outcome.step)
            if outcome.step not in self._decision_refs:
                failure = None if is_cancelled_exception(exc) else f"{type(exc).__name__}"
                self._abandoned[outcome.step] = (request, failure)
            raise

    def requirement(self, declared: ApprovalRequirement | None) -> ApprovalRequirement:
        """The tool's requirement for this call, tightened by the saga's options."""
        return (declared or ApprovalRequirement()).tightened(self._tightening)

    async def _journal_rejection(
        self, request: ApprovalRequest, actor: str, reason: str
    ) -> EntryRef:
        """REJECTED by one of the saga's own actors (timeout, cancel, failure)."""
        ref = await self._journal(
            JournalEventInput(
                saga_id=self._saga_id,
                phase=Phase.REJECTED,
                step=request.step,
                tool=request.tool,
                actor=actor,
                result={"payload_sha256": request.payload_sha256},
                error=reason,
            )
        )
        self._decision_refs[request.step] = ref
        return ref

    @property
    def abandoned(self) -> bool:
        return bool(self._abandoned)

    async def journal_abandoned(self) -> list[tuple[int, str, str]]:
        """Close the evidence of a request the saga stopped waiting for (cancelled): every
        AWAITING_APPROVAL gets its REJECTED. Returns (step, actor, error) of each."""
        closed: list[tuple[int, str, str]] = []
        for step, (request, failure) in sorted(self._abandoned.items()):
            actor = CANCELLED_ACTOR if failure is None else FAILED_ACTOR
            error = (
                "the saga was cancelled while awaiting approval"
                if failure is None
                else f"the saga failed while awaiting approval ({failure}); nothing ran"
            )
            await self._journal_rejection(request, actor, error)
            closed.append((step, actor, error))
        self._abandoned.clear()
        return closed

    def release(self) -> None:
        """The saga is about to close or continue as new: decisions waiting for a step
        not reached are judged now (and refused, journaled, as nothing is pending)."""
        self._released = True

    @property
    def settled(self) -> bool:
        """No decision is waiting for a step or journaling its judgement after waiting."""
        return self._deferred == 0 and self._judging == 0

    def close(self) -> None:
        self._closed = True

    @property
    def decided_steps(self) -> set[int]:
        return self._decided_steps

    @property
    def refusals(self) -> dict[int, int]:
        return self._refusals

    def restore(
        self,
        decided_steps: list[int],
        refusals: dict[int, int],
        registry_seen: RegistryMark | None = None,
    ) -> None:
        """State carried across continue-as-new (so late decisions stay refused, refusal
        attempt numbers stay unique, and a registry older than one seen stays refused)."""
        self._decided_steps = set(decided_steps)
        self._refusals = dict(refusals)
        self._registry_seen = registry_seen

    @property
    def registry_seen(self) -> RegistryMark | None:
        """The newest approver registry this saga has seen (handed over on continue-as-new)."""
        return self._registry_seen

    def pending_view(self) -> PendingApproval | None:
        req = self._pending
        if req is None:
            return None
        return PendingApproval(
            saga_id=req.saga_id,
            step=req.step,
            tool=req.tool,
            payload=req.payload,
            canonical_payload=canonical_text(approval_payload(req.tool, req.payload)),
            payload_sha256=req.payload_sha256,
            requested_at=req.requested_at,
            deadline=req.deadline,
            **self._policy_view(),
        )
