"""AgentSagaWorkflow: an agent's tool calls as a durable, journaled, approvable saga.

The loop asks the model (or walks a plan), runs each tool call as a journaled activity
one at a time, waits durably for a human on irreversible tools, and on failure,
rejection, approval timeout or cancellation compensates executed steps in reverse
order — exactly once, even if a second cancel arrives while compensating. A long saga
continues as new, carrying its state, its pending compensations and its chain head.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from activities import (
        CHECK_PLAN,
        JOURNAL_EVENT,
        NEXT_TURN,
        RUN_TOOL,
        WORKER_IDENTITY,
        WRONG_WORKER,
        activity_queue,
    )
    from activities.models import (
        ChatMessage,
        CheckPlanInput,
        EntryRef,
        JournalEventInput,
        ModelTurn,
        ModelTurnInput,
        OutcomeKind,
        PlanCheck,
        RunToolInput,
        ToolCall,
        ToolOutcome,
    )
    from sagacity.errors import SagacityError
    from sagacity.phases import Phase, SagaStatus
    from sagacity.tools import ToolKind
    from workflows.models import (
        CompensationReport,
        DecisionResult,
        PendingApproval,
        SagaCarry,
        SagaResult,
        SagaRunInput,
        SagaView,
        StepReport,
    )

# Workflow logic modules. The worker passes the `workflows` package through the sandbox
# (worker.app.PASSTHROUGH, measured cheaper): the replay tests are what catch
# nondeterministic edits in them.
from workflows.approval_gate import ApprovalGate
from workflows.compensator import (
    LOCAL_FAILURES,
    LOCAL_OPTIONS,
    compensate,
    failure_cause,
    failure_type,
)
from workflows.conversation import bound_messages, tool_message
from workflows.inspection import SAGA_NEEDS_HUMAN, SAGA_STATUS, call_summary, steps_markdown
from workflows.reporting import fit_carry, fit_result, step_report
from workflows.start_input import decode_run_input

T = TypeVar("T")


class _ContinueAsNew(Exception):
    """Internal signal: this run has done enough steps; hand over to a new run."""


@workflow.defn(name="AgentSaga")
class AgentSagaWorkflow:
    @workflow.init
    def __init__(self, raw: RawValue) -> None:
        # The input is taken raw and decoded here, so an input that cannot be decoded or
        # breaks the bounds fails this saga at once instead of every workflow task.
        self._refused_input: str | None = None
        continued = workflow.info().continued_run_id is not None
        # Sagas started before the stricter start door replay with the checks they passed.
        strict = not continued and workflow.patched("strict-start-door")
        try:
            inp = decode_run_input(raw, continued=continued, strict=strict)
        except SagacityError as exc:
            self._refused_input = f"{type(exc).__name__}: {exc}"
            inp = SagaRunInput()
        self._inp = inp
        self._saga_id = workflow.info().workflow_id
        self._worker: str | None = None
        self._plan_refused = False
        self._check_whole_plan = False  # patches: asked at the top of run()
        self._journal_abandoned = False
        self._status = SagaStatus.RUNNING
        self._steps: dict[int, StepReport] = {}
        self._outcomes: dict[int, ToolOutcome] = {}
        self._compensations: list[CompensationReport] = []
        self._messages: list[ChatMessage] = []
        self._failure: str | None = None
        self._final_answer: str | None = None
        self._next_step = 0
        self._plan_index = 0
        self._model_turns = 0
        self._invalid_in_a_row = 0
        self._compensation_started = False
        self._head: EntryRef | None = None
        self._published: tuple[str, bool] | None = None
        self._gate = ApprovalGate(
            self._saga_id,
            frozenset(inp.approvers) if inp.approvers is not None else None,
            self._journal,
            reached=lambda: self._next_step,
        )
        carry = inp.carry
        if carry is not None:
            self._next_step = carry.next_step
            self._plan_index = carry.plan_index
            self._model_turns = carry.model_turns
            self._invalid_in_a_row = carry.invalid_in_a_row
            self._messages = list(carry.messages)
            self._steps = {s.step: s for s in carry.steps}
            self._outcomes = {o.step: o for o in carry.outcomes}
            self._gate.restore(carry.decided_steps, carry.refusals)
            self._head = carry.head
            self._worker = carry.worker
        self._run_start_step = self._next_step

    # ---- run -----------------------------------------------------------------------------

    @workflow.run
    async def run(self, raw: RawValue) -> SagaResult:
        if self._refused_input is not None:
            raise ApplicationError(
                f"saga input refused, nothing started: {self._refused_input}",
                type="SagaInputRefused",
                non_retryable=True,
            )
        inp = self._inp
        self._publish()
        # Every patch is asked here, in the first activation, before any await: on replay
        # core only knows of a patch marker once it has reached the workflow task that
        # holds it, so a patch asked after a local activity can read False on replay
        # although the original run recorded it (a NondeterminismError). Patches that
        # older histories recorded later are asked again in their old place, under their
        # old ids, when the at-start id is absent (so those histories replay as they ran).
        pin_worker = workflow.patched("pin-worker-identity")  # where it always was
        self._check_whole_plan = workflow.patched("check-whole-plan-at-start")
        self._journal_abandoned = workflow.patched("journal-abandoned-approval-at-start")
        if inp.carry is None:
            if pin_worker:
                self._worker = await workflow.execute_local_activity(
                    WORKER_IDENTITY, result_type=str, **LOCAL_OPTIONS
                )
            opened = inp.model_dump(mode="json", exclude={"model": {"script"}, "carry": True})
            if self._worker is not None:
                opened["worker"] = self._worker
            await self._journal(
                JournalEventInput(
                    saga_id=self._saga_id,
                    phase=Phase.SAGA_OPENED,
                    input={"run_id": workflow.info().run_id, **opened},
                )
            )
        cancelled: BaseException | None = None
        try:
            try:
                await self._drive()
            except _ContinueAsNew:
                self._gate.release()
                await workflow.wait_condition(workflow.all_handlers_finished)
                next_input = fit_carry(inp, self._carry())
                if next_input is None:
                    self._fail("the saga's state is too large to continue as new")
                else:
                    workflow.continue_as_new(next_input)
        except BaseException as exc:
            if not (
                is_cancelled_exception(exc) or isinstance(exc, ActivityError | ApplicationError)
            ):
                raise  # continue-as-new, or a bug in this workflow: let it out
            if is_cancelled_exception(exc):
                cancelled = exc
                self._fail("saga cancelled")
            else:
                self._fail(f"{type(exc).__name__}: {failure_cause(exc)}")
        result = await self._shielded(self._finish())
        if cancelled is not None:
            raise cancelled
        return result

    async def _finish(self) -> SagaResult:
        """Compensate (if the saga failed) and close: one unit that cancels cannot split."""
        # Histories recorded before the patch was asked at the start carry the older
        # patch, recorded here; asking it here only when the new one is absent keeps them
        # replaying (histories older still have neither, and replay as before).
        if self._gate.abandoned and (
            self._journal_abandoned or workflow.patched("journal-abandoned-approval")
        ):
            await self._gate.journal_abandoned()
        if self._failure is not None:
            await self._compensate()
            self._mark_not_compensable()
        return await self._close()

    @staticmethod
    async def _shielded(work: Awaitable[T]) -> T:
        """Run `work` to the end even if cancels keep arriving (a bare
        shield abandons the work on a second cancel; looping does not)."""
        task = asyncio.ensure_future(work)
        while not task.done():
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                continue
        return task.result()

    async def _drive(self) -> None:
        first_run = self._inp.carry is None
        if (
            self._inp.plan is not None
            and first_run
            and (self._check_whole_plan or workflow.patched("check-whole-plan"))
            and await self._plan_problems()
        ):
            return
        if self._inp.plan is None:
            await self._agent_loop()
            return
        while self._plan_index < len(self._inp.plan):
            call = self._inp.plan[self._plan_index]
            self._plan_index += 1
            if not self._within_step_limit():
                return
            outcome = await self._call(call)
            if outcome.kind is OutcomeKind.REFUSED:
                self._fail(f"plan step {outcome.step} refused: {outcome.error}")
            if self._failure is not None:
                return
            self._maybe_continue_as_new()

    async def _plan_problems(self) -> bool:
        """Check the whole plan before its first step: a typo in step 2 must not run step
        1 and then undo it. True (and the saga failed as REFUSED) when it has problems."""
        plan = self._inp.plan or []
        # A local activity: checking needs the toolbox, not I/O, so it costs no round trip.
        check: PlanCheck = await self._local_on_pinned_worker(
            CHECK_PLAN,
            CheckPlanInput(
                saga_id=self._saga_id,
                plan=plan,
                allowed_tools=self._inp.allowed_tools,
                worker=self._worker,
            ),
            result_type=PlanCheck,
        )
        if not check.problems:
            return False
        self._plan_refused = True
        listed = "; ".join(f"step {p.index + 1} ({p.tool}): {p.error}" for p in check.problems[:5])
        self._fail(f"plan refused before any step ran, nothing was done: {listed}")
        return True

    async def _agent_loop(self) -> None:
        if not self._messages:  # a new saga (or one that only moved to its pinned queue)
            if self._inp.system_prompt:
                self._messages.append(ChatMessage(role="system", content=self._inp.system_prompt))
            self._messages.append(ChatMessage(role="user", content=self._inp.goal or ""))
        while True:
            self._messages = bound_messages(self._messages, self._inp.max_conversation_chars)
            turn: ModelTurn = await self._on_pinned_worker(
                NEXT_TURN,
                ModelTurnInput(
                    saga_id=self._saga_id,
                    settings=self._inp.model,
                    messages=self._messages,
                    allowed_tools=self._inp.allowed_tools,
                    turn=self._model_turns,
                    worker=self._worker,
                ),
                result_type=ModelTurn,
                start_to_close_timeout=timedelta(minutes=5),
                retry_policy=RetryPolicy(
                    maximum_attempts=5,
                    non_retryable_error_types=["ModelRequestError", "SagaConfigError"],
                ),
                summary="ask the model",
            )
            self._model_turns += 1
            self._messages.append(
                ChatMessage(role="assistant", content=turn.final, tool_calls=turn.tool_calls)
            )
            if not turn.tool_calls:
                self._final_answer = turn.final
                return
            for call in turn.tool_calls:
                if not self._within_step_limit():
                    return
                outcome = await self._call(call)
                self._messages.append(tool_message(call, outcome))
                if self._failure is not None:
                    return  # the saga is failed; whatever the model says next is moot
                if outcome.kind is not OutcomeKind.REFUSED:
                    self._invalid_in_a_row = 0
                    continue
                self._invalid_in_a_row += 1
                if self._invalid_in_a_row >= self._inp.max_invalid_calls:
                    self._fail(
                        f"{self._invalid_in_a_row} invalid tool calls in a row; "
                        f"last: {outcome.error}"
                    )
                    return
            self._maybe_continue_as_new()

    def _within_step_limit(self) -> bool:
        if self._next_step < self._inp.max_steps:
            return True
        self._fail(f"step limit of {self._inp.max_steps} reached")
        return False

    def _maybe_continue_as_new(self) -> None:
        done_here = self._next_step - self._run_start_step
        if (
            done_here >= self._inp.continue_as_new_after_steps
            or workflow.info().is_continue_as_new_suggested()
        ):
            raise _ContinueAsNew()

    def _carry(self) -> SagaCarry:
        return SagaCarry(
            next_step=self._next_step,
            plan_index=self._plan_index,
            model_turns=self._model_turns,
            invalid_in_a_row=self._invalid_in_a_row,
            messages=self._messages,
            steps=list(self._steps.values()),
            outcomes=[
                o.model_copy(update={"result": None, "args": None})
                for o in self._outcomes.values()
                if o.kind in (OutcomeKind.EXECUTED, OutcomeKind.UNKNOWN)
            ],
            decided_steps=sorted(self._gate.decided_steps),
            refusals=dict(self._gate.refusals),
            head=self._head,
            worker=self._worker,
        )

    # ---- one tool call ---------------------------------------------------------------------

    async def _call(self, call: ToolCall) -> ToolOutcome:
        self._next_step += 1
        step = self._next_step
        outcome = await self._run_tool(step, call, None)
        if outcome.kind is OutcomeKind.NEEDS_APPROVAL:
            self._record(outcome, status="AWAITING_APPROVAL")
            self._set_status(SagaStatus.AWAITING_APPROVAL)
            decision = await self._gate.wait(
                outcome, workflow.now(), timedelta(seconds=self._inp.approval_timeout_seconds)
            )
            if not decision.approve:
                self._record(
                    outcome, status="REJECTED", approver=decision.actor, error=decision.reason
                )
                self._fail(f"step {step} ({outcome.tool}) rejected: {decision.reason}")
                return outcome
            self._set_status(SagaStatus.RUNNING)
            outcome = await self._run_tool(step, call, outcome.payload_sha256)
            self._record(outcome, approver=decision.actor)
            if outcome.kind is OutcomeKind.REFUSED:
                self._fail(f"step {step} ({outcome.tool}) refused after approval: {outcome.error}")
        else:
            self._record(outcome)
        if outcome.result_unjournalable:
            self._fail(f"step {step} ({outcome.tool}) ran, but {outcome.error}")
        if outcome.kind in (OutcomeKind.FAILED, OutcomeKind.UNKNOWN, OutcomeKind.FENCED):
            self._fail(
                f"step {step} ({outcome.tool}) {outcome.kind.value.lower()}: {outcome.error}"
            )
        return outcome

    async def _run_tool(self, step: int, call: ToolCall, approved: str | None) -> ToolOutcome:
        inp = self._inp
        try:
            outcome: ToolOutcome = await self._on_pinned_worker(
                RUN_TOOL,
                RunToolInput(
                    saga_id=self._saga_id,
                    step=step,
                    call=call,
                    allowed_tools=inp.allowed_tools,
                    approved_sha256=approved,
                    model_result_limit=inp.model_result_limit,
                    worker=self._worker,
                ),
                result_type=ToolOutcome,
                start_to_close_timeout=timedelta(seconds=inp.tool_timeout_seconds),
                heartbeat_timeout=timedelta(seconds=inp.tool_heartbeat_timeout_seconds),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=1),
                    maximum_interval=timedelta(seconds=30),
                    maximum_attempts=inp.tool_attempts,
                ),
                summary=call_summary(call.tool, call.args),
            )
            return outcome
        except ActivityError as exc:
            unknown = ToolOutcome(kind=OutcomeKind.UNKNOWN, tool=call.tool, step=step)
            if is_cancelled_exception(exc):
                # Interrupted mid-call: the tool may or may not have applied its effect.
                self._record(unknown.model_copy(update={"error": "cancelled during the call"}))
                raise
            # No outcome came back: whatever the tool did is unknown.
            cause = failure_cause(exc)[:2_000]
            retryable = not (isinstance(exc.cause, ApplicationError) and exc.cause.non_retryable)
            how = f"after {inp.tool_attempts} attempts" if retryable else "(not retryable)"
            return unknown.model_copy(update={"error": f"no outcome {how}: {cause}"})

    # ---- compensation ----------------------------------------------------------------------

    async def _compensate(self) -> None:
        if self._compensation_started:
            return
        self._compensation_started = True
        self._set_status(SagaStatus.COMPENSATING)
        await compensate(
            self._saga_id,
            self._inp,
            self._outcomes.values(),
            self._journal,
            self._on_compensated,
            worker=self._worker,
            task_queue=self._pinned_queue(),
        )

    def _on_compensated(self, report: CompensationReport) -> None:
        self._compensations.append(report)
        status = "COMPENSATED" if report.ok else "COMPENSATION_FAILED"
        self._steps[report.step] = self._steps[report.step].model_copy(
            update={"status": status, "seq": report.seq, "hash": report.hash}
        )
        self._publish()

    def _mark_not_compensable(self) -> None:
        """Steps that ran and that nothing can undo stay live after compensation: say so."""
        for step, report in list(self._steps.items()):
            if report.status == "EXECUTED" and report.tool_kind != ToolKind.COMPENSABLE.value:
                self._steps[step] = report.model_copy(update={"status": "NOT_COMPENSABLE"})

    # ---- close -----------------------------------------------------------------------------

    async def _close(self) -> SagaResult:
        if self._failure is None:
            final = SagaStatus.COMPLETED
        elif self._plan_refused and not self._outcomes:
            final = SagaStatus.REFUSED
        elif any(not c.ok for c in self._compensations):
            final = SagaStatus.COMPENSATION_FAILED
        else:
            final = SagaStatus.COMPENSATED
        self._status = final
        unknown = sorted(s for s, o in self._outcomes.items() if o.kind is OutcomeKind.UNKNOWN)
        needs_human = bool(unknown) or final is SagaStatus.COMPENSATION_FAILED
        # Decisions still waiting for a step are judged (and their refusals journaled)
        # first; then the gate closes: a handler waiting on a decision then returns, so
        # waiting for all handlers cannot hang the close; decisions from here on are refused.
        self._gate.release()
        await workflow.wait_condition(lambda: self._gate.settled)
        self._gate.close()
        await workflow.wait_condition(workflow.all_handlers_finished)
        ref = await self._journal(
            JournalEventInput(
                saga_id=self._saga_id,
                phase=Phase.SAGA_CLOSED,
                result={
                    "status": final.value,
                    "first_failure": self._failure,
                    "final_answer": self._final_answer,
                    "unknown_outcome_steps": unknown,
                    "needs_human": needs_human,
                    "refused_decisions": {str(k): v for k, v in self._gate.refusals.items()},
                },
            )
        )
        self._publish()
        return fit_result(
            SagaResult(
                saga_id=self._saga_id,
                status=final,
                final_answer=self._final_answer,
                steps=list(self._steps.values()),
                compensations=self._compensations,
                unknown_outcome_steps=unknown,
                first_failure=self._failure,
                needs_human=needs_human,
                head_seq=ref.seq,
                head_hash=ref.hash,
            )
        )

    # ---- bookkeeping -----------------------------------------------------------------------

    def _pinned_queue(self) -> str | None:
        """The queue only workers of the saga's pinned identity poll (None for sagas from
        before pinning: the workflow's own queue)."""
        if self._worker is None:
            return None
        return activity_queue(workflow.info().task_queue, self._worker)

    async def _on_pinned_worker(self, activity: str, arg: Any, **options: Any) -> Any:
        """Run an activity on the workflow's own queue (so Temporal can hand it straight
        to this worker: eager dispatch, no extra round trip); if it reached a worker with
        another toolbox or journal, that worker refused it before doing anything, and it
        runs again on the pinned identity's queue, which only the right workers poll."""
        try:
            return await workflow.execute_activity(activity, arg, **options)
        except ActivityError as exc:
            if self._worker is None or failure_type(exc) != WRONG_WORKER:
                raise
            return await workflow.execute_activity(
                activity, arg, task_queue=self._pinned_queue(), **options
            )

    async def _journal(self, event: JournalEventInput) -> EntryRef:
        """Journal through a local activity on this worker (the pinned worker's queue if
        this worker has another toolbox or journal: never into another journal)."""
        if self._worker is not None:
            event = event.model_copy(update={"worker": self._worker})
        ref: EntryRef = await self._local_on_pinned_worker(
            JOURNAL_EVENT, event, result_type=EntryRef
        )
        self._head = ref
        return ref

    async def _local_on_pinned_worker(self, activity: str, arg: Any, result_type: type) -> Any:
        """A local activity on this worker; if this worker is not of the saga's pinned
        identity it refuses before doing anything, and the call goes to the pinned
        identity's queue as a regular activity instead."""
        try:
            return await workflow.execute_local_activity(
                activity, arg, result_type=result_type, **LOCAL_OPTIONS
            )
        except LOCAL_FAILURES as exc:
            if failure_type(exc) != WRONG_WORKER:
                raise
            return await workflow.execute_activity(
                activity,
                arg,
                result_type=result_type,
                task_queue=self._pinned_queue(),
                **LOCAL_OPTIONS,
            )

    def _fail(self, reason: str) -> None:
        if self._failure is None:  # the first failure is the one reported
            self._failure = reason

    def _record(
        self,
        outcome: ToolOutcome,
        *,
        status: str | None = None,
        approver: str | None = None,
        error: str | None = None,
    ) -> None:
        self._outcomes[outcome.step] = outcome
        previous = self._steps.get(outcome.step)
        self._steps[outcome.step] = step_report(
            outcome,
            status=status,
            approver=approver or (previous.approver if previous else None),
            error=error,
        )
        self._publish()

    def _set_status(self, status: SagaStatus) -> None:
        self._status = status
        self._publish()

    def _needs_human(self) -> bool:
        return self._status is SagaStatus.COMPENSATION_FAILED or any(
            o.kind is OutcomeKind.UNKNOWN for o in self._outcomes.values()
        )

    def _publish(self) -> None:
        """Search attributes and current details, as the Temporal UI shows them.

        Search attributes are upserted only when they change: each upsert is a command
        and an event in history, and a saga of hundreds of steps should not pay for one
        per step."""
        attributes = (self._status.value, self._needs_human())
        if attributes != self._published:
            self._published = attributes
            workflow.upsert_search_attributes(
                [SAGA_STATUS.value_set(attributes[0]), SAGA_NEEDS_HUMAN.value_set(attributes[1])]
            )
        recent = list(self._steps.values())[-50:]
        workflow.set_current_details(
            steps_markdown(self._status.value, (r.model_dump() for r in recent))
        )

    # ---- decisions and queries ---------------------------------------------------------------

    # One dynamic handler receives every signal with its raw payloads, so that a body the
    # converter cannot decode, or a signal with the wrong number of arguments, is refused
    # and journaled like any malformed decision. Named handlers would be skipped by the
    # SDK for undecodable bodies (no evidence) and raise TypeError for a wrong arity
    # (a failed workflow task, retried forever: the saga would be wedged).
    @workflow.signal(dynamic=True)
    async def on_signal(self, name: str, args: Sequence[RawValue]) -> None:
        raw = _one(tuple(_decoded(a) for a in args))
        if name in ("approve", "reject"):
            await self._gate.on_signal(raw, approve=name == "approve")
        elif name == "record_refusal":
            # Journal a decision the `decide` validator refused (a rejected update leaves
            # no history); never approves or rejects anything.
            await self._gate.on_refusal_record(raw)
        else:
            workflow.logger.warning("signal %r is not one this saga takes; ignored", name)

    # The `decide` update is dynamic for the same reason: a named handler's arguments are
    # decoded before the validator runs, and an update whose body cannot be decoded, or
    # that has two arguments, would be rejected by the SDK with no history: no evidence.
    @workflow.update(dynamic=True)
    async def on_update(self, name: str, args: Sequence[RawValue]) -> DecisionResult:
        return await self._gate.on_update(_one(tuple(_decoded(a) for a in args)))

    @on_update.validator
    def _validate_update(self, name: str, args: Sequence[RawValue]) -> None:
        if name != DECIDE_UPDATE:
            raise ApplicationError(
                f"update {name[:100]!r} is not one this saga takes; decisions go through "
                f"{DECIDE_UPDATE!r}",
                type="UnknownUpdate",
            )
        self._gate.validate(_one(tuple(_decoded(a) for a in args)))

    @workflow.query(name="status")
    def status(self) -> SagaView:
        return SagaView(
            saga_id=self._saga_id,
            status=self._status,
            needs_human=self._needs_human(),
            steps=len(self._steps),
            first_failure=self._failure,
            pending_approval=self._gate.pending_view(),
        )

    @workflow.query(name="steps")
    def steps(self) -> list[StepReport]:
        return list(self._steps.values())

    @workflow.query(name="pending_approval")
    def pending_approval(self) -> PendingApproval | None:
        return self._gate.pending_view()


DECIDE_UPDATE = "decide"


def _decoded(raw: RawValue) -> Any:
    """The JSON value of one signal or update argument, or a short description of why it has none
    (kept as evidence; the judge refuses it as MALFORMED)."""
    try:
        return workflow.payload_converter().from_payload(raw.payload)
    except Exception as exc:  # any decoding failure is the sender's, not the saga's
        encoding = raw.payload.metadata.get("encoding", b"").decode("utf-8", "replace")
        return (
            f"undecodable argument ({encoding or 'no encoding'}, "
            f"{len(raw.payload.data)} bytes): {type(exc).__name__}: {exc}"
        )[:1_000]


def _one(args: tuple[Any, ...]) -> Any:
    """The decision a signal carried: its single argument; none is None and several are
    kept as a list, both refused as MALFORMED by the judge."""
    if len(args) == 1:
        return args[0]
    return None if not args else list(args)
