"""One planner: the workflow's compensator and the public `plan_compensation` agree.

The same history is produced once, for real: each step runs through the tool runner
activity (temporalio's ActivityEnvironment, an in-memory journal), which both journals
it and returns the ToolOutcome the workflow records. The step reports the saga keeps of
them go through the compensator's path (`plan_reports`), the journal's entries through
`plan_compensation`,
and the two plans must be the same set in the same order: reverse seq of EXECUTED steps
of compensable tools, unknown outcomes fenced and never compensated.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from sagacity.activities._models import OutcomeKind, RunToolInput, ToolCall, ToolOutcome
from sagacity.activities._tool_runner import ToolRunner
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import MemoryJournalStore
from sagacity.tools._compensation import CompensationPlan, compensable_in, plan_compensation
from sagacity.tools._decorators import (
    CompensationContext,
    ToolContext,
    compensable,
    compensation,
    tool,
)
from sagacity.tools._toolbox import Toolbox
from sagacity.workflows._compensator import plan_reports
from sagacity.workflows._reporting import compact_report, step_report
from tests.support.saga_activity_env import tool_outcome

SAGA = "saga-planner"


class Shop:
    @compensable("refund")
    def charge(self, amount: int, ctx: ToolContext, fail: bool = False) -> dict[str, Any]:
        if fail:
            raise RuntimeError("card declined")
        return {"charge": ctx.idempotency_key, "amount": amount}

    @compensation
    def refund(self, ctx: CompensationContext) -> None:
        """Never called here: only planning is compared."""

    @tool
    def note(self, text: str) -> str:
        return text


# What each step of a history does: ran (compensable or plain), failed, ended with an
# unknown outcome (an earlier attempt's INTENT and no outcome), or was refused.
KINDS = {
    "charge": ToolCall(tool="charge", args={"amount": 5}),
    "note": ToolCall(tool="note", args={"text": "hi"}),
    "fails": ToolCall(tool="charge", args={"amount": 5, "fail": True}),
    "unknown": ToolCall(tool="charge", args={"amount": 7}),
    "refused": ToolCall(tool="no_such_tool", args={}),
}
HISTORIES = [
    ["charge", "note", "charge"],
    ["charge", "fails"],
    ["charge", "unknown", "note", "charge", "refused"],
    ["unknown", "unknown"],
    ["note", "refused", "fails", "charge", "unknown", "charge", "note"],
    ["refused"],
]


async def run_history(kinds: list[str]) -> tuple[MemoryJournalStore, list[ToolOutcome]]:
    store = MemoryJournalStore()
    toolbox = Toolbox.build(Shop())
    runner = ToolRunner(store, toolbox)
    opened = store.append(EntryDraft.new(SAGA, Phase.SAGA_OPENED))
    outcomes = []
    for step, kind in enumerate(kinds, start=1):
        call = KINDS[kind]
        env = ActivityEnvironment()
        if kind == "unknown":  # attempt 1 journaled INTENT and vanished; this is attempt 2
            store.begin_step(
                EntryDraft.new(SAGA, Phase.INTENT, step=step, attempt=1, tool=call.tool,
                               input=call.args)
            )  # fmt: skip
            env.info = dataclasses.replace(env.info, attempt=2)
        outcome = await tool_outcome(
            env, runner.run, RunToolInput(saga_id=SAGA, step=step, call=call), opened
        )
        outcomes.append(outcome)
    return store, outcomes


def summary(plan: CompensationPlan) -> tuple[list[tuple[int, str, int]], list[int], list[int]]:
    return (
        [(s.step, s.tool, s.seq) for s in plan.to_compensate],
        [u.step for u in plan.unknown],
        [s.step for s in plan.not_compensable],
    )


@pytest.mark.parametrize("kinds", HISTORIES, ids=["-".join(h) for h in HISTORIES])
async def test_the_compensator_and_the_public_planner_make_the_same_plan(kinds) -> None:
    store, outcomes = await run_history(kinds)
    expected_kinds = {
        "charge": OutcomeKind.EXECUTED,
        "note": OutcomeKind.EXECUTED,
        "fails": OutcomeKind.FAILED,
        "unknown": OutcomeKind.UNKNOWN,
        "refused": OutcomeKind.REFUSED,
    }
    assert [o.kind for o in outcomes] == [expected_kinds[k] for k in kinds]

    from_journal = plan_compensation(store.entries(SAGA), compensable_in(Toolbox.build(Shop())))
    from_workflow = plan_reports(step_report(o) for o in outcomes)

    assert summary(from_workflow) == summary(from_journal)
    undo = [s.step for s in from_journal.to_compensate]
    charged = [i for i, k in enumerate(kinds, start=1) if k == "charge"]
    assert undo == sorted(charged, reverse=True)
    assert [u.step for u in from_journal.unknown] == [
        i for i, k in enumerate(kinds, start=1) if k == "unknown"
    ]
    # The journal's plan carries what ran: the compensation's input and result.
    for step in from_journal.to_compensate:
        assert isinstance(step.input, dict) and step.input["amount"] == 5
        assert isinstance(step.result, dict) and step.result["amount"] == 5


async def test_after_continue_as_new_thecompact_reported_reports_still_plan_the_same() -> None:
    """A carry may compact step reports (no args, results or long errors); the plan
    (which needs none of them) is unchanged."""
    store, outcomes = await run_history(["charge", "unknown", "note", "charge", "fails"])
    carried = [compact_report(step_report(o)) for o in outcomes]
    assert all(r.args == {} and r.result is None for r in carried)
    from_journal = plan_compensation(store.entries(SAGA), compensable_in(Toolbox.build(Shop())))
    assert summary(plan_reports(carried)) == summary(from_journal)


async def test_a_compensated_step_is_not_planned_again_from_the_journal() -> None:
    store, _ = await run_history(["charge", "charge"])
    store.append(EntryDraft.new(SAGA, Phase.COMPENSATED, step=2, tool="charge"))
    plan = plan_compensation(store.entries(SAGA), compensable_in(Toolbox.build(Shop())))
    assert [s.step for s in plan.to_compensate] == [1]


async def test_without_the_toolbox_every_executed_tool_is_assumed_compensable() -> None:
    store, _ = await run_history(["charge", "note"])
    assert [s.step for s in plan_compensation(store.entries(SAGA)).to_compensate] == [2, 1]
