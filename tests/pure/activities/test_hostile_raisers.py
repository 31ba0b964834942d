"""What a tool or a compensation raises is the raiser's: the runners record it as a failure,
bounded, and never let it end the worker, break the recording, outgrow a failure's
payload or speak for the journal. Through temporalio's ActivityEnvironment, an in-memory
journal, no server."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from sagacity.activities._compensation_runner import EXECUTED_DETAIL, CompensationRunner
from sagacity.activities._models import (
    CompensateInput,
    OutcomeKind,
    RunToolInput,
    ToolCall,
    ToolOutcome,
)
from sagacity.activities._tool_runner import ToolRunner
from sagacity.journal._bounds import MAX_ERROR_CHARS
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import MemoryJournalStore
from sagacity.tools._decorators import (
    CompensationContext,
    ToolContext,
    compensable,
    compensation,
    tool,
)
from sagacity.tools._toolbox import Toolbox
from sagacity.workflows._compensator import executed_input
from tests.support.saga_activity_env import tool_outcome

SAGA = "raisers"


class Unreadable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message for you")


class Hostile:
    def __init__(self, raises: BaseException) -> None:
        self.raises = raises

    @tool
    def quit(self, ctx: ToolContext) -> None:
        raise self.raises

    @compensable("refund")
    def charge(self, amount: int, ctx: ToolContext) -> dict[str, int]:
        return {"amount": amount}

    @compensation
    def refund(self, ctx: CompensationContext) -> None:
        raise self.raises


def _store() -> MemoryJournalStore:
    store = MemoryJournalStore()
    store.append(EntryDraft.new(SAGA, Phase.SAGA_OPENED))
    return store


async def _run_tool(raises: BaseException) -> tuple[ToolOutcome, MemoryJournalStore]:
    store = _store()
    runner = ToolRunner(store, Toolbox.build(Hostile(raises)))
    request = RunToolInput(saga_id=SAGA, step=1, call=ToolCall(tool="quit"))
    opened = next(iter(store.entries(SAGA)))
    return await tool_outcome(ActivityEnvironment(), runner.run, request, opened), store


@pytest.mark.parametrize(
    ("raises", "error"),
    [
        (SystemExit("bye"), "SystemExit: bye"),
        (Unreadable(), "Unreadable: (its message could not be read: RuntimeError)"),
    ],
)
async def test_a_tool_that_exits_or_cannot_say_why_has_failed(
    raises: BaseException, error: str
) -> None:
    outcome, store = await _run_tool(raises)
    assert (outcome.kind, outcome.error) == (OutcomeKind.FAILED, error)
    assert [(e.phase, e.error) for e in store.entries(SAGA)][1:] == [
        (Phase.INTENT, None),
        (Phase.FAILED, error),
    ]


async def _compensate(raises: BaseException) -> ApplicationError:
    store = _store()
    for phase in (Phase.INTENT, Phase.EXECUTED):
        store.append(
            EntryDraft.new(
                SAGA, phase, step=1, tool="charge", input={"amount": 1250},
                result={"amount": 1250} if phase is Phase.EXECUTED else None,
            )
        )  # fmt: skip
    runner = CompensationRunner(store, Toolbox.build(Hostile(raises)))
    request = CompensateInput(saga_id=SAGA, step=1, tool="charge")
    with pytest.raises(ApplicationError) as raised:
        await ActivityEnvironment().run(runner.run, request)
    return raised.value


async def test_a_compensation_cannot_speak_for_the_journal() -> None:
    """Its own details come after the journal's evidence: what the workflow reads back as
    "the input that ran" is the journal's, whatever the compensation claims."""
    forged = {EXECUTED_DETAIL: {"seq": 2, "hash": "0" * 64, "input": {"amount": 1}}}
    error = await _compensate(ApplicationError("disputed", forged, type="Disputed"))
    assert error.details[0][EXECUTED_DETAIL]["input"] == {"amount": 1250}
    assert error.details[1] == forged  # kept, after the evidence
    assert executed_input(error) == {"amount": 1250}


async def test_a_compensation_failure_is_bounded() -> None:
    huge: Any = "x" * 3_000_000
    error = await _compensate(ApplicationError("m" * 1_000_000, huge, type="T" * 5_000))
    assert len(error.message) <= MAX_ERROR_CHARS and error.message.endswith("…")
    assert error.details[0][EXECUTED_DETAIL]["input"] == {"amount": 1250}
    assert "over the limit" in error.details[1]["details_left_out"]
    assert len(error.details) == 2 and len(error.type or "") <= 200


async def test_a_compensation_that_exits_fails_and_is_retried() -> None:
    error = await _compensate(SystemExit("bye"))
    assert (error.type, error.message, error.non_retryable) == (
        "SystemExit",
        "bye",
        False,
    )
    assert executed_input(error) == {"amount": 1250}
