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
    "retry_policy": RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=20),
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
) -> None:
    outcomes = list(outcomes)
    for outcome in outcomes:
        if outcome.kind is OutcomeKind.UNKNOWN:
            await workflow.execute_local_activity(
                FENCE_STEP, FenceInput(saga_id=saga_id, step=outcome.step), **LOCAL_OPTIONS
            )
    executed = [
        o
        for o in outcomes
        if o.kind is OutcomeKind.EXECUTED and o.tool_kind == ToolKind.COMPENSABLE.value
    ]
    executed.sort(key=lambda o: o.outcome.seq if o.outcome else 0, reverse=True)
    for outcome in executed:
        on_report(await _compensate_step(saga_id, inp, outcome, journal))


async def _compensate_step(
    saga_id: str, inp: SagaInput, outcome: ToolOutcome, journal: Journal
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
            ),
            result_type=CompensationOutcome,
            start_to_close_timeout=timedelta(seconds=inp.tool_timeout_seconds),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(seconds=1),
                maximum_interval=timedelta(seconds=10),
                maximum_attempts=inp.compensation_attempts,
            ),
            summary="undo " + call_summary(outcome.tool, outcome.args or {}),
        )
    except ActivityError as exc:
        error = failure_cause(exc)
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
        return CompensationReport(
            step=outcome.step, tool=outcome.tool, ok=False, seq=ref.seq, hash=ref.hash, error=error
        )
    done_ref = done.entry
    return CompensationReport(
        step=outcome.step,
        tool=outcome.tool,
        ok=True,
        seq=done_ref.seq if done_ref else None,
        hash=done_ref.hash if done_ref else None,
    )
