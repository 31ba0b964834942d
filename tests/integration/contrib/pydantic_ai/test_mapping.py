"""The adapter's mapping, without a server: real Pydantic AI agent runs (scripted
FunctionModel) whose SagaToolset calls reach a desk the test answers in the saga's place.
The tools' Pydantic AI bodies raise if they ever run, so every call seen here went to the
desk, and nothing else."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

import pytest
from pydantic_ai import Agent, FunctionToolset
from pydantic_ai.durable_exec.temporal import AgentPlugin, TemporalAgent
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ExternalToolset, PrefixedToolset
from temporalio import activity

from sagacity.contrib.pydantic_ai import SagaToolset, SagaToolsetError, through_saga
from sagacity.contrib.pydantic_ai._desk import ToolDesk, ToolRequest, at_desk
from sagacity.contrib.pydantic_ai._toolset import APPROVAL_DECLARED, SagaSteps, as_step
from sagacity.examples.pydantic_ai_order import clerk, shop_tools
from sagacity.workflows._saga import Saga, SagaUsageError
from tests.integration.contrib.pydantic_ai.agents import large_charge

Answer = Callable[[ToolRequest], Any]


def scripted(*turns: list[ToolCallPart]) -> tuple[FunctionModel, list[list[ModelMessage]]]:
    """A model that makes `turns` one per request, then answers "done"; and what it saw."""
    seen: list[list[ModelMessage]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        made = sum(isinstance(m, ModelResponse) for m in messages)
        if made < len(turns):
            return ModelResponse(parts=list(turns[made]))
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond), seen


async def at_the_desk(agent: Agent[None, str], answer: Answer) -> tuple[str, list[ToolRequest]]:
    """Run `agent` with its tool calls going to a desk answered by `answer` (a value, or
    an exception to raise in the call); the requests in the order they arrived. Each call
    must arrive alone: a saga takes one step at a time."""
    desk = ToolDesk(cast(Saga, None))  # the test answers in the saga's place
    with at_desk(desk):
        run = asyncio.create_task(agent.run("go"))
    requests: list[ToolRequest] = []
    while not run.done():
        await asyncio.sleep(0)
        if desk.waiting:
            request = desk.waiting.popleft()
            assert not desk.waiting, "two calls at the desk at once"
            requests.append(request)
            reply = answer(request)
            if isinstance(reply, BaseException):
                request.reply.set_exception(reply)
            else:
                request.reply.set_result(reply)
    return run.result().output, requests


def agent_with(toolset: SagaToolset[None], model: FunctionModel) -> Agent[None, str]:
    return Agent(model, toolsets=[toolset])


def ok(request: ToolRequest) -> dict[str, Any]:
    return {"ran": request.tool}


RESERVE = ToolCallPart("reserve_inventory", {"sku": "widget", "qty": 2})
CHARGE = ToolCallPart("charge_card", {"amount": 1250})
WIRE = ToolCallPart("send_wire_transfer", {"iban": "DE89370400440532013000", "amount": 5000})


async def test_calls_reach_the_saga_one_at_a_time_in_the_order_the_model_made_them() -> None:
    model, _ = scripted([RESERVE, CHARGE])  # one response, two calls Pydantic AI would parallelize
    said, requests = await at_the_desk(agent_with(SagaToolset(shop_tools), model), ok)

    assert said == "done"
    assert [(r.tool, r.args, r.approval) for r in requests] == [
        ("reserve_inventory", {"sku": "widget", "qty": 2}, False),
        ("charge_card", {"amount": 1250, "currency": "EUR", "card": "tok_visa"}, False),
    ]  # Pydantic AI fills in its declaration's defaults: check_agent compares them


async def test_requires_approval_goes_to_the_saga_gate_not_to_deferred_requests() -> None:
    model, _ = scripted([WIRE])
    said, requests = await at_the_desk(agent_with(SagaToolset(shop_tools), model), ok)

    assert said == "done"  # the run was not ended with DeferredToolRequests
    assert [(r.tool, r.approval) for r in requests] == [("send_wire_transfer", True)]


async def test_an_approval_required_toolset_is_asked_call_by_call() -> None:
    small = ToolCallPart("charge_card", {"amount": 900})
    model, _ = scripted([RESERVE], [small], [CHARGE])
    toolset = SagaToolset(shop_tools.approval_required(large_charge))
    _, requests = await at_the_desk(agent_with(toolset, model), ok)

    assert [(r.tool, r.args.get("amount"), r.approval) for r in requests] == [
        ("reserve_inventory", None, False),
        ("charge_card", 900, False),
        ("charge_card", 1250, True),
    ]


async def test_a_prefixed_tool_reaches_the_saga_under_its_toolset_name() -> None:
    model, seen = scripted([ToolCallPart("shop_charge_card", {"amount": 1250})])
    said, requests = await at_the_desk(
        agent_with(SagaToolset(shop_tools.prefixed("shop")), model), ok
    )

    assert said == "done" and [r.tool for r in requests] == ["charge_card"]
    [returned] = [p for p in seen[1][-1].parts if isinstance(p, ToolReturnPart)]
    assert (returned.tool_name, returned.content) == ("shop_charge_card", {"ran": "charge_card"})


async def test_a_step_that_did_not_complete_is_a_failed_call_the_model_sees() -> None:
    model, seen = scripted([CHARGE])
    said, _ = await at_the_desk(
        agent_with(SagaToolset(shop_tools), model), lambda r: ToolFailed("step 1 failed")
    )

    assert said == "done"  # the model carried on, as models do
    last = seen[-1][-1]
    assert isinstance(last, ModelRequest)
    [returned] = [p for p in last.parts if isinstance(p, ToolReturnPart)]
    assert (returned.outcome, returned.content) == ("failed", "step 1 failed")


async def test_a_call_outside_through_saga_runs_nothing_and_says_how_to_fix_it() -> None:
    model, _ = scripted([CHARGE])
    with pytest.raises(SagaUsageError, match="outside through_saga"):
        await agent_with(SagaToolset(shop_tools), model).run("go")


async def test_through_saga_takes_the_runs_coroutine() -> None:
    with pytest.raises(SagaUsageError, match="coroutine"):
        await through_saga(cast(Saga, None), cast(Any, "agent.run"))


@pytest.mark.parametrize(
    ("kind", "approval"), [("function", False), ("unapproved", True), ("external", None)]
)
def test_the_run_sees_steps_as_sequential_function_tools(kind: Any, approval: bool | None) -> None:
    declared = ToolDefinition(name="t", kind=kind, metadata={"team": "shop"})
    step = as_step(declared)
    if approval is None:  # resolved outside the run by design: left to Pydantic AI
        assert step == declared
        return
    assert (step.kind, step.sequential) == ("function", True)
    assert step.metadata == {"team": "shop", APPROVAL_DECLARED: approval}


def test_function_toolsets_become_steps_under_their_wrappers_and_external_ones_stay() -> None:
    prefixed = FunctionToolset[None](id="a").prefixed("a")
    toolset = SagaToolset(prefixed)
    assert isinstance(toolset.wrapped, PrefixedToolset) and toolset.wrapped is not prefixed
    assert isinstance(toolset.wrapped.wrapped, SagaSteps)
    assert isinstance(prefixed.wrapped, FunctionToolset)  # the agent's own object is untouched
    external = ExternalToolset[None]([ToolDefinition(name="ask_a_human")])
    assert SagaToolset(external).wrapped is external


def test_a_leaf_that_lists_and_runs_its_own_tools_is_refused() -> None:
    class Server(AbstractToolset[None]):
        """Lists and runs its tools itself, as an MCP server does."""

        @property
        def id(self) -> str:
            return "server"

        async def get_tools(self, ctx: Any) -> dict[str, Any]:
            return {}

        async def call_tool(self, *args: Any) -> Any:
            return None

    with pytest.raises(SagaToolsetError, match=r"\(Server\) is not a function toolset"):
        SagaToolset(Server())


def test_a_run_copy_of_the_toolset_wraps_its_leaves_once() -> None:
    toolset = SagaToolset(shop_tools)
    again = replace(toolset, wrapped=toolset.wrapped)  # what for_run does
    assert isinstance(again.wrapped, SagaSteps) and again.wrapped.wrapped is shop_tools


def test_pydantic_ai_registers_no_activity_for_the_saga_tools() -> None:
    names = [activity._Definition.must_from_callable(f).name for f in AgentPlugin(clerk).activities]
    assert "agent__order_clerk__model_request" in names
    assert not [n for n in names if "shop" in n]


def test_nor_does_the_older_temporal_agent() -> None:
    agent = Agent(scripted()[0], name="older", toolsets=[SagaToolset(shop_tools)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # it is deprecated, and still in use
        older = TemporalAgent(agent)
    names = [activity._Definition.must_from_callable(f).name for f in older.temporal_activities]
    assert "agent__older__model_request" in names
    assert not [n for n in names if "shop" in n]


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_sagacity_never_imports_pydantic_ai_and_the_adapter_names_its_extra() -> None:
    quiet = _python("import sys, sagacity, sagacity.contrib; print('pydantic_ai' in sys.modules)")
    assert quiet.stdout.strip() == "False", quiet.stderr
    missing = _python(
        "import sys; sys.modules['pydantic_ai'] = None; import sagacity.contrib.pydantic_ai"
    )
    assert missing.returncode != 0
    assert "pip install 'sagacity[pydantic-ai]'" in missing.stderr
