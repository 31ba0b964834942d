"""Reverse-order compensation of a saga's executed steps, inside the workflow.

Which steps, and in which order, is decided by the one planner,
`sagacity.tools._compensation.plan_steps`, fed with the saga's step reports (the same
planner `plan_compensation` feeds with journal entries). Each step is compensated by its
own activity with its own retry policy; the activity undoes only what the journal says
was EXECUTED and refuses otherwise. A compensation that still fails is journaled
COMPENSATION_FAILED, with the input of the journal's EXECUTED entry as the activity
reported it (never the workflow's copy, which continue-as-new drops), and the rest still
run. Steps whose outcome is unknown are fenced first and never compensated blindly.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as ActivityTimeoutError

with workflow.unsafe.imports_passed_through():
    from sagacity.activities import COMPENSATE, FENCE_STEP
    from sagacity.activities._models import (
        CompensateInput,
        CompensationOutcome,
        EntryRef,
        FenceInput,
        JournalEventInput,
    )
    from sagacity.journal._bounds import MAX_ERROR_CHARS, cut
    from sagacity.journal._phases import Phase, StepStatus
    from sagacity.tools._compensation import CompensationPlan, ExecutedStep, StepFact, plan_steps
    from sagacity.tools._decorators import ToolKind
    from sagacity.workflows._inspection import call_summary
    from sagacity.workflows._models import CompensationReport, SagaOptions, StepReport

EXECUTED_DETAIL = "executed"
"""Key of the compensate activity's failure detail that carries the journal's EXECUTED
entry ({"seq", "hash", "input"}), so COMPENSATION_FAILED records what really ran."""

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


def tool_options(opts: SagaOptions, attempts: int, longest_wait_seconds: int) -> dict[str, Any]:
    """Timeouts and retries of an activity that runs a tool (a step or its undo), from
    the saga's options: the tool's timeout and heartbeat, retried `attempts` times with
    waits growing from 1 s to `longest_wait_seconds`."""
    return {
        "start_to_close_timeout": timedelta(seconds=opts.tool_timeout_seconds),
        "heartbeat_timeout": timedelta(seconds=opts.tool_heartbeat_timeout_seconds),
        "retry_policy": RetryPolicy(
            initial_interval=timedelta(seconds=1),
            maximum_interval=timedelta(seconds=longest_wait_seconds),
            maximum_attempts=attempts,
        ),
    }


LOCAL_FAILURES = (ActivityError, ApplicationError)
"""What a failed local activity raises in the workflow: an ActivityError, or (for a
non-retryable failure) the activity's ApplicationError itself. Code that survives a
failed journal write must catch both, or the error escapes and fails the workflow."""


def failure_type(exc: BaseException) -> str | None:
    """The ApplicationError type behind a (local) activity failure, if any."""
    cause = exc.cause if isinstance(exc, ActivityError) else exc
    return cause.type if isinstance(cause, ApplicationError) else None


def failure_cause(exc: BaseException) -> str:
    """The message that explains a Temporal failure: the first ApplicationError in the
    chain (what the activity raised, with its own words), else the innermost cause."""
    while not isinstance(exc, ApplicationError) and exc.__cause__ is not None:
        exc = exc.__cause__
    return str(exc) or type(exc).__name__


async def compensate(
    saga_id: str,
    reason: str,
    inp: SagaOptions,
    reports: Iterable[StepReport],
    journal: Journal,
    on_report: OnReport,
    *,
    worker: str | None = None,
    task_queue: str | None = None,
) -> None:
    """Journal the decision to compensate (with `reason`, the saga's failure), fence
    unknown steps, then undo executed compensable steps, newest first. No single failure
    stops the rest: each is reported and the next step is still compensated.

    `worker` is the identity the saga is pinned to and `task_queue` the queue of its
    activities (both None for sagas from before pinning)."""
    recorded = {r.step: r for r in reports}
    plan = plan_reports(recorded.values())
    if plan.unknown or plan.to_compensate:
        # The saga's decision, journaled before anything is undone: the compensate and
        # fence activities act only once the journal holds it.
        await journal(
            JournalEventInput(
                saga_id=saga_id,
                phase=Phase.COMPENSATING,
                input={
                    "compensate": [s.step for s in plan.to_compensate],
                    "fence": [u.step for u in plan.unknown],
                },
                error=cut(reason, MAX_ERROR_CHARS) or None,
            )
        )
    for unknown in plan.unknown:
        fence = FenceInput(saga_id=saga_id, step=unknown.step, worker=worker)
        try:
            await _fence(fence, task_queue)
        except LOCAL_FAILURES as exc:
            workflow.logger.error("could not fence step %d: %s", unknown.step, exc)
    for step in plan.to_compensate:
        report = await compensate_step(
            saga_id, inp, step, recorded[step.step], journal, worker, task_queue
        )
        on_report(report)


def report_facts(reports: Iterable[StepReport]) -> list[StepFact]:
    """The saga's step reports as planner facts: an EXECUTED step carries its tool's
    kind; an UNKNOWN one is an INTENT with no outcome; a FAILED one settles its step.
    Refused, fenced and unapproved steps never ran, so they are no facts. (The reports
    are the saga's one record of its steps; compacted ones keep all of this.)"""
    facts: list[StepFact] = []
    for r in reports:
        if r.status == StepStatus.EXECUTED:
            compensable = r.tool_kind == ToolKind.COMPENSABLE
            facts.append(StepFact(r.step, r.tool, Phase.EXECUTED, r.seq, compensable=compensable))
        elif r.status == StepStatus.UNKNOWN:
            facts.append(StepFact(r.step, r.tool, Phase.INTENT, r.intent_seq))
        elif r.status == StepStatus.FAILED:
            facts.append(StepFact(r.step, r.tool, Phase.FAILED, r.seq))
    return facts


def plan_reports(reports: Iterable[StepReport]) -> CompensationPlan:
    """The workflow's compensation plan: the shared planner over its step reports."""
    return plan_steps(report_facts(reports))


def executed_input(exc: BaseException) -> Any:
    """The input of the journal's EXECUTED entry, as the compensate activity reported it:
    in its failure's details, or (a timeout) in its last heartbeat's. None when neither
    carries it: no EXECUTED entry at all (the error then says so), or an attempt lost
    before it read the journal."""
    current: BaseException | None = exc
    while current is not None:
        if isinstance(current, ApplicationError):
            details: Sequence[Any] = current.details
        elif isinstance(current, ActivityTimeoutError):
            details = current.last_heartbeat_details
        else:
            details = ()
        for detail in details:
            if isinstance(detail, dict) and isinstance(detail.get(EXECUTED_DETAIL), dict):
                return detail[EXECUTED_DETAIL].get("input")
        current = current.__cause__
    return None


async def _fence(fence: FenceInput, task_queue: str | None) -> None:
    """Fence through a local activity; on a worker that is not the saga's pinned one, go
    through the pinned worker's queue instead (the fence belongs in the saga's journal)."""
    try:
        await workflow.execute_local_activity(FENCE_STEP, fence, **LOCAL_OPTIONS)
    except LOCAL_FAILURES as exc:
        if task_queue is None or failure_type(exc) != "WrongWorker":
            raise
        await workflow.execute_activity(FENCE_STEP, fence, task_queue=task_queue, **LOCAL_OPTIONS)


async def compensate_step(
    saga_id: str,
    inp: SagaOptions,
    step: ExecutedStep,
    report: StepReport,
    journal: Journal,
    worker: str | None = None,
    task_queue: str | None = None,
    *,
    attempt: int = 1,
) -> CompensationReport:
    """Compensate one executed step. `attempt` numbers its COMPENSATION_FAILED entry: a
    person may have the compensation retried, and each failed round is its own entry."""
    # No args or result are sent: the activity reads what ran from the journal alone.
    try:
        done: CompensationOutcome = await workflow.execute_activity(
            COMPENSATE,
            CompensateInput(saga_id=saga_id, step=step.step, tool=step.tool, worker=worker),
            result_type=CompensationOutcome,
            task_queue=task_queue,
            **tool_options(inp, inp.compensation_attempts, longest_wait_seconds=10),
            # Display only (empty after continue-as-new, which drops the args).
            summary="undo " + call_summary(step.tool, report.args),
        )
    except ActivityError as exc:
        error = cut(failure_cause(exc), MAX_ERROR_CHARS)  # kept in the result: bounded
        failed = CompensationReport(step=step.step, tool=step.tool, ok=False, error=error)
        try:
            ref = await journal(
                JournalEventInput(
                    saga_id=saga_id,
                    phase=Phase.COMPENSATION_FAILED,
                    step=step.step,
                    attempt=attempt,
                    tool=step.tool,
                    input=executed_input(exc),
                    error=error[:10_000],
                )
            )
        except LOCAL_FAILURES as journal_exc:  # reported in the result and the close entry
            workflow.logger.error("COMPENSATION_FAILED not journaled: %s", journal_exc)
            return failed
        return failed.model_copy(update={"seq": ref.seq, "hash": ref.hash})
    return CompensationReport(
        step=step.step,
        tool=step.tool,
        ok=True,
        seq=done.entry.seq,
        hash=done.entry.hash,
    )
