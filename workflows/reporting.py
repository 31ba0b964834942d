"""Step reports: what the saga tells its caller about each step, bounded in size.

Reports are returned in the result and carried across continue-as-new, both Temporal
payloads capped at about 2 MB, so large arguments and results are replaced by a pointer to
the journal entry that holds them whole.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.models import ToolOutcome
    from sagacity.canonical import canonical_text
    from workflows.models import StepReport

REPORTED_RESULT_LIMIT = 500
"""Arguments and results longer than this (canonical characters) are left out of step
reports; the journal entries named by the report have them in full."""


def step_report(
    outcome: ToolOutcome,
    *,
    status: str | None = None,
    approver: str | None = None,
    error: str | None = None,
) -> StepReport:
    return StepReport(
        step=outcome.step,
        tool=outcome.tool,
        args=_reported_args(outcome.args or {}),
        tool_kind=outcome.tool_kind,
        status=status or outcome.kind.value,
        intent_seq=outcome.intent.seq if outcome.intent else None,
        intent_hash=outcome.intent.hash if outcome.intent else None,
        seq=outcome.outcome.seq if outcome.outcome else None,
        hash=outcome.outcome.hash if outcome.outcome else None,
        error=error or outcome.error,
        payload_sha256=outcome.payload_sha256,
        approver=approver,
        result=_reported(outcome),
        replayed=outcome.replayed,
    )


def _reported_args(args: dict[str, Any]) -> dict[str, Any]:
    """Arguments as step reports keep them: whole when small, else a marker (reports are
    carried across continue-as-new and returned in the result; the journal has them)."""
    if len(canonical_text(args)) <= REPORTED_RESULT_LIMIT:
        return args
    return {"_omitted": "arguments too large to report; see the step's INTENT entry"}


def _reported(outcome: ToolOutcome) -> Any:
    if outcome.result is None:
        return None
    text = canonical_text(outcome.result)
    if len(text) <= REPORTED_RESULT_LIMIT:
        return outcome.result
    seq = outcome.outcome.seq if outcome.outcome else "?"
    return f"[{len(text)} characters; the journal holds the full result at seq {seq}]"
