"""The approval gate of a saga: one pending request, decisions judged against it.

Every decision — by signal or by update — goes through the pure judge in
sagacity.approvals, so both doors refuse the same things for the same reasons. Refusals
are journaled (they are evidence) and leave the request pending. The update's validator
refuses a bad decision synchronously; since a rejected update leaves no history, the
client helper in worker.client re-sends a refused decision as a signal so the workflow
journals it too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.models import EntryRef, JournalEventInput, ToolOutcome
    from sagacity.approvals import (
        ApprovalDecision,
        ApprovalRequest,
        Refusal,
        approval_payload,
        judge,
        parse_decision,
    )
    from sagacity.canonical import canonical_text, sha256_hex
    from sagacity.entry import check_name
    from sagacity.errors import SagacityError
    from sagacity.phases import Phase
    from workflows.models import DecisionResult, PendingApproval

Journal = Callable[[JournalEventInput], Awaitable[EntryRef]]
TIMEOUT_ACTOR = "sagacity:timeout"
CANCELLED_ACTOR = "sagacity:cancelled"
REFUSALS_JOURNALED_PER_STEP = 100
"""Refused decisions journaled per step; beyond it they are counted, not journaled, so a
flood of junk signals cannot grow the journal and the history without bound."""
EVIDENCE_LIMIT = 4_096


@dataclass(frozen=True)
class GateDecision:
    approve: bool
    actor: str | None
    reason: str
    entry: EntryRef


class ApprovalGate:
    def __init__(self, saga_id: str, allowed: frozenset[str] | None, journal: Journal) -> None:
        self._saga_id = saga_id
        self._allowed = allowed
        self._journal = journal
        self._pending: ApprovalRequest | None = None
        self._decision: ApprovalDecision | None = None
        self._decided_steps: set[int] = set()
        self._decision_refs: dict[int, EntryRef] = {}
        self._refusals: dict[int, int] = {}
        self._abandoned: dict[int, ApprovalRequest] = {}
        self._closed = False

    async def wait(self, outcome: ToolOutcome, now: datetime, timeout: timedelta) -> GateDecision:
        """Journal AWAITING_APPROVAL, wait for an accepted decision or the timeout, and
        journal APPROVED or REJECTED."""
        args = outcome.args or {}
        request = ApprovalRequest.for_call(
            self._saga_id,
            outcome.step,
            outcome.tool,
            args,
            requested_at=now,
            deadline=now + timeout,
        )
        if request.payload_sha256 != outcome.payload_sha256:
            raise ApplicationError(
                f"worker and workflow disagree on the payload hash of step {outcome.step}; "
                "refusing to ask for approval",
                type="PayloadHashDisagreement",
                non_retryable=True,
            )
        await self._journal(
            JournalEventInput(
                saga_id=self._saga_id,
                phase=Phase.AWAITING_APPROVAL,
                step=outcome.step,
                tool=outcome.tool,
                input=approval_payload(outcome.tool, args),
                result={
                    "payload_sha256": request.payload_sha256,
                    "deadline": request.deadline.isoformat() if request.deadline else None,
                },
            )
        )
        self._pending = request
        try:
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(lambda: self._decision is not None, timeout=timeout)
            decision, self._decision, self._pending = self._decision, None, None
            self._decided_steps.add(outcome.step)
            return await self._journal_decision(request, decision, timeout)
        except BaseException:
            # Cancelled (or the journal failed) while waiting or journaling the decision:
            # nothing stays pending, late decisions are refused, a waiting update returns.
            self._pending, self._decision = None, None
            self._decided_steps.add(outcome.step)
            if outcome.step not in self._decision_refs:
                self._abandoned[outcome.step] = request
            raise

    async def _journal_decision(
        self, request: ApprovalRequest, decision: ApprovalDecision | None, timeout: timedelta
    ) -> GateDecision:
        digest = {"payload_sha256": request.payload_sha256}
        if decision is None:
            reason = f"approval timed out after {timeout.total_seconds():g}s"
            ref = await self._journal(
                JournalEventInput(
                    saga_id=self._saga_id,
                    phase=Phase.REJECTED,
                    step=request.step,
                    tool=request.tool,
                    actor=TIMEOUT_ACTOR,
                    result=digest,
                    error=reason,
                )
            )
            self._decision_refs[request.step] = ref
            return GateDecision(False, TIMEOUT_ACTOR, reason, ref)
        ref = await self._journal(
            JournalEventInput(
                saga_id=self._saga_id,
                phase=Phase.APPROVED if decision.approve else Phase.REJECTED,
                step=request.step,
                tool=request.tool,
                actor=decision.approver,
                result={**digest, "reason": decision.reason},
            )
        )
        self._decision_refs[request.step] = ref
        return GateDecision(decision.approve, decision.approver, decision.reason or "rejected", ref)

    @property
    def abandoned(self) -> bool:
        return bool(self._abandoned)

    async def journal_abandoned(self) -> None:
        """Close the evidence of a request the saga stopped waiting for (cancelled): every
        AWAITING_APPROVAL gets its REJECTED."""
        for step, request in sorted(self._abandoned.items()):
            self._decision_refs[step] = await self._journal(
                JournalEventInput(
                    saga_id=self._saga_id,
                    phase=Phase.REJECTED,
                    step=step,
                    tool=request.tool,
                    actor=CANCELLED_ACTOR,
                    result={"payload_sha256": request.payload_sha256},
                    error="the saga was cancelled while awaiting approval",
                )
            )
        self._abandoned.clear()

    def close(self) -> None:
        self._closed = True

    @property
    def decided_steps(self) -> set[int]:
        return self._decided_steps

    @property
    def refusals(self) -> dict[int, int]:
        return self._refusals

    def restore(self, decided_steps: list[int], refusals: dict[int, int]) -> None:
        """State carried across continue-as-new (so late decisions stay refused and
        refusal attempt numbers stay unique)."""
        self._decided_steps = set(decided_steps)
        self._refusals = dict(refusals)

    # ---- decisions ---------------------------------------------------------------------------

    def _judge(self, raw: Any, approve: bool | None) -> ApprovalDecision | Refusal:
        """Pure: reads state, never changes it (the update validator calls it too)."""
        parsed = parse_decision(raw, approve=approve)
        if isinstance(parsed, Refusal):
            return parsed
        already = parsed.step in self._decided_steps or (
            self._decision is not None and self._decision.step == parsed.step
        )
        verdict = judge(
            None if self._closed else self._pending,
            parsed,
            allowed_approvers=self._allowed,
            already_decided=already,
        )
        if verdict.accepted:
            return parsed
        assert verdict.refusal is not None
        return verdict.refusal

    async def on_signal(self, raw: Any, *, approve: bool) -> None:
        judged = self._judge(raw, approve)
        if isinstance(judged, Refusal):
            await self._journal_refusal(raw, judged)
        else:
            self._decision = judged

    async def on_refusal_record(self, raw: Any) -> None:
        """A decision the update validator refused, re-sent so it is journaled as evidence.
        It never decides: if it would be accepted now, it is ignored."""
        judged = self._judge(raw, None)
        if isinstance(judged, Refusal):
            await self._journal_refusal(raw, judged)

    def validate(self, raw: Any) -> None:
        judged = self._judge(raw, None)
        if isinstance(judged, Refusal):
            raise ApplicationError(_message(judged), judged.reason.value, type="ApprovalRefused")

    async def on_update(self, raw: Any) -> DecisionResult:
        judged = self._judge(raw, None)
        if isinstance(judged, Refusal):  # state changed since the validator ran
            await self._journal_refusal(raw, judged)
            raise ApplicationError(
                _message(judged), judged.reason.value, "journaled", type="ApprovalRefused"
            )
        self._decision = judged
        step = judged.step
        await workflow.wait_condition(
            lambda: step in self._decision_refs or step in self._abandoned or self._closed
        )
        ref = self._decision_refs.get(step)
        if ref is None:
            raise ApplicationError(
                "the saga stopped waiting for this approval (cancelled) before the decision "
                "took effect; nothing ran",
                "ABANDONED",
                type="ApprovalRefused",
            )
        return DecisionResult(
            accepted=True, step=step, approve=judged.approve, seq=ref.seq, hash=ref.hash
        )

    async def _journal_refusal(self, raw: Any, refusal: Refusal) -> None:
        if self._closed:
            workflow.logger.warning("decision after close refused, not journaled: %s", refusal)
            return
        step = _field(raw, "step", int)
        if step is None or step < 0 or step > 1_000_000_000:
            step = self._pending.step if self._pending else 0
        self._refusals[step] = count = self._refusals.get(step, 0) + 1
        if count > REFUSALS_JOURNALED_PER_STEP:
            workflow.logger.warning("refused decision %d for step %d not journaled", count, step)
            return
        note = (
            f" (refusal {count}: later refusals for this step are counted, not journaled)"
            if count == REFUSALS_JOURNALED_PER_STEP
            else ""
        )
        actor = _field(raw, "approver", str)
        try:
            if actor is not None:
                check_name(actor, "approver")
        except SagacityError:
            actor = None
        try:
            await self._journal(
                JournalEventInput(
                    saga_id=self._saga_id,
                    phase=Phase.APPROVAL_REFUSED,
                    step=step,
                    attempt=count,
                    tool=self._pending.tool if self._pending and self._pending.step == step else "",
                    input=_bounded(raw),
                    actor=actor,
                    error=_message(refusal) + note,
                )
            )
        except ActivityError as exc:
            workflow.logger.warning("could not journal a refused decision: %s", exc)

    def pending_view(self) -> PendingApproval | None:
        req = self._pending
        if req is None or self._decision is not None:
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
        )


def _message(refusal: Refusal) -> str:
    return f"{refusal.reason.value}: {refusal.detail}"


def _field(raw: Any, name: str, kind: type) -> Any:
    value = raw.get(name) if isinstance(raw, dict) else None
    return value if isinstance(value, kind) and not isinstance(value, bool) else None


def _bounded(raw: Any) -> Any:
    """The decision as evidence, bounded: huge bodies are kept as a prefix and a hash."""
    try:
        text = canonical_text(raw)
    except SagacityError:
        text = repr(raw)
        return {"unrepresentable": text[:EVIDENCE_LIMIT], "bytes": len(text)}
    if len(text) <= EVIDENCE_LIMIT:
        return raw
    return {
        "prefix": text[:EVIDENCE_LIMIT],
        "bytes": len(text),
        "sha256": sha256_hex(text.encode()),
    }
