"""AgentSagaWorkflow: an agent's tool calls as a durable, journaled, approvable saga.

The model-or-plan loop on top of the saga API (workflows.saga): it asks the model (or
walks a plan) and runs each tool call as the saga's next step; the saga journals it,
waits durably for a human on irreversible tools, and on failure, rejection, approval
timeout or cancellation compensates executed steps in reverse order, exactly once. A
long saga continues as new, carrying the saga's state and the loop's (conversation,
plan position).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from sagacity._errors import SagacityError
    from sagacity.activities import CHECK_PLAN, NEXT_TURN
    from sagacity.activities._models import (
        ChatMessage,
        CheckPlanInput,
        ModelTurn,
        ModelTurnInput,
        OutcomeKind,
        PlanCheck,
    )
    from sagacity.journal._phases import SagaStatus
    from sagacity.workflows._models import (
        DecisionResult,
        DirtyStep,
        PendingApproval,
        ResolutionResult,
        SagaCarry,
        SagaResult,
        SagaRunInput,
        SagaState,
        SagaView,
        StepReport,
    )

# Workflow logic modules. The worker passes the `workflows` package through the sandbox
# (worker.plugin.PASSTHROUGH, measured cheaper): the replay tests are what catch
# nondeterministic edits in them.
from sagacity.workflows._conversation import bound_messages, tool_message
from sagacity.workflows._reporting import fit_carry
from sagacity.workflows._saga_engine import SagaCore
from sagacity.workflows._saga_errors import SagaFailedError
from sagacity.workflows._saga_handlers import DECIDE_UPDATE
from sagacity.workflows._start_input import SagaInputError, check_handover, decode_run_input

__all__ = ["DECIDE_UPDATE", "AgentSagaWorkflow"]


class _ContinueAsNew(Exception):
    """Internal signal: this run has done enough steps; hand over to a new run."""


@workflow.defn(name="AgentSaga")
class AgentSagaWorkflow:
    @workflow.init
    def __init__(self, raw: RawValue) -> None:
        # The input is taken raw and decoded here, so an input that cannot be decoded or
        # breaks the bounds fails this saga at once instead of every workflow task.
        self._refused_input: str | None = None
        info = workflow.info()
        # Temporal names a previous run for a cron run and a retried run too, whose input
        # a caller wrote: only a plain continue-as-new carries the saga's state.
        continued = (
            info.continued_run_id is not None and not info.cron_schedule and info.attempt == 1
        )
        try:
            if info.cron_schedule:
                raise SagaInputError(
                    "an AgentSaga does not run on a cron schedule: its id names one journal "
                    "chain, which a second run could not open; start a saga (a new id) per "
                    "run, e.g. from a Temporal Schedule"
                )
            inp = decode_run_input(raw, continued=continued)
            if inp.carry is not None:
                check_handover(inp.carry.from_run, info.continued_run_id)
        except SagacityError as exc:
            self._refused_input = f"{type(exc).__name__}: {exc}"
            inp = SagaRunInput()
        self._inp = inp
        self._messages: list[ChatMessage] = []
        self._final_answer: str | None = None
        self._plan_index = 0
        self._model_turns = 0
        self._invalid_in_a_row = 0
        # The class declares the handlers (below), so the saga does not install them.
        self._saga = SagaCore(inp, inp.carry, install=False)
        carry = inp.carry
        if carry is not None:
            self._plan_index = carry.plan_index
            self._model_turns = carry.model_turns
            self._invalid_in_a_row = carry.invalid_in_a_row
            self._messages = list(carry.messages)

    # ---- run -----------------------------------------------------------------------------

    @workflow.run
    async def run(self, raw: RawValue) -> SagaResult:
        if self._refused_input is not None:
            raise ApplicationError(
                f"saga input refused, nothing started: {self._refused_input}",
                type="SagaInputRefused",
                non_retryable=True,
            )
        inp, saga = self._inp, self._saga
        saga.publish()
        if inp.carry is None:
            opened = inp.model_dump(mode="json", exclude={"model": {"script"}, "carry": True})
            await saga.start(opened)
        cancelled: BaseException | None = None
        try:
            try:
                await self._drive()
            except _ContinueAsNew:
                next_input = fit_carry(inp, self._carry(await saga.handover()))
                if next_input is None:
                    saga.fail("the saga's state is too large to continue as new")
                else:
                    workflow.continue_as_new(next_input)
        except BaseException as exc:
            if not saga.absorb(exc):
                raise  # continue-as-new, or a bug in this workflow: let it out
            if is_cancelled_exception(exc):
                cancelled = exc
        saga.final_answer = self._final_answer
        result = await saga.finish()
        if cancelled is not None:
            raise cancelled
        # A saga that did not complete fails its workflow: the Temporal UI shows it red,
        # with the saga's result in the failure's details.
        if result.status is not SagaStatus.COMPLETED:
            raise SagaFailedError(result)
        return result

    async def _drive(self) -> None:
        if self._saga.failure is not None:
            return  # refused at its start (its requester): nothing runs
        first_run = self._inp.carry is None
        if self._inp.plan is not None and first_run and await self._plan_problems():
            return
        if self._inp.plan is None:
            await self._agent_loop()
            return
        while self._plan_index < len(self._inp.plan):
            call = self._inp.plan[self._plan_index]
            self._plan_index += 1
            if not self._saga.within_step_limit():
                return
            outcome = await self._saga.step(call)
            if outcome.kind is OutcomeKind.REFUSED:
                self._saga.fail(f"plan step {outcome.step} refused: {outcome.error}")
            if self._saga.failure is not None:
                return
            self._maybe_continue_as_new()

    async def _plan_problems(self) -> bool:
        """Check the whole plan before its first step: a typo in step 2 must not run step
        1 and then undo it. True (and the saga failed as REFUSED) when it has problems."""
        plan = self._inp.plan or []
        # A local activity: checking needs the toolbox, not I/O, so it costs no round trip.
        check: PlanCheck = await self._saga.pinned.run_local(
            CHECK_PLAN,
            CheckPlanInput(
                saga_id=self._saga.saga_id,
                plan=plan,
                allowed_tools=self._inp.allowed_tools,
                worker=self._saga.pinned.worker,
            ),
            PlanCheck,
        )
        self._saga.expect_approval(check.waits_for_approval)
        if not check.problems:
            return False
        listed = "; ".join(f"step {p.index + 1} ({p.tool}): {p.error}" for p in check.problems[:5])
        self._saga.fail(
            f"plan refused before any step ran, nothing was done: {listed}", refused=True
        )
        return True

    async def _agent_loop(self) -> None:
        if not self._messages:  # a new saga (or one that only moved to its pinned queue)
            if self._inp.system_prompt:
                self._messages.append(ChatMessage(role="system", content=self._inp.system_prompt))
            self._messages.append(ChatMessage(role="user", content=self._inp.goal or ""))
        while True:
            self._messages = bound_messages(self._messages, self._inp.max_conversation_chars)
            turn: ModelTurn = await self._saga.pinned.run(
                NEXT_TURN,
                ModelTurnInput(
                    saga_id=self._saga.saga_id,
                    settings=self._inp.model,
                    messages=self._messages,
                    allowed_tools=self._inp.allowed_tools,
                    turn=self._model_turns,
                    worker=self._saga.pinned.worker,
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
            self._saga.expect_approval(turn.waits_for_approval)
            self._messages.append(
                ChatMessage(role="assistant", content=turn.final, tool_calls=turn.tool_calls)
            )
            if not turn.tool_calls:
                self._final_answer = turn.final
                return
            for call in turn.tool_calls:
                if not self._saga.within_step_limit():
                    return
                outcome = await self._saga.step(call)
                self._messages.append(tool_message(call, outcome))
                if self._saga.failure is not None:
                    return  # the saga is failed; whatever the model says next is moot
                if outcome.kind is not OutcomeKind.REFUSED:
                    self._invalid_in_a_row = 0
                    continue
                self._invalid_in_a_row += 1
                if self._invalid_in_a_row >= self._inp.max_invalid_calls:
                    self._saga.fail(
                        f"{self._invalid_in_a_row} invalid tool calls in a row; "
                        f"last: {outcome.error}"
                    )
                    return
            self._maybe_continue_as_new()

    def _maybe_continue_as_new(self) -> None:
        if self._saga.should_continue_as_new():
            raise _ContinueAsNew()

    def _carry(self, state: SagaState) -> SagaCarry:
        return SagaCarry(
            **dict(state),
            plan_index=self._plan_index,
            model_turns=self._model_turns,
            invalid_in_a_row=self._invalid_in_a_row,
            messages=self._messages,
        )

    # ---- decisions and queries ---------------------------------------------------------------
    # The saga's doors (workflows.saga_handlers), declared on the class so that they are
    # in place from the first activation and listed in the workflow's metadata.

    @workflow.signal(dynamic=True)
    async def on_signal(self, name: str, args: Sequence[RawValue]) -> None:
        await self._saga.doors.on_signal(name, args)

    @workflow.update(dynamic=True)
    async def on_update(
        self, name: str, args: Sequence[RawValue]
    ) -> DecisionResult | ResolutionResult:
        return await self._saga.doors.on_update(name, args)

    @on_update.validator
    def _validate_update(self, name: str, args: Sequence[RawValue]) -> None:
        self._saga.doors.validate_update(name, args)

    @workflow.query(name="status")
    def status(self) -> SagaView:
        return self._saga.view()

    @workflow.query(name="steps")
    def steps(self) -> list[StepReport]:
        return list(self._saga.steps.values())

    @workflow.query(name="pending_approval")
    def pending_approval(self) -> PendingApproval | None:
        return self._saga.gate.pending_view()

    @workflow.query(name="dirty")
    def dirty(self) -> list[DirtyStep]:
        """Steps that need a person: an unknown outcome, a failed compensation."""
        return self._saga.dirty_steps()
