"""The saga engine: one saga's state, steps, approval gate, compensation and close.

workflows.saga.Saga is the user-facing form (`async with Saga.open(...)`, `saga.call`);
AgentSaga drives the engine directly (`start`, `step`, `absorb`, `finish`). Everything
here runs in workflow code: deterministic, and every command it issues is part of the
event sequence recorded histories replay against.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.exceptions import is_cancelled_exception as is_cancelled

with workflow.unsafe.imports_passed_through():
    from sagacity.activities import (
        APPROVER_KEY,
        CHECK_RESUME,
        WORKER_IDENTITY,
    )
    from sagacity.activities._models import (
        EntryRef,
        JournalEventInput,
        KeyLookupInput,
        ResumeCheckInput,
        ToolCall,
        ToolOutcome,
    )
    from sagacity.approval._policy import ApprovalRequirement
    from sagacity.approval._registry_file import KeyLookup
    from sagacity.approval._resolutions import ResolutionPolicy
    from sagacity.journal._bounds import cut
    from sagacity.journal._phases import Phase, SagaStatus, StepStatus
    from sagacity.workflows._models import (
        CompensationReport,
        DirtyStep,
        ResolutionReport,
        SagaOptions,
        SagaResult,
        SagaState,
        StepReport,
    )

from sagacity.workflows._approval_gate import ApprovalGate
from sagacity.workflows._compensator import LOCAL_OPTIONS, compensate, failure_cause
from sagacity.workflows._human_desk import HumanDesk
from sagacity.workflows._pinned import PinnedActivities
from sagacity.workflows._reporting import fit_result
from sagacity.workflows._requester import check_requester
from sagacity.workflows._saga_handlers import SagaDoors
from sagacity.workflows._saga_steps import SagaSteps

MAX_CANCEL_REASON = 500


def cancel_failure() -> str:
    """What a cancel fails the saga with: "saga cancelled", with the reason the request
    gave (`sagacity cancel` sends who and why), so the close entry and the result say it."""
    reason = " ".join((workflow.cancellation_reason() or "").split())
    if reason:
        return f"saga cancelled ({cut(reason, MAX_CANCEL_REASON)})"
    return "saga cancelled"


T = TypeVar("T")


class SagaCore(SagaSteps):
    """One saga in one workflow run: what it did, what it waits for, how it ends."""

    def __init__(
        self, options: SagaOptions, state: SagaState | None = None, *, install: bool = True
    ) -> None:
        self.options = options
        self.saga_id = workflow.info().workflow_id
        self.pinned = PinnedActivities()
        self.status = SagaStatus.RUNNING
        self.steps: dict[int, StepReport] = {}
        self.compensations: list[CompensationReport] = []
        self.failure: str | None = None
        self.final_answer: str | None = None
        self.result: SagaResult | None = None
        """The saga's result once it has closed."""
        self.next_step = 0
        self.in_flight = 0
        """Steps running now (one at most: the saga API refuses a second)."""
        self.stranded = False
        """A run that found its saga open without being handed its state: what the earlier
        run did is left for a human (needs_human)."""
        self.closing = False
        """The saga block is being left: no new step may start."""
        self._owner: asyncio.Task[Any] | None = None
        """The task that opened the saga (the workflow's run), the only one that calls it."""
        self.refused = False
        self._compensation_started = False
        self.approval_tools: set[str] = set()
        """Tools known to wait for approval (from a plan check, a model turn or an earlier
        step): their first activity is named an approval check, not a run."""
        self._head: EntryRef | None = None
        self._published: tuple[str, bool] | None = None
        approvers = options.approvers
        tightening = options.approval
        if approvers is not None:
            listed = ApprovalRequirement(approvers=approvers, separate_from_requester=False)
            tightening = listed.tightened(tightening)
        self.gate = ApprovalGate(
            self.saga_id,
            self.journal,
            reached=lambda: self.next_step,
            lookup=self._lookup_key,
            tightening=tightening,
        )
        self.gate.changed = self.publish
        policy = (options.resolution or ResolutionPolicy()).effective(approvers)
        self.desk = HumanDesk(
            self.saga_id,
            self.journal,
            self._lookup_key,
            policy=policy,
            dirty=self.dirty,
            status=lambda: self.status.value,
            requester=lambda: self.gate.requester,
            rolled_back=self.gate.rolled_back,
        )
        self.resolutions: list[ResolutionReport] = []
        self.accepted_dirty: list[DirtyStep] = []
        self.doors = SagaDoors(
            self.gate, self.desk, self.view, lambda: list(self.steps.values()), self.dirty_steps
        )
        if state is not None:
            self.next_step = state.next_step
            self.steps = {s.step: s for s in state.steps}
            self.gate.restore(state.decided_steps, state.refusals, state.registry_seen)
            self._head = state.head
            self.pinned.worker = state.worker
            self.gate.requester = state.requester
            self.desk.restore(state.resolution_refusals)
        self._resumed = state is not None
        self._run_start_step = self.next_step
        if install:
            self.doors.install()

    # ---- driving it ------------------------------------------------------------------------

    async def start(self, opened: dict[str, Any]) -> None:
        """Pin this worker's identity (toolbox and journal) and journal SAGA_OPENED."""
        self.pinned.worker = await workflow.execute_local_activity(
            WORKER_IDENTITY, result_type=str, **LOCAL_OPTIONS
        )
        opened = {**opened, "worker": self.pinned.worker}
        refused, evidence = await check_requester(
            self.saga_id, self.options.requester, self._lookup_key, workflow.now()
        )
        opened = {**opened, "requester": evidence}
        if refused is not None:
            self.fail(f"saga start refused, nothing ran: {refused}", refused=True)
        else:
            self.gate.requester = evidence["requester"] if evidence else None
        await self.journal(
            JournalEventInput(
                saga_id=self.saga_id,
                phase=Phase.SAGA_OPENED,
                # The run chain that owns the saga from now on (its activities check it).
                input={
                    "run_id": workflow.info().run_id,
                    "chain": workflow.info().first_execution_run_id,
                    **opened,
                },
            )
        )

    async def _lookup_key(self, key_id: str | None) -> KeyLookup:
        """The pinned worker's registry answer about one key (a local activity)."""
        lookup: KeyLookup = await self.pinned.run_local(
            APPROVER_KEY, KeyLookupInput(key_id=key_id, worker=self.pinned.worker), KeyLookup
        )
        return lookup

    async def check_resume(self) -> None:
        """Check the state this run was handed against the journal (its head, its
        opening) before anything else runs: a local activity on the pinned worker."""
        head = self._head
        check = ResumeCheckInput(
            saga_id=self.saga_id,
            head_seq=head.seq if head else None,
            head_hash=head.hash if head else None,
            worker=self.pinned.worker,
        )
        await self.pinned.run_local(CHECK_RESUME, check, type(None))

    def absorb(self, exc: BaseException) -> bool:
        """Take a failure of the saga's work as the saga's failure (to compensate): a
        cancellation, or an exception that fails the workflow (a Temporal failure, or a
        type the workflow or worker lists in `failure_exception_types`). False for
        anything else: a bug, which fails the workflow task (nothing to compensate; the
        task is retried and the saga goes on once the fix is deployed)."""
        if is_cancelled(exc):
            self.fail(cancel_failure())
            return True
        if not isinstance(exc, Exception):
            return False  # continue-as-new, or the SDK closing an evicted workflow
        if workflow.is_failure_exception(exc):
            self.fail(f"{type(exc).__name__}: {failure_cause(exc)}")
            return True
        return False

    def within_step_limit(self) -> bool:
        if self.next_step < self.options.max_steps:
            return True
        self.fail(f"step limit of {self.options.max_steps} reached")
        return False

    def should_continue_as_new(self) -> bool:
        """This run did `continue_as_new_after_steps` steps, or Temporal suggests it."""
        done_here = self.next_step - self._run_start_step
        return (
            done_here >= self.options.continue_as_new_after_steps
            or workflow.info().is_continue_as_new_suggested()
        )

    async def handover(self) -> SagaState:
        """The saga's state for the next run: decisions still waiting are judged first and
        the handlers finish (a handler cut off by continue-as-new would lose its work),
        after any step still running has ended (its outcome must be in the state)."""
        await workflow.wait_condition(lambda: self.in_flight == 0)
        self.gate.release()
        await workflow.wait_condition(lambda: self.gate.settled)
        await workflow.wait_condition(lambda: self.doors.idle)
        return self.state()

    def state(self) -> SagaState:
        return SagaState(
            next_step=self.next_step,
            steps=list(self.steps.values()),
            decided_steps=sorted(self.gate.decided_steps),
            refusals=dict(self.gate.refusals),
            head=self._head,
            worker=self.pinned.worker,
            from_run=workflow.info().run_id,
            requester=self.gate.requester,
            resolution_refusals=dict(self.desk.refusals),
            registry_seen=self.gate.registry_seen,
        )

    async def finish(self) -> SagaResult:
        """Compensate (if the saga failed) and close, shielded: cancels that keep coming
        cannot split it, and it runs once."""
        if self.result is None:
            self.result = await shielded(self._finish())
        return self.result

    async def _finish(self) -> SagaResult:
        if self.gate.abandoned:
            for step, actor, error in await self.gate.journal_abandoned():
                report = self.steps.get(step)
                if report is not None:  # the report says what the journal says
                    update = {"status": StepStatus.REJECTED, "approver": actor, "error": error}
                    self.steps[step] = report.model_copy(update=update)
        if self.failure is not None:
            await self._compensate()
            if self.dirty():
                await self.await_human()
            self._mark_not_compensable()
        return await self._close()

    # ---- one tool call ---------------------------------------------------------------------

    async def step(self, call: ToolCall) -> ToolOutcome:
        """Run one call as the next step, waiting for approval when the tool needs it, and
        return its outcome. Fails the saga for anything but EXECUTED and REFUSED (a refused
        call ran nothing; the caller decides: a model may try again, a plan may not). A
        cancellation fails the saga too, even if the caller swallows it."""
        self.in_flight += 1
        try:
            return await self._step(call)
        except BaseException as exc:
            if is_cancelled(exc):
                self.fail(cancel_failure())
            raise
        finally:
            self.in_flight -= 1

    # ---- compensation and close ------------------------------------------------------------

    async def _compensate(self) -> None:
        if self._compensation_started:
            return
        self._compensation_started = True
        self.set_status(SagaStatus.COMPENSATING)
        await compensate(
            self.saga_id,
            self.failure or "",
            self.options,
            self.steps.values(),
            self.journal,
            self._on_compensated,
            worker=self.pinned.worker,
            task_queue=self.pinned.queue(),
        )

    async def _close(self) -> SagaResult:
        if self.failure is None:
            final = SagaStatus.COMPLETED
        elif self.refused and not self.steps:
            final = SagaStatus.REFUSED
        elif self.desk.accepted:
            final = SagaStatus.ACCEPTED
        elif self.dirty():
            final = SagaStatus.UNRESOLVED
        else:
            final = SagaStatus.COMPENSATED
        self.status = final
        unknown = self.unknown_steps()
        needs_human = self.needs_human()
        # Decisions still waiting for a step are judged (and their refusals journaled)
        # first; then the gate closes: a handler waiting on a decision then returns, so
        # waiting for all handlers cannot hang the close; decisions from here on are refused.
        self.gate.release()
        await workflow.wait_condition(lambda: self.gate.settled)
        self.gate.close()
        self.desk.closed = True
        # The saga's own handlers only: the workflow's own may wait on the saga's end.
        await workflow.wait_condition(lambda: self.doors.idle)
        closing: dict[str, object] = {
            "status": final.value,
            "first_failure": self.failure,
            "final_answer": self.final_answer,
            "unknown_outcome_steps": unknown,
            "needs_human": needs_human,
            "refused_decisions": {str(k): v for k, v in self.gate.refusals.items()},
        }
        dirty = self.accepted_dirty if final is SagaStatus.ACCEPTED else self.dirty_steps()
        closing["dirty_steps"] = [d.step for d in dirty]
        closing["resolutions"] = [
            {"action": r.action, "step": r.step, "actor": r.actor, "seq": r.seq}
            for r in self.resolutions[:100]
        ]
        ref = await self.journal(
            JournalEventInput(saga_id=self.saga_id, phase=Phase.SAGA_CLOSED, result=closing)
        )
        self.publish()
        return fit_result(
            SagaResult(
                saga_id=self.saga_id,
                status=final,
                final_answer=self.final_answer,
                steps=list(self.steps.values()),
                compensations=self.compensations,
                unknown_outcome_steps=unknown,
                first_failure=self.failure,
                needs_human=needs_human,
                head_seq=ref.seq,
                head_hash=ref.hash,
                checkpoint=ref.checkpoint,
                dirty=dirty,
                resolutions=self.resolutions,
            )
        )


async def shielded(work: Awaitable[T]) -> T:
    """Run `work` to the end even if cancels keep arriving (a bare shield abandons the
    work on a second cancel; looping does not)."""
    task = asyncio.ensure_future(work)
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            continue
    return task.result()
