"""What the saga API raises in a user's workflow.

Both are Temporal ApplicationErrors, non-retryable: left uncaught they fail the
workflow (not its workflow task, which Temporal would retry for ever) with a type and a
sentence that say what happened, and the Temporal UI shows them as the failure.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from sagacity.activities._models import TOOL_FAILED, OutcomeKind, ToolOutcome
    from sagacity.journal._phases import SagaStatus
    from sagacity.workflows._models import SagaResult

STEP_ERROR_TYPES = {
    OutcomeKind.FAILED: "StepFailed",
    OutcomeKind.REFUSED: "StepRefused",
    OutcomeKind.UNKNOWN: "StepOutcomeUnknown",
    OutcomeKind.FENCED: "StepFenced",
    OutcomeKind.NEEDS_APPROVAL: "StepRejected",
}
"""ApplicationError type of a step that did not complete, by its outcome (a step that
waited for approval and was not approved reads as rejected)."""


class StepError(ApplicationError):
    """`saga.call` did not complete its step: the tool failed, the call was refused
    (unknown tool, bad arguments), the approval was rejected or timed out, the outcome
    is unknown, or the saga had already failed (nothing ran). The saga is failed from
    here on: whether or not this is caught, leaving the `async with` compensates."""

    def __init__(self, message: str, *, outcome: ToolOutcome | None, error_type: str) -> None:
        super().__init__(message, type=error_type, non_retryable=True)
        self.outcome = outcome


def saga_failure_type(status: SagaStatus) -> str:
    """The failure type of a saga that ended `status` without completing: `Saga` and the
    status in CamelCase (SagaCompensated, SagaNeedsHuman…). The Temporal witness reads a
    failed workflow's details only under these types."""
    return f"Saga{status.value.title().replace('_', '')}"


SAGA_FAILURE_TYPES = frozenset(saga_failure_type(status) for status in SagaStatus)


class SagaFailedError(ApplicationError):
    """Raised when the saga block exits after the saga failed (even if the block caught
    the step's error): its executed steps were compensated in reverse order. `result`
    says which step failed and how each compensation went; it also travels in the
    failure's details, so a client reads it from the workflow's failure."""

    def __init__(self, result: SagaResult) -> None:
        super().__init__(
            f"saga {result.status.value.lower()}: {result.first_failure}",
            result.model_dump(mode="json"),
            type=saga_failure_type(result.status),
            non_retryable=True,
        )
        self.result = result


class SagaUsageError(ApplicationError):
    """The saga API was used in a way it cannot keep its guarantees (a second saga in one
    workflow run, a handler name the workflow already uses): the workflow fails at once,
    before any step runs, with a sentence that says what to change."""

    def __init__(self, message: str, *details: Any) -> None:
        super().__init__(message, *details, type="SagaUsageError", non_retryable=True)


def tool_failure(exc: ActivityError) -> ToolOutcome | None:
    """The outcome a run_tool activity failed with because its tool failed (journaled
    FAILED), or None for any other activity failure (timeout, cancel, a worker's error)."""
    cause = exc.cause
    if not isinstance(cause, ApplicationError) or cause.type != TOOL_FAILED:
        return None
    if not cause.details or not isinstance(cause.details[0], dict):
        return None
    return ToolOutcome.model_validate(cause.details[0])
