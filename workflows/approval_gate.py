"""The approval gate of a saga: one pending request, decisions judged against it.

Every decision — by signal or by update — goes through the pure judge in
sagacity.approvals, so both doors refuse the same things for the same reasons. Refusals
are journaled (they are evidence) and leave the request pending. The `decide` update is
accepted whatever it carries and refused by its handler after the refusal is journaled:
a validator's rejection leaves no history, so a refusal through a raw update would leave
no evidence. Only once the saga is closing does the validator reject (nothing is
journaled then, and late updates should not grow the history).

While a request waits for its decision, every decision is judged against it at once.
While the saga works (no request waiting), a decision naming a step it has not reached
yet waits for that step: after a worker is lost, the journal can already show a request
(AWAITING_APPROVAL was written) that the replaying workflow has not re-reached, and a
human who answers it must not be refused for being early. It is judged once a request
waits, or refused once the saga is past that step, continues as new or closes. At most
DEFERRED_LIMIT decisions wait at once; more are judged at once.

Refusals are bounded: up to REFUSALS_JOURNALED_PER_STEP for the step that is pending,
and REFUSALS_JOURNALED_ELSEWHERE shared by every decision about anything else (junk that
names a thousand made-up steps fills one small bucket, not a thousand). Beyond the caps
refusals are counted in the close entry, not journaled one by one.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from sagacity.activities.io_models import EntryRef, JournalEventInput, ToolOutcome
    from sagacity.approvals import (
        ApprovalDecision,
        ApprovalRequest,
        Refusal,
        approval_payload,
        judge,
        parse_decision,
    )
    from sagacity.bounds import check_value, utf8_len
    from sagacity.canonical import canonical_text, sha256_hex
    from sagacity.entry import check_name
    from sagacity.errors import SagacityError
    from sagacity.phases import Phase
    from sagacity.workflows.models import DecisionResult, PendingApproval

Journal = Callable[[JournalEventInput], Awaitable[EntryRef]]
TIMEOUT_ACTOR = "sagacity:timeout"
CANCELLED_ACTOR = "sagacity:cancelled"
FAILED_ACTOR = "sagacity:failed"
"""Actor of the REJECTED that closes a request the saga stopped waiting for because of a
failure (the journal could not record the decision), not a cancellation."""
REFUSALS_JOURNALED_PER_STEP = 100
"""Refused decisions journaled for the pending step; beyond it they are counted, not
journaled, so a flood of junk signals cannot grow the journal and history without bound."""
REFUSALS_JOURNALED_ELSEWHERE = 20
"""Refused decisions journaled, all together, that name no pending step."""
ELSEWHERE = 0
"""Key (and journal step) of refusals that are not about the pending step."""
DEFERRED_LIMIT = 32
"""Decisions about a step not reached yet that may wait for it at once (each waiting
decision is a coroutine the workflow keeps; junk naming future steps cannot pile up)."""
MESSAGE_LIMIT = 2_000
"""Characters of a refusal's sentence (journaled as its error, returned to the sender)."""
EVIDENCE_LIMIT = 4_096
"""Bytes (UTF-8) of a refused decision kept whole as evidence; larger ones are kept as a
prefix, their size and their hash."""


@dataclass(frozen=True)
class GateDecision:
    approve: bool
    actor: str | None
    reason: str
    entry: EntryRef


