"""Reverse-order compensation of a saga's executed steps, inside the workflow.

Each step is compensated by its own activity with its own retry policy; a compensation
that still fails is journaled COMPENSATION_FAILED and the rest still run. Steps whose
outcome is unknown are fenced first and never compensated blindly.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities import COMPENSATE, FENCE_STEP
    from activities.models import (
        CompensateInput,
        CompensationOutcome,
        EntryRef,
        FenceInput,
        JournalEventInput,
        OutcomeKind,
        ToolOutcome,
    )
    from sagacity.phases import Phase
    from sagacity.tools import ToolKind
    from workflows.inspection import call_summary
    from workflows.models import CompensationReport, SagaInput

Journal = Callable[[JournalEventInput], Awaitable[EntryRef]]
OnReport = Callable[[CompensationReport], None]

LOCAL_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=30),
    # Unbounded: a workflow can wait durably for the journal to come back, and giving up
    # would skip evidence (or the remaining compensations). Non-retryable errors (a closed
    # chain, a conflicting entry) still stop at once.
    "retry_policy": RetryPolicy(
        initial_interval=timedelta(milliseconds=200),
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=0,
    ),
}


def failure_cause(exc: BaseException) -> str:
    """The message that explains a Temporal failure: the first ApplicationError in the
    chain (what the activity raised, with its own words), else the innermost cause."""
    while not isinstance(exc, ApplicationError) and exc.__cause__ is not None:
        exc = exc.__cause__
    return str(exc) or type(exc).__name__


async def compensate(
    saga_id: str,
    inp: SagaInput,
    outcomes: Iterable[ToolOutcome],
    journal: Journal,
    on_report: OnReport,
    *,
    worker: str | None = None,
    task_queue: str | None = None,
) -> None:
    """Fence unknown steps, then undo executed compensable steps, newest first. No single
    failure stops the rest: each is reported and the next step is still compensated.

    `worker` is the identity the saga is pinned to and `task_queue` the queue of its
    activities (both None for sagas from before pinning)."""
    outcomes = list(outcomes)
    for outcome in outcomes:
        if outcome.kind is OutcomeKind.UNKNOWN:
            fence = FenceInput(saga_id=saga_id, step=outcome.step, worker=worker)
            try:
                await _fence(fence, task_queue)
            except ActivityError as exc:
                workflow.logger.error("could not fence step %d: %s", outcome.step, exc)
    executed = [
        o
        for o in outcomes
        if o.kind is OutcomeKind.EXECUTED and o.tool_kind == ToolKind.COMPENSABLE.value
    ]
    executed.sort(key=lambda o: o.outcome.seq if o.outcome else 0, reverse=True)
    for outcome in executed:
        on_report(await _compensate_step(saga_id, inp, outcome, journal, worker, task_queue))


async def _fence(fence: FenceInput, task_queue: str | None) -> None:
    """Fence through a local activity; on a worker that is not the saga's pinned one, go
    through the pinned worker's queue instead (the fence belongs in the saga's journal)."""
    try:
        await workflow.execute_local_activity(FENCE_STEP, fence, **LOCAL_OPTIONS)
    except ActivityError as exc:
        cause = exc.cause
        if task_queue is None or not (
            isinstance(cause, ApplicationError) and cause.type == "WrongWorker"
        ):
            raise
        await workflow.execute_activity(FENCE_STEP, fence, task_queue=task_queue, **LOCAL_OPTIONS)


async def _compensate_step(
    saga_id: str,
    inp: SagaInput,
    outcome: ToolOutcome,
    journal: Journal,
    worker: str | None = None,
    task_queue: str | None = None,
) -> CompensationReport:
    try:
        done: CompensationOutcome = await workflow.execute_activity(
            COMPENSATE,
            CompensateInput(
                saga_id=saga_id,
                step=outcome.step,
                tool=outcome.tool,
                args=outcome.args or {},
                result=outcome.result,
                worker=worker,
            ),
            result_type=CompensationOutcome,
            task_queue=task_queue,
            start_to_close_timeout=timedelta(seconds=inp.tool_timeout_seconds),
            heartbeat_timeout=timedelta(seconds=inp.tool_heartbeat_timeout_seconds),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(seconds=1),
                maximum_interval=timedelta(seconds=10),
                maximum_attempts=inp.compensation_attempts,
            ),
            summary="undo " + call_summary(outcome.tool, outcome.args or {}),
        )
    except ActivityError as exc:
        error = failure_cause(exc)
        report = CompensationReport(step=outcome.step, tool=outcome.tool, ok=False, error=error)
        try:
            ref = await journal(
                JournalEventInput(
                    saga_id=saga_id,
                    phase=Phase.COMPENSATION_FAILED,
                    step=outcome.step,
                    tool=outcome.tool,
                    input=outcome.args,
                    error=error[:10_000],
                )
            )
        except ActivityError as journal_exc:  # reported in the result and the close entry
            workflow.logger.error("COMPENSATION_FAILED not journaled: %s", journal_exc)
            return report
        return report.model_copy(update={"seq": ref.seq, "hash": ref.hash})
    return CompensationReport(
        step=outcome.step,
        tool=outcome.tool,
        ok=True,
        seq=done.entry.seq,
        hash=done.entry.hash,
    )
