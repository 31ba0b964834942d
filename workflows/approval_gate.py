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

Bound decisions (every saga started since signed decisions; older histories replay with
the rules they were recorded under): each decision is judged with the worker's answer
about the key it names (a local activity, asked when the decision arrives, so a key
revoked a second ago no longer counts) and with the step's approval requirement (the
tool's policy, tightened by the saga). Each accepted approval is journaled APPROVED with
its statement and signature; the step runs once the quorum of distinct people is met. One
accepted rejection rejects.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from sagacity.activities.io_models import EntryRef, JournalEventInput, ToolOutcome
    from sagacity.approval_policy import ApprovalRequirement
    from sagacity.approvals import (
        ApprovalDecision,
        ApprovalRequest,
        JudgeContext,
        Refusal,
        RefusalReason,
        Verdict,
        approval_payload,
        judge,
        parse_decision,
    )
    from sagacity.canonical import canonical_text
    from sagacity.entry import check_name
    from sagacity.errors import SagacityError
    from sagacity.phases import Phase
    from sagacity.registry import KeyLookup
    from sagacity.registry_marks import RegistryMark, newer, older_than
    from sagacity.workflows.models import DecisionResult, PendingApproval

from sagacity.workflows.approval_evidence import bounded, cap_note, field, message
from sagacity.workflows.approval_votes import (
    TIMEOUT_ACTOR,
    Accepted,
    GateDecision,
    Journal,
    Vote,
    Voting,
)
from sagacity.workflows.patches import patched

Lookup = Callable[[str | None], Awaitable[KeyLookup]]
Ticket = tuple[int, int, int]
"""A refusal's bucket (its step, or ELSEWHERE), its number there, and the bucket's cap."""
BOUND_DECISIONS = "signed-decisions"
"""Patch id: sagas that judge decisions bound to saga and tool, signed where a registry
is configured, against an approval requirement (quorum, groups, requester)."""
PASSKEY_DECISIONS = "passkey-decisions"
"""Patch id: bound sagas that count decisions signed with a passkey (a WebAuthn assertion
over the decision statement). Sagas started before refuse them, as they did."""
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


