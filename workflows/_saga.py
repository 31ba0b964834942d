"""The saga API: journaled, approvable, compensating tool calls inside any workflow.

    @workflow.defn
    class OrderWorkflow:
        @workflow.run
        async def run(self, order: Order) -> str:
            async with Saga.open(SagaOptions(approvers=["alice"])) as saga:
                await saga.call("reserve_inventory", sku=order.sku, qty=order.qty)
                await saga.call("charge_card", amount=order.total)
                await saga.call("send_wire_transfer", iban=order.iban, amount=order.total)
            return "done"

Each `call` is one journaled step (INTENT committed before the tool runs, then EXECUTED
or FAILED; the atomic claim, fences, idempotency key and recorded result on retry, all in
the `sagacity.run_tool` activity). An irreversible tool waits on the approval gate for a
decision bound to the SHA-256 of its exact payload. When the block fails — a step fails
or is rejected, the approval times out, the workflow is cancelled, or the block raises
any Temporal failure — the executed steps are compensated in reverse order in a shielded
finalizer, exactly once, and the saga's journal is closed; leaving the block then raises
SagaFailedError (with the saga's result), or lets the cancellation go on. A failure the
block catches and swallows still fails the saga: leaving the block compensates and raises
SagaFailedError just the same. An exception that is a bug (not a Temporal failure) fails
the workflow task instead, as in any workflow: Temporal retries the task, nothing is
undone, and the saga goes on once the fix is deployed.

One saga per workflow run: the saga id is the workflow id, and its journal closes with
the saga, so a second `Saga.open` in the same run is refused (SagaUsageError). A long
workflow hands the saga to its next run with `handover()` and `Saga.open(state=...)`.
Another saga runs as a child workflow started with `start_child_saga` or
`execute_child_saga` (workflows.child_saga): their parent-close policy lets the child
compensate when its parent ends, where Temporal's default would terminate it.

A run or execution timeout ends a saga as a terminate does, without running its code:
nothing is compensated and its journal stays open (`sagacity dirty` lists it, and
`sagacity compensate` undoes it). SagaClient starts sagas without one; a run started
with one is logged as a warning when it opens its saga.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from types import TracebackType
from typing import Any

from temporalio import workflow
from temporalio.exceptions import FailureError
from temporalio.exceptions import is_cancelled_exception as is_cancelled

with workflow.unsafe.imports_passed_through():
    from sagacity.activities._models import OutcomeKind, ToolCall
    from sagacity.journal._phases import SagaStatus
    from sagacity.workflows._models import SagaOptions, SagaState

from sagacity.workflows._child_saga import execute_child_saga, start_child_saga
from sagacity.workflows._compensator import failure_type
from sagacity.workflows._saga_engine import SagaCore, cancel_failure
from sagacity.workflows._saga_errors import (
    STEP_ERROR_TYPES,
    SagaFailedError,
    SagaUsageError,
    StepError,
)

__all__ = [
    "Saga",
    "SagaFailedError",
    "SagaOptions",
    "SagaState",
    "SagaUsageError",
    "StepError",
    "execute_child_saga",
    "start_child_saga",
]

_OPEN_MARK = "__sagacity_saga__"


async def _cancelled_during(work: Awaitable[Any]) -> bool:
    """Run `work` to its end through any cancels; True if one arrived meanwhile."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    task.result()
    return cancelled


def _warn_of_timeouts(info: workflow.Info) -> None:
    """Log (never a command: nothing in history changes) that this run has a timeout
    that would end its saga without compensating it."""
    limits = [
        f"{name} {value}"
        for name, value in (("run", info.run_timeout), ("execution", info.execution_timeout))
        if value
    ]
    if limits:
        workflow.logger.warning(
            "saga %s runs with a timeout (%s): when it passes, Temporal ends the run without "
            "running its code, so nothing is compensated and its journal stays open "
            "(`sagacity dirty` lists it, `sagacity compensate` undoes it); start sagas "
            "without one",
            info.workflow_id,
            ", ".join(limits),
        )


