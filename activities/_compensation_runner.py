"""The journaled compensation of one executed step.

The step is fenced before the compensation runs, so a late forward attempt (Temporal
cannot stop an activity that timed out) sees the tombstone and refuses to apply.

Only what the journal says was EXECUTED is undone, with the input and result of that
entry: the request names the saga, step and tool and nothing else is taken from it. No
EXECUTED entry for the step, or one naming another tool, fails closed (non-retryable,
the saga ends COMPENSATION_FAILED and needs a human): a workflow's record of a step —
carried through continue-as-new, perhaps forged — is never a reason to run a refund.

A COMPENSATED entry already journaled means an earlier attempt finished: it is returned,
never run twice. A compensation that raises is retried by its own retry policy; when the
workflow gives up it journals COMPENSATION_FAILED with the EXECUTED entry's input, which
every failure raised here carries as a detail (`EXECUTED_DETAIL`), and which every
heartbeat carries once the entry is read — so a compensation that timed out (no failure
of ours to carry it) still leaves it in the timeout's last heartbeat details. Journal
outages are retried in place, so they never use up the compensation's own attempts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from sagacity._errors import BoundsError, SagacityError
from sagacity.activities._journal_io import entry_ref, retrying
from sagacity.activities._liveness import heartbeating
from sagacity.activities._models import CompensateInput, CompensationOutcome
from sagacity.journal._bounds import (
    MAX_ERROR_CHARS,
    MAX_TEXT_ECHO,
    check_value,
    cut,
    exception_message,
)
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase
from sagacity.stores._base import JournalStore
from sagacity.tools._decorators import CompensationContext, idempotency_key
from sagacity.tools._toolbox import Toolbox

__all__ = [
    "EXECUTED_DETAIL",
    "NOT_EXECUTED_IN_JOURNAL",
    "TOOL_MISMATCH",
    "CompensationRunner",
]

T = TypeVar("T")
NOT_EXECUTED_IN_JOURNAL = "NotExecutedInJournal"
"""Error type: the journal holds no EXECUTED entry for the step to undo."""
TOOL_MISMATCH = "ExecutedToolMismatch"
"""Error type: the journal's EXECUTED entry for the step names another tool."""
EXECUTED_DETAIL = "executed"
"""Key of the failure detail carrying the EXECUTED entry ({"seq", "hash", "input"}); the
workflow's compensator reads the same key (workflows/_compensator.py)."""


MAX_DETAILS_BYTES = 16_384
"""A compensation's own failure details kept beside the evidence, at most (as JSON)."""


def _bounded(details: Sequence[Any]) -> list[Any]:
    """The compensation's own failure details, or a note that they were left out: too
    large or too deep to carry in a failure (the message still says what went wrong)."""
    try:
        check_value(
            list(details), "the compensation's failure details", max_bytes=MAX_DETAILS_BYTES
        )
    except (BoundsError, TypeError, ValueError) as exc:
        return [{"details_left_out": cut(str(exc), MAX_TEXT_ECHO)}]
    return list(details)


def _evidence(executed: JournalEntry) -> dict[str, Any]:
    return {EXECUTED_DETAIL: {"seq": executed.seq, "hash": executed.hash, "input": executed.input}}


def _echo(name: str) -> str:
    """A requested tool name as echoed in an error: cut, since the request may be forged."""
    return repr(name[:MAX_TEXT_ECHO])


def _missing(req: CompensateInput, prior: list[JournalEntry]) -> ApplicationError:
    held = ", ".join(f"{e.phase.value} (seq {e.seq})" for e in prior) or "nothing"
    return ApplicationError(
        f"saga {req.saga_id!r} step {req.step} ({_echo(req.tool)}): the journal holds no EXECUTED "
        f"entry for this step (it holds {held}), so there is nothing it says ran and nothing "
        "is undone from any other record. A human must check whether the tool took effect "
        "and undo it by hand.",
        type=NOT_EXECUTED_IN_JOURNAL,
        non_retryable=True,
    )