class ApprovalGate:
    def __init__(
        self,
        saga_id: str,
        allowed: frozenset[str] | None,
        journal: Journal,
        reached: Callable[[], int],
    ) -> None:
        self._saga_id = saga_id
        self._reached = reached  # the step the saga is at (the last one it started)
        self._deferred = 0
        self._released = False
        self._allowed = allowed
        self._journal = journal
        self._pending: ApprovalRequest | None = None
        self._decision: ApprovalDecision | None = None
        self._decided_steps: set[int] = set()
        self._decision_refs: dict[int, EntryRef] = {}
        self._refusals: dict[int, int] = {}
        self._abandoned: dict[int, tuple[ApprovalRequest, str | None]] = {}
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
            step = outcome.step
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: self._decision is not None and self._decision.step == step,
                    timeout=timeout,
                )
            decision, self._decision, self._pending = self._decision, None, None
            self._decided_steps.add(outcome.step)
            return await self._journal_decision(request, decision, timeout)
        except BaseException as exc:
            # Cancelled (or the journal failed) while waiting or journaling the decision:
            # nothing stays pending, late decisions are refused, a waiting update returns.
            self._pending, self._decision = None, None
            self._decided_steps.add(outcome.step)
            if outcome.step not in self._decision_refs:
                failure = None if is_cancelled_exception(exc) else f"{type(exc).__name__}"
                self._abandoned[outcome.step] = (request, failure)
            raise

    async def _journal_decision(
        self, request: ApprovalRequest, decision: ApprovalDecision | None, timeout: timedelta
    ) -> GateDecision:
        if decision is None:
            reason = f"approval timed out after {timeout.total_seconds():g}s"
            ref = await self._journal_rejection(request, TIMEOUT_ACTOR, reason)
            return GateDecision(False, TIMEOUT_ACTOR, reason, ref)
        digest = {"payload_sha256": request.payload_sha256}
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
        return self._deferred == 0

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

    def _caught_up(self, step: int) -> bool:
        pending = self._pending
        return (
            self._released
            or self._closed
            or self._reached() > step
            or step in self._decided_steps
            or (pending is not None and (pending.step >= step or self._decision is None))
        )

    @contextlib.asynccontextmanager
    async def _in_turn(self, raw: Any) -> AsyncIterator[None]:
        """Wait (bounded) until the saga has reached the step the decision names, then
        let the caller judge and journal it; `settled` stays False until it has."""
        step = _field(raw, "step", int)
        if step is None or self._caught_up(step) or self._deferred >= DEFERRED_LIMIT:
            yield
            return
        self._deferred += 1
        try:
            await workflow.wait_condition(lambda: self._caught_up(step))
            yield
        finally:
            self._deferred -= 1

    async def on_signal(self, raw: Any, *, approve: bool) -> None:
        async with self._in_turn(raw):
            judged = self._judge(raw, approve)
            if isinstance(judged, Refusal):
                await self._journal_refusal(raw, judged)
            else:
                self._decision = judged

    async def on_refusal_record(self, raw: Any) -> None:
        """A decision the update validator refused, re-sent so it is journaled as evidence.
        It never decides: if it would be accepted now, it is ignored."""
        async with self._in_turn(raw):
            judged = self._judge(raw, None)
            if isinstance(judged, Refusal):
                await self._journal_refusal(raw, judged)

    def validate(self, raw: Any) -> None:
        """Reject only once the saga is closing: every other refusal is journaled by the
        handler (a rejected update leaves no history, hence no evidence)."""
        if self._closed:
            judged = self._judge(raw, None)
            assert isinstance(judged, Refusal)  # nothing is pending once closed
            raise ApplicationError(_message(judged), judged.reason.value, type="ApprovalRefused")

    async def on_update(self, raw: Any) -> DecisionResult:
        async with self._in_turn(raw):
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
        claimed = _field(raw, "step", int)
        pending = self._pending
        if pending is not None and claimed == pending.step:
            step, cap = pending.step, REFUSALS_JOURNALED_PER_STEP
        else:  # about no pending step: one small shared bucket, whatever step it names
            step, cap = ELSEWHERE, REFUSALS_JOURNALED_ELSEWHERE
        self._refusals[step] = count = self._refusals.get(step, 0) + 1
        if count > cap:
            workflow.logger.warning("refused decision %d (bucket %d) not journaled", count, step)
            return
        note = (
            f" (refusal {count}: later ones like it are counted, not journaled)"
            if count == cap
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
                    tool=pending.tool if pending is not None and step == pending.step else "",
                    input=_bounded(raw),
                    actor=actor,
                    error=_message(refusal) + note,
                )
            )
        except (ActivityError, ApplicationError) as exc:  # a local activity raises either
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
    """The refusal as a sentence, cut to a bound: its detail can quote the sender's
    values (a 200 KB `approve` field), and the raw body is already kept, bounded."""
    text = f"{refusal.reason.value}: {refusal.detail}"
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 1] + "…"


def _field(raw: Any, name: str, kind: type) -> Any:
    value = raw.get(name) if isinstance(raw, dict) else None
    return value if isinstance(value, kind) and not isinstance(value, bool) else None


def _bounded(raw: Any) -> Any:
    """The decision as evidence, bounded: huge bodies are kept as a prefix and a hash."""
    try:
        check_value(raw, "the decision")
        text = canonical_text(raw)
    except SagacityError:
        text = repr(raw)[: EVIDENCE_LIMIT * 4]
        return {"unrepresentable": _prefix(text), "bytes": utf8_len(text)}
    data = text.encode("utf-8")
    if len(data) <= EVIDENCE_LIMIT:
        return raw
    return {"prefix": _prefix(text), "bytes": len(data), "sha256": sha256_hex(data)}


def _prefix(text: str) -> str:
    """The longest prefix of `text` within EVIDENCE_LIMIT bytes of UTF-8."""
    return text.encode("utf-8", "surrogatepass")[:EVIDENCE_LIMIT].decode("utf-8", "ignore")