class Saga(SagaCore):
    """One saga in one workflow run: open it with `Saga.open` as `async with`, and call
    tools with `call`. (AgentSaga drives the same engine step by step.)"""

    @classmethod
    def open(cls, options: SagaOptions | None = None, *, state: SagaState | None = None) -> Saga:
        """The saga of this workflow run, for `async with`. `state` is what `handover()`
        returned in the previous run (continue-as-new); None starts a new saga."""
        instance = workflow.instance()
        if getattr(instance, _OPEN_MARK, False):
            raise SagaUsageError(
                "a saga was already opened in this workflow run; a workflow run holds one "
                "saga (its id is the workflow id and its journal closes with it): call "
                "more tools on the same saga, or start a child workflow for another"
            )
        info = workflow.info()
        continued = (
            info.continued_run_id is not None and not info.cron_schedule and info.attempt == 1
        )
        if state is not None and not continued:
            # Only Temporal can make a run a continuation, and only this workflow's own
            # code writes the state it hands over; a starter who could plant a state
            # could plant an "executed" step, or skip the saga's opening entry.
            raise SagaUsageError(
                "saga state was given to a run that is not a continue-as-new of this "
                "workflow (a first run, a cron run or a retry, whose input a starter "
                "chose); state is only taken after saga.handover() and continue-as-new: "
                "start the workflow without it",
            )
        if state is not None and state.from_run != info.continued_run_id:
            raise SagaUsageError(
                "saga state refused: it was not handed over by the run this one continues "
                f"({info.continued_run_id}); pass Saga.open only the state saga.handover() "
                "returned in the run before"
            )
        setattr(instance, _OPEN_MARK, True)
        _warn_of_timeouts(info)
        saga = cls(options or SagaOptions(), state)
        saga._owner = asyncio.current_task()
        return saga

    async def __aenter__(self) -> Saga:
        self.publish()
        if self._resumed:
            await self.check_resume()
        else:
            opened = self.options.model_dump(mode="json")
            try:
                await self.start({"workflow_type": workflow.info().workflow_type, **opened})
            except FailureError as exc:
                if failure_type(exc) != "SagaIdReused" or workflow.info().continued_run_id is None:
                    raise
                self.stranded = True  # the earlier run's steps are left as they were
                self.publish()
                raise SagaUsageError(
                    "this run continues an earlier one whose saga is already open: pass the "
                    "state saga.handover() returned there to Saga.open(state=...) here"
                ) from exc
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        self.closing = True  # a call that starts from here on is refused
        if isinstance(exc, workflow.ContinueAsNewError):
            # Idempotent (the block may have handed over already). A cancel arriving
            # meanwhile wins over the continue-as-new: the saga compensates, closes and
            # the workflow ends cancelled (never an uncompensated end, never a lost cancel).
            if await _cancelled_during(self.handover()):
                self.fail(cancel_failure())
                await self.finish()
                raise asyncio.CancelledError("cancelled while handing the saga over") from exc
            return False
        if exc is not None and not self.absorb(exc):
            return False  # a bug in the workflow: its task fails and Temporal retries it
        result = await self.finish()
        if exc is not None and is_cancelled(exc):
            return False  # compensated; the workflow ends cancelled, as it was asked to
        if isinstance(exc, SagaUsageError):
            return False  # compensated; the misuse is the failure the workflow reports
        if result.status is not SagaStatus.COMPLETED:
            # Whether the block let the step's error out or swallowed it: one error, with
            # the saga's result, for every saga that failed and was compensated.
            raise SagaFailedError(result) from exc
        return False

    async def call(self, tool: str, /, **args: Any) -> Any:
        """Run `tool` with `args` as the saga's next step and return its result. Raises
        StepError when the step did not complete; the saga is then failed (compensated
        when the block exits), and later calls raise at once without running anything."""
        if self.closing or self.result is not None:
            raise SagaUsageError(f"the saga is closed; {tool!r} was not run")
        if asyncio.current_task() is not self._owner:
            raise SagaUsageError(
                f"saga.call from another task (a signal or update handler, a task of its "
                f"own); {tool!r} was not run. Call the saga from the workflow's run code, "
                "inside its block: an error raised in a handler fails the workflow at once, "
                "without leaving the block, so nothing would be compensated"
            )
        if self.in_flight:
            raise SagaUsageError(
                f"a step is still running; {tool!r} was not run. A saga takes one step at a "
                "time (await each call before the next): its steps are ordered, approvals "
                "bind one step each, and compensation undoes them in reverse"
            )
        if self.failure is not None:
            raise StepError(
                f"the saga has already failed ({self.failure}); {tool!r} was not run",
                outcome=None,
                error_type="SagaAlreadyFailed",
            )
        if not self.within_step_limit():
            raise StepError(self.failure or "step limit", outcome=None, error_type="StepLimit")
        outcome = await self.step(ToolCall(tool=tool, args=args))
        if outcome.kind is OutcomeKind.REFUSED:
            self.fail(f"step {outcome.step} ({tool}) refused: {outcome.error}")
        if outcome.result_truncated and self.failure is None:
            self.fail(
                f"step {outcome.step} ({tool}) ran, but its result is longer than "
                f"model_result_limit ({self.options.model_result_limit} characters) and "
                "came back cut; raise the limit or have the tool return less"
            )
        if self.failure is None:
            return outcome.result
        kind = STEP_ERROR_TYPES.get(outcome.kind, "StepFailed")
        raise StepError(self.failure, outcome=outcome, error_type=kind)