def _mismatch(req: CompensateInput, executed: JournalEntry) -> ApplicationError:
    return ApplicationError(
        f"saga {req.saga_id!r} step {req.step}: compensation of {_echo(req.tool)} was requested, "
        f"but the journal's EXECUTED entry (seq {executed.seq}) names {executed.tool!r}; "
        "refusing to undo with another tool's compensation. A human must check the step.",
        _evidence(executed),
        type=TOOL_MISMATCH,
        non_retryable=True,
    )


class CompensationRunner:
    def __init__(self, store: JournalStore, toolbox: Toolbox) -> None:
        self.store = store
        self.toolbox = toolbox

    async def run(self, req: CompensateInput) -> CompensationOutcome:
        beat: list[Any] = ["running"]
        return await heartbeating(self._run(req, beat), beat)

    async def _run(self, req: CompensateInput, beat: list[Any]) -> CompensationOutcome:
        await retrying(self.store.fence, req.saga_id, req.step)
        prior = await retrying(self.store.step_entries, req.saga_id, req.step)
        executed = next((e for e in prior if e.phase is Phase.EXECUTED), None)
        if executed is None:
            raise _missing(req, prior)
        if executed.tool != req.tool:
            raise _mismatch(req, executed)
        done = next((e for e in prior if e.phase is Phase.COMPENSATED), None)
        if done is not None:
            return CompensationOutcome(step=req.step, tool=req.tool, entry=entry_ref(done))
        evidence = _evidence(executed)
        beat[:] = [evidence]
        activity.heartbeat(*beat)  # at once: a timeout from here on still carries it
        try:
            spec = self.toolbox.get(executed.tool)
        except SagacityError as exc:
            raise ApplicationError(
                str(exc), evidence, type="UnknownTool", non_retryable=True
            ) from exc
        if spec.compensation is None:
            raise ApplicationError(
                f"tool {req.tool!r} declares no compensation",
                evidence,
                type="NoCompensation",
                non_retryable=True,
            )
        step_input = executed.input
        if not isinstance(step_input, dict):  # a tool's validated arguments are an object
            raise ApplicationError(
                f"saga {req.saga_id!r} step {req.step}: the EXECUTED entry (seq "
                f"{executed.seq}) holds no argument object; a human must check the step",
                evidence,
                type="ExecutedInputInvalid",
                non_retryable=True,
            )
        # The journal's EXECUTED entry is the only authority on what ran and what it
        # returned (the workflow holds at most a copy, cut for the model).
        ctx = CompensationContext(
            saga_id=req.saga_id,
            step=req.step,
            tool=executed.tool,
            input=step_input,
            result=executed.result,
            idempotency_key=idempotency_key(req.saga_id, req.step),
            attempt=activity.info().attempt,
            heartbeat=activity.heartbeat,
        )
        try:
            await spec.compensation.invoke(ctx)
        except asyncio.CancelledError:
            raise
        except ApplicationError as exc:  # the compensation's own words and retry choice
            # The journal's evidence first (what the workflow reads back), then the
            # compensation's own details while they stay small: a failure is journaled and
            # carried in history, and must never outgrow Temporal's payload limits.
            raise ApplicationError(
                cut(exc.message, MAX_ERROR_CHARS),
                evidence,
                *_bounded(exc.details),
                type=cut(exc.type or "", MAX_TEXT_ECHO) or None,
                non_retryable=exc.non_retryable,
            ) from exc
        except (Exception, SystemExit) as exc:  # retried by the compensation's retry policy
            message = cut(exception_message(exc), MAX_ERROR_CHARS) or type(exc).__name__
            raise ApplicationError(message, evidence, type=type(exc).__name__) from exc
        entry = await retrying(
            self.store.append,
            EntryDraft.new(
                req.saga_id,
                Phase.COMPENSATED,
                step=req.step,
                tool=req.tool,
                input={"compensation": spec.compensation.name},
            ),
        )
        return CompensationOutcome(step=req.step, tool=req.tool, entry=entry_ref(entry))
