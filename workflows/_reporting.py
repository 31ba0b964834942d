"""Step reports: what the saga tells its caller about each step, bounded in size.

Reports are returned in the result and carried across continue-as-new, both Temporal
payloads capped at about 2 MB, so large arguments and results are replaced by a pointer to
the journal entry that holds them whole.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sagacity.activities._models import ToolOutcome
    from sagacity.journal._bounds import cut
    from sagacity.journal._canonical import canonical_text
    from sagacity.journal._phases import StepStatus
    from sagacity.tools._decorators import ToolKind
    from sagacity.tools._payload import Payload
    from sagacity.workflows._models import (
        SagaCarry,
        SagaInput,
        SagaResult,
        SagaRunInput,
        StepReport,
    )

from sagacity.workflows._conversation import bound_messages, conversation_bytes

RESULT_BUDGET = 1024 * 1024
"""Bytes a saga's result may take (Temporal refuses payloads over about 2 MB, and a
workflow whose completion is refused never completes)."""
CARRY_BUDGET = 1536 * 1024
"""Bytes of the continue-as-new input: the start input and the saga's state together."""

REPORTED_RESULT_LIMIT = 500
"""Arguments and results longer than this (canonical characters) are left out of step
reports; the journal entries named by the report have them in full."""


def step_report(
    outcome: ToolOutcome,
    *,
    status: StepStatus | None = None,
    approver: str | None = None,
    error: str | None = None,
    asked: dict[str, Any] | None = None,
) -> StepReport:
    """The report of `outcome`: its payload's arguments, or (`asked`) the arguments the
    call was made with when no payload came back (an attempt lost with its outcome). Only
    an irreversible step's report carries its payload's hash: the hash a person was asked
    to approve (every step has a payload, but no other step was waiting for anyone)."""
    payload = outcome.payload
    return StepReport(
        step=outcome.step,
        tool=outcome.tool,
        args=_reported_args(payload) if payload is not None else _small(asked or {}),
        tool_kind=outcome.tool_kind,
        status=status or StepStatus(outcome.kind.value),
        intent_seq=outcome.intent.seq if outcome.intent else None,
        intent_hash=outcome.intent.hash if outcome.intent else None,
        seq=outcome.outcome.seq if outcome.outcome else None,
        hash=outcome.outcome.hash if outcome.outcome else None,
        error=error or outcome.error,
        payload_sha256=_asked_hash(outcome),
        approver=approver,
        result=_reported(outcome),
        replayed=outcome.replayed,
    )


def _asked_hash(outcome: ToolOutcome) -> str | None:
    if outcome.payload is None or outcome.tool_kind is not ToolKind.IRREVERSIBLE:
        return None
    return outcome.payload.sha256


_OMITTED_ARGS = {"_omitted": "arguments too large to report; see the step's INTENT entry"}


def _reported_args(payload: Payload) -> dict[str, Any]:
    """Arguments as step reports keep them: whole when small, else a marker (reports are
    carried across continue-as-new and returned in the result; the journal has them)."""
    return payload.args if len(payload.text) <= REPORTED_RESULT_LIMIT else dict(_OMITTED_ARGS)


def _small(args: dict[str, Any]) -> dict[str, Any]:
    """The same rule for arguments that never validated into a payload."""
    return args if len(canonical_text(args)) <= REPORTED_RESULT_LIMIT else dict(_OMITTED_ARGS)


def _reported(outcome: ToolOutcome) -> Any:
    if outcome.result is None:
        return None
    text = canonical_text(outcome.result)
    if len(text) <= REPORTED_RESULT_LIMIT:
        return outcome.result
    seq = outcome.outcome.seq if outcome.outcome else "?"
    return f"[{len(text)} characters; the journal holds the full result at seq {seq}]"


def compact_report(report: StepReport) -> StepReport:
    """A step report without its arguments and result, and with its error cut: the seq
    and hashes still name the journal entries that hold them whole."""
    return report.model_copy(
        update={
            "args": {},
            "result": None,
            "error": cut(report.error, 200) if report.error else report.error,
        }
    )


def _bytes(model: Any) -> int:
    return len(model.model_dump_json().encode())


def fit_result(result: SagaResult) -> SagaResult:
    """`result`, with its step reports compacted if it would be over RESULT_BUDGET."""
    if _bytes(result) <= RESULT_BUDGET:
        return result
    compacted = result.model_copy(
        update={"steps": [compact_report(r) for r in result.steps], "reports_compacted": True}
    )
    if _bytes(compacted) <= RESULT_BUDGET:
        return compacted
    # Many compensations that each failed with a long error: their errors are cut too
    # (the journal's COMPENSATION_FAILED entries keep each whole).
    return compacted.model_copy(
        update={
            "compensations": [
                c.model_copy(update={"error": cut(c.error, 200)}) if c.error else c
                for c in compacted.compensations
            ]
        }
    )


def fit_carry(inp: SagaInput, carry: SagaCarry) -> SagaRunInput | None:
    """The next run's input, sized from its real encoded bytes: the goal is not carried
    twice (the conversation holds it), step reports are compacted and the conversation
    shortened as far as needed. None when even that is over CARRY_BUDGET."""
    fields = inp.model_dump(exclude={"carry"})
    if carry.messages:
        fields.update(goal=None, system_prompt=None)
    candidate = SagaRunInput.model_validate({**fields, "carry": carry})
    if _bytes(candidate) <= CARRY_BUDGET:
        return candidate
    carry = carry.model_copy(update={"steps": [compact_report(r) for r in carry.steps]})
    budget = conversation_bytes(carry.messages)
    while True:
        candidate = SagaRunInput.model_validate({**fields, "carry": carry})
        if _bytes(candidate) <= CARRY_BUDGET:
            return candidate
        if budget <= 10_000:
            return None
        budget //= 2
        carry = carry.model_copy(update={"messages": bound_messages(carry.messages, budget)})
