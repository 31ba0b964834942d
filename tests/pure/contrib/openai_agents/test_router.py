"""The router between an agent's tool tasks and the saga's own task, without a server: calls
asked for at once run one at a time in the order asked, each answered with its step's
result or StepError; a call the agent wants approved runs only if the toolbox will wait
for a human; a call abandoned while queued never runs; a failure of the saga's task stops
the agent's run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from sagacity.activities._models import PlanCheck, PlanProblem, ToolCall
from sagacity.contrib.openai_agents._router import StepRouter
from sagacity.workflows._saga import StepError


class FakeSaga:
    """What the router uses of a saga: `call`, `failure`, `fail` and `expect_approval`."""

    def __init__(self, fails: set[str] = frozenset(), raises: Exception | None = None) -> None:
        self.failure: str | None = None
        self.events: list[str] = []
        self.fails = fails
        self.raises = raises
        self.release = asyncio.Event()
        self.release.set()
        self.expected: list[str] = []

    def expect_approval(self, tools: list[str]) -> None:
        self.expected.extend(tools)

    def fail(self, reason: str) -> None:
        self.failure = self.failure or reason

    async def call(self, tool: str, /, **args: Any) -> Any:
        if self.failure is not None:
            raise StepError("already failed", outcome=None, error_type="SagaAlreadyFailed")
        self.events.append(f"start {tool}")
        await self.release.wait()
        await asyncio.sleep(0)
        self.events.append(f"end {tool}")
        if self.raises is not None:
            raise self.raises
        if tool in self.fails:
            self.fail(f"{tool} failed")
            raise StepError(f"{tool} failed", outcome=None, error_type="StepFailed")
        return {"tool": tool, **args}


class Toolbox:
    """Answers the plan check: the tools it gates, and the calls it would refuse."""

    def __init__(self, gates: set[str] = frozenset(), refuses: set[str] = frozenset()) -> None:
        self.gates, self.refuses = gates, refuses
        self.asked: list[str] = []

    async def __call__(self, call: ToolCall) -> PlanCheck:
        self.asked.append(call.tool)
        problems = (
            [PlanProblem(index=0, tool=call.tool, error="bad")] if call.tool in self.refuses else []
        )
        waits = [call.tool] if call.tool in self.gates and not problems else []
        return PlanCheck(problems=problems, waits_for_approval=waits)


def router(saga: FakeSaga, toolbox: Toolbox | None = None) -> StepRouter:
    return StepRouter(saga, toolbox or Toolbox())  # type: ignore[arg-type]


async def test_calls_asked_for_at_once_run_one_at_a_time_in_order() -> None:
    saga = FakeSaga()
    r = router(saga)

    async def agent() -> list[Any]:
        return list(
            await asyncio.gather(
                r.submit("reserve_inventory", {"qty": 2}, False),
                r.submit("charge_card", {"amount": 9}, False),
            )
        )

    results = await r.serve(agent())
    assert results == [
        {"tool": "reserve_inventory", "qty": 2},
        {"tool": "charge_card", "amount": 9},
    ]
    assert saga.events == [
        "start reserve_inventory", "end reserve_inventory", "start charge_card", "end charge_card",
    ]  # fmt: skip


async def test_a_failed_step_is_the_tools_error_and_later_calls_run_nothing() -> None:
    saga = FakeSaga(fails={"ship_order"})
    r = router(saga)

    async def agent() -> list[str]:
        seen = []
        for tool in ("charge_card", "ship_order", "refund"):
            try:
                await r.submit(tool, {}, False)
                seen.append(f"{tool} ok")
            except StepError as exc:
                seen.append(f"{tool} {exc.type}")
        return seen

    assert await r.serve(agent()) == [
        "charge_card ok", "ship_order StepFailed", "refund SagaAlreadyFailed",
    ]  # fmt: skip
    assert saga.failure == "ship_order failed"


async def test_an_approval_the_toolbox_would_not_ask_for_fails_the_saga_and_runs_nothing() -> None:
    saga = FakeSaga()
    r = router(saga, Toolbox(gates=set()))

    async def agent() -> None:
        await r.submit("charge_card", {"amount": 9}, True)

    with pytest.raises(StepError) as refused:
        await r.serve(agent())
    assert refused.value.type == "StepRefused"
    assert saga.events == []  # nothing ran
    assert saga.failure is not None and "needs_approval" in saga.failure
    assert "@irreversible" in saga.failure


async def test_a_gated_tool_runs_once_the_toolbox_says_it_waits_and_is_asked_once() -> None:
    saga = FakeSaga()
    toolbox = Toolbox(gates={"send_wire_transfer"})
    r = router(saga, toolbox)

    async def agent() -> None:
        await r.submit("send_wire_transfer", {"amount": 1}, True)
        await r.submit("send_wire_transfer", {"amount": 2}, True)

    await r.serve(agent())
    assert toolbox.asked == ["send_wire_transfer"]
    assert saga.expected == ["send_wire_transfer"]
    assert saga.events.count("end send_wire_transfer") == 2


async def test_a_gated_call_the_toolbox_refuses_goes_to_the_saga_to_be_refused_there() -> None:
    saga = FakeSaga()
    r = router(saga, Toolbox(refuses={"send_wire_transfer"}))

    async def agent() -> None:
        await r.submit("send_wire_transfer", {"amount": "lots"}, True)

    await r.serve(agent())
    assert saga.events == ["start send_wire_transfer", "end send_wire_transfer"]
    assert saga.failure is None  # the (fake) saga's own refusal decides


async def test_ungated_calls_are_not_checked() -> None:
    toolbox = Toolbox()
    r = router(FakeSaga(), toolbox)

    async def agent() -> None:
        await r.submit("charge_card", {}, False)

    await r.serve(agent())
    assert toolbox.asked == []


async def test_a_call_abandoned_while_queued_never_runs() -> None:
    saga = FakeSaga()
    saga.release.clear()  # the first step holds the saga's task
    r = router(saga)

    async def agent() -> str:
        first = asyncio.ensure_future(r.submit("charge_card", {}, False))
        second = asyncio.ensure_future(r.submit("ship_order", {}, False))
        while saga.events != ["start charge_card"]:
            await asyncio.sleep(0)
        second.cancel()  # e.g. the SDK cancels a sibling tool's task
        saga.release.set()
        await first
        return "finished"

    assert await r.serve(agent()) == "finished"
    assert saga.events == ["start charge_card", "end charge_card"]


async def test_the_runs_error_is_raised_in_the_saga_task() -> None:
    r = router(FakeSaga())

    async def agent() -> None:
        raise RuntimeError("agent bug")

    with pytest.raises(RuntimeError, match="agent bug"):
        await r.serve(agent())


async def test_a_failure_of_the_saga_task_stops_the_agent_run() -> None:
    usage = ApplicationError("saga closed", type="SagaUsageError")
    r = router(FakeSaga(raises=usage))
    stopped = asyncio.Event()

    async def agent() -> None:
        try:
            await r.submit("charge_card", {}, False)
        except asyncio.CancelledError:
            stopped.set()
            raise

    with pytest.raises(ApplicationError, match="saga closed"):
        await r.serve(agent())
    assert stopped.is_set()