class ApprovalGate(Voting):
    def __init__(
        self,
        saga_id: str,
        allowed: frozenset[str] | None,
        journal: Journal,
        reached: Callable[[], int],
        lookup: Lookup | None = None,
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
        self._bound: bool | None = None
        self._passkeys = False
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
        result: dict[str, Any] = {
            "payload_sha256": request.payload_sha256,
            "deadline": request.deadline.isoformat() if request.deadline else None,
        }
        bound = self.bound()
        if bound:
            self._requirement = self.requirement(outcome.approval)
            self._counted, self._votes, self._approvals_journaled = [], [], 0
            self._registry = await self._ask(None)
            self.rolled_back(self._registry)
            result["approval"] = self._requirement.model_dump(mode="json")
            result["registry"] = self._registry.registry_ref
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
            if bound:
                return await self._gather(request, timeout)
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
            self._pending, self._decision, self._votes = None, None, []
            self._decided_steps.add(outcome.step)
            if outcome.step not in self._decision_refs:
                failure = None if is_cancelled_exception(exc) else f"{type(exc).__name__}"
                self._abandoned[outcome.step] = (request, failure)
            raise

    def bound(self) -> bool:
        """Ask, once, whether this saga binds decisions (see BOUND_DECISIONS). Asked in a
        run's first activation, before any await (a patch asked after a local activity
        can read otherwise on replay); never from a validator (asking is a command)."""
        if self._bound is None:
            self._bound = self._lookup is not None and patched(BOUND_DECISIONS)
            self._passkeys = self._bound and patched(PASSKEY_DECISIONS)
        return self._bound

    def requirement(self, declared: ApprovalRequirement | None) -> ApprovalRequirement:
        """The tool's requirement for this call, tightened by the saga's options."""
        return (declared or ApprovalRequirement()).tightened(self._tightening)

    async def _ask(self, key_id: str | None) -> KeyLookup:
        assert self._lookup is not None
        return await self._lookup(key_id)

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

    # ---- decisions ---------------------------------------------------------------------------

    def _judge(
        self, raw: Any, approve: bool | None, lookup: KeyLookup | None = None
    ) -> ApprovalDecision | Refusal:
        """Pure: reads state, never changes it (the update validator calls it too)."""
        judged = self._verdict(raw, approve, lookup)
        return judged[0] if isinstance(judged, tuple) else judged

    def _verdict(
        self,
        raw: Any,
        approve: bool | None,
        lookup: KeyLookup | None,
        arrived: ApprovalRequest | None = None,
    ) -> tuple[ApprovalDecision, Verdict] | Refusal:
        parsed = parse_decision(raw, approve=approve, passkeys=self._passkeys)
        if isinstance(parsed, Refusal):
            return parsed
        already = parsed.step in self._decided_steps or (
            self._decision is not None and self._decision.step == parsed.step
        )
        context = None
        if self._bound:
            already = already or any(
                v.final and v.decision.step == parsed.step for v in self._votes
            )
            now = workflow.now()
            counted = [who for who, _ in self._live_counted(now)]
            counted += [v.approver for v in self._votes if v.decision.approve]
            context = JudgeContext(
                now=now,
                lookup=lookup,
                requirement=self._requirement,
                requester=self.requester,
                counted=frozenset(counted),
            )
        verdict = judge(
            None if self._closed else (self._pending or arrived),
            parsed,
            allowed_approvers=None if self._bound else self._allowed,
            already_decided=already,
            context=context,
        )
        if verdict.accepted:
            return parsed, verdict
        assert verdict.refusal is not None
        return verdict.refusal

    async def _judged(
        self, raw: Any, approve: bool | None
    ) -> tuple[Accepted | Refusal, Ticket | None]:
        """The verdict on `raw`; a signed decision in a bound saga asks the worker about its
        key first. An unsigned one needs no key: it is judged at once with the registry
        answer of the request (whether one is configured), as in sagas before signing.
        Before awaiting the key, a signed decision takes its refusal number (its place in
        the refusals' bucket): numbers follow arrival order, which replays the same, never
        the order local activities happen to finish in (a retried workflow task would
        journal the same refusal again under another number)."""
        lookup, ticket = None, None
        arrived = self._pending
        if self.bound() and isinstance(raw, dict):
            key_id = field(raw, "key_id", str)
            if key_id is None and field(raw, "signature", str) is None:
                lookup = self._registry or KeyLookup(configured=False)
            else:
                ticket = self._ticket(raw)
                try:
                    lookup = await self._ask(key_id if key_id and len(key_id) <= 64 else None)
                except (ActivityError, ApplicationError) as exc:  # never fail the saga's task
                    unusable = f"the worker could not answer about key {key_id}: {exc}"[:1_000]
                    return Refusal(reason=RefusalReason.UNKNOWN_KEY, detail=unusable), ticket
        # A request decided while the key was looked up is still the one this decision
        # arrived at: it is judged against it (refused as about another step, or as
        # already decided), not against "nothing pending".
        rolled_back = self.rolled_back(lookup) if ticket is not None else None
        if rolled_back is not None:
            return rolled_back, ticket
        judged = self._verdict(raw, approve, lookup, arrived)
        return (judged if isinstance(judged, Refusal) else (*judged, lookup)), ticket

    def _ticket(self, raw: Any) -> Ticket:
        """The bucket a refusal of `raw` counts in, its number there, and the bucket's cap."""
        claimed = field(raw, "step", int)
        pending = self._pending
        if pending is not None and claimed == pending.step:
            step, cap = pending.step, REFUSALS_JOURNALED_PER_STEP
        else:  # about no pending step: one small shared bucket, whatever step it names
            step, cap = ELSEWHERE, REFUSALS_JOURNALED_ELSEWHERE
        self._refusals[step] = count = self._refusals.get(step, 0) + 1
        return step, count, cap

    def rolled_back(self, lookup: KeyLookup | None) -> Refusal | None:
        """A registry answer older than one this saga has seen, or than the newest one its
        worker's journal records (sent with the answer), is refused: putting an old file
        back (and restarting the worker) must not undo a revocation. What the saga has
        seen is carried across continue-as-new (`registry_seen`)."""
        if lookup is None or not lookup.configured or lookup.version is None:
            return None
        seen = newer(self._registry_seen, lookup.journaled)
        if older_than(lookup.version, lookup.sha256, seen):
            assert seen is not None
            self._registry_seen = seen
            return Refusal(
                reason=RefusalReason.REGISTRY_ROLLED_BACK,
                detail=f"the worker judged with approver registry version {lookup.version}, "
                f"but this saga has seen {seen.describe()}; restore the newer registry",
            )
        answered = RegistryMark(version=lookup.version, sha256=lookup.sha256)
        self._registry_seen = newer(seen, answered)
        return None

    @property
    def registry_seen(self) -> RegistryMark | None:
        """The newest approver registry this saga has seen (handed over on continue-as-new)."""
        return self._registry_seen

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
        step = field(raw, "step", int)
        self._judging += 1
        try:
            if step is None or self._caught_up(step) or self._deferred >= DEFERRED_LIMIT:
                yield
                return
            self._deferred += 1
            try:
                await workflow.wait_condition(lambda: self._caught_up(step))
            finally:
                self._deferred -= 1
            yield
        finally:
            self._judging -= 1

    async def on_signal(self, raw: Any, *, approve: bool) -> None:
        async with self._in_turn(raw):
            judged, ticket = await self._judged(raw, approve)
            if isinstance(judged, Refusal):
                await self._journal_refusal(raw, judged, ticket)
            else:
                self._accept(*judged)

    async def on_refusal_record(self, raw: Any) -> None:
        """A decision the update validator refused, re-sent so it is journaled as evidence.
        It never decides: if it would be accepted now, it is ignored."""
        async with self._in_turn(raw):
            judged, ticket = await self._judged(raw, None)
            if isinstance(judged, Refusal):
                await self._journal_refusal(raw, judged, ticket)

    def validate(self, raw: Any) -> None:
        """Reject only once the saga is closing: every other refusal is journaled by the
        handler (a rejected update leaves no history, hence no evidence)."""
        if self._closed:
            judged = self._judge(raw, None)
            assert isinstance(judged, Refusal)  # nothing is pending once closed
            raise ApplicationError(message(judged), judged.reason.value, type="ApprovalRefused")

    async def on_update(self, raw: Any) -> DecisionResult:
        async with self._in_turn(raw):
            judged, ticket = await self._judged(raw, None)
            if isinstance(judged, Refusal):  # state changed since the validator ran
                await self._journal_refusal(raw, judged, ticket)
                raise ApplicationError(
                    message(judged), judged.reason.value, "journaled", type="ApprovalRefused"
                )
            decision, verdict, lookup = judged
            number = self._accept(decision, verdict, lookup)
        step = decision.step
        if number:
            await workflow.wait_condition(
                lambda: number in self._vote_refs or step in self._abandoned or self._closed
            )
            ref = self._vote_refs.get(number)
        else:
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
        extra: dict[str, Any] = {}
        if number:
            extra = {
                "approver": verdict.approver,
                "approvals": len(self._counted) if decision.approve else None,
                "quorum": self._requirement.quorum,
                "needs": None
                if step in self._decided_steps
                else self._requirement.needs(len(self._counted)),
            }
        return DecisionResult(
            accepted=True, step=step, approve=decision.approve, seq=ref.seq, hash=ref.hash, **extra
        )

    async def _journal_refusal(
        self, raw: Any, refusal: Refusal, ticket: Ticket | None = None
    ) -> None:
        if self._closed:
            workflow.logger.warning("decision after close refused, not journaled: %s", refusal)
            return
        step, count, cap = ticket or self._ticket(raw)
        pending = self._pending
        if count > cap:
            workflow.logger.warning("refused decision %d (bucket %d) not journaled", count, step)
            return
        note = cap_note(count, cap)
        # In a bound saga the name a refused decision claims is kept in its input only: a
        # refusal proves nobody's identity, so it is no actor.
        actor = None if self._bound else field(raw, "approver", str)
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
                    input=bounded(raw),
                    actor=actor,
                    error=message(refusal) + note,
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
            **self._policy_view(),
        )
