"""The adapter's mapping of an Agents SDK agent onto saga steps, without a server: which
tools convert and which are refused, what a converted tool hands the saga (name,
arguments, whether a human must approve), what the model reads back, and the check of
an agent's tools against a toolbox."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import Agent, FunctionTool, RunContextWrapper, WebSearchTool, function_tool, handoff
from agents.mcp import MCPServerStdio
from agents.tool_context import ToolContext
from pydantic import BaseModel
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.openai_agents.workflow import activity_as_tool

from sagacity.activities._models import INVALID_ARGUMENTS_KEY
from sagacity.contrib.openai_agents import AgentToolsError, check_agent_tools
from sagacity.contrib.openai_agents._router import StepRouter
from sagacity.contrib.openai_agents._runner import (
    AGENT_RUN_FAILED,
    final_answer,
    run_agent,
    run_failure,
)
from sagacity.contrib.openai_agents._tools import Gate, saga_agent
from sagacity.examples.openai_agents_order import order_agent
from sagacity.tools._decorators import (
    CompensationContext,
    compensable,
    compensation,
    irreversible,
    tool,
)
from sagacity.tools._toolbox import Toolbox
from sagacity.workflows._saga import StepError


@function_tool
def charge_card(amount: int) -> str:
    """Charge the card."""
    raise AssertionError("a converted tool's body never runs")


@function_tool(needs_approval=True)
def send_wire_transfer(iban: str, amount: int) -> str:
    """Wire money."""
    raise AssertionError("a converted tool's body never runs")


async def above_1000(ctx: RunContextWrapper[Any], args: dict[str, Any], call_id: str) -> bool:
    return bool(args["amount"] > 1000)


@function_tool(needs_approval=above_1000)
def refund(amount: int) -> str:
    """Refund, approved above 1000."""
    raise AssertionError("a converted tool's body never runs")


@function_tool(failure_error_function=None)
def strict_charge(amount: int) -> str:
    """A tool whose failures the SDK raises instead of telling the model."""
    raise AssertionError("a converted tool's body never runs")


@function_tool(timeout=5)
async def slow_charge(amount: int) -> str:
    """A tool with the SDK's own timeout."""
    raise AssertionError("a converted tool's body never runs")


class Steps:
    """Records what converted tools submit, and answers with a result or an error."""

    def __init__(self, answer: Any = None, error: Exception | None = None) -> None:
        self.calls: list[tuple[str, dict[str, Any], bool]] = []
        self.queued: list[str] = []
        """The order calls were handed to the saga (its queue's order)."""
        self.answer = answer if answer is not None else {"ok": True}
        self.error = error

    async def __call__(self, name: str, args: dict[str, Any], gate: Gate) -> Any:
        self.queued.append(name)
        gated = gate if isinstance(gate, bool) else await gate()
        self.calls.append((name, args, gated))
        if self.error is not None:
            raise self.error
        return self.answer


def converted(agent: Agent[Any], steps: Steps) -> dict[str, FunctionTool]:
    copy = saga_agent(agent, steps)
    return {t.name: t for t in copy.tools if isinstance(t, FunctionTool)}


async def invoke(t: FunctionTool, arguments: str) -> Any:
    ctx = ToolContext(
        context=None, tool_name=t.name, tool_call_id="call-1", tool_arguments=arguments
    )
    return await t.on_invoke_tool(ctx, arguments)


def shop_agent(*tools: Any) -> Agent[Any]:
    return Agent(name="shop", tools=list(tools))


# ---- conversion ---------------------------------------------------------------------------


async def test_a_tool_call_becomes_a_step_of_the_same_name_and_arguments() -> None:
    steps = Steps(answer={"charge": "k1", "amount": 250})
    tools = converted(shop_agent(charge_card), steps)

    output = await invoke(tools["charge_card"], '{"amount": 250}')

    assert steps.calls == [("charge_card", {"amount": 250}, False)]
    assert output == '{"charge": "k1", "amount": 250}'  # JSON for the model, not a repr
    assert tools["charge_card"].params_json_schema == charge_card.params_json_schema


async def test_a_text_result_reaches_the_model_as_it_is() -> None:
    tools = converted(shop_agent(charge_card), Steps(answer="charged"))
    assert await invoke(tools["charge_card"], '{"amount": 1}') == "charged"


async def test_needs_approval_goes_to_the_saga_instead_of_interrupting_the_run() -> None:
    steps = Steps()
    tools = converted(shop_agent(send_wire_transfer), steps)

    assert tools["send_wire_transfer"].needs_approval is False  # the SDK never interrupts
    await invoke(tools["send_wire_transfer"], '{"iban": "DE89", "amount": 5}')
    assert steps.calls == [("send_wire_transfer", {"iban": "DE89", "amount": 5}, True)]


async def test_a_needs_approval_policy_is_asked_per_call() -> None:
    steps = Steps()
    tools = converted(shop_agent(refund), steps)

    await invoke(tools["refund"], '{"amount": 5}')
    await invoke(tools["refund"], '{"amount": 5000}')
    assert [gated for _, _, gated in steps.calls] == [False, True]


async def test_arguments_that_are_not_an_object_go_to_the_saga_as_the_refused_marker() -> None:
    steps = Steps()
    tools = converted(shop_agent(refund, charge_card), steps)

    await invoke(tools["refund"], "[1, 2]")
    await invoke(tools["charge_card"], "{not json")
    assert steps.calls == [
        ("refund", {INVALID_ARGUMENTS_KEY: "[1, 2]"}, True),  # no policy can judge it: ask
        ("charge_card", {INVALID_ARGUMENTS_KEY: "{not json"}, False),
    ]


async def test_a_failed_step_is_handed_to_the_model_by_the_tools_own_error_function() -> None:
    failed = StepError(
        "step 3 (ship_order) failed: carrier refused", outcome=None, error_type="StepFailed"
    )
    tools = converted(shop_agent(charge_card), Steps(error=failed))

    output = await invoke(tools["charge_card"], '{"amount": 1}')
    assert isinstance(output, str) and "carrier refused" in output


async def test_a_tool_without_an_error_function_raises_the_step_error() -> None:
    failed = StepError("refused", outcome=None, error_type="StepRefused")
    tools = converted(shop_agent(strict_charge), Steps(error=failed))

    with pytest.raises(StepError):
        await invoke(tools["strict_charge"], '{"amount": 1}')


@activity.defn
async def ship_order(address: str) -> str:
    """Ship the order."""
    raise AssertionError("the activity never runs: the toolbox's tool does")


async def test_a_tool_made_by_activity_as_tool_is_routed_to_the_toolbox_too() -> None:
    steps = Steps()
    tools = converted(shop_agent(activity_as_tool(ship_order)), steps)

    await invoke(tools["ship_order"], '{"address": "1 Main St"}')
    assert steps.calls == [("ship_order", {"address": "1 Main St"}, False)]


def test_the_original_agent_is_left_as_it_was() -> None:
    agent = shop_agent(charge_card)
    saga_agent(agent, Steps())
    assert agent.tools == [charge_card] and charge_card.needs_approval is False


async def test_agents_handed_off_to_are_converted_once_even_in_a_cycle() -> None:
    billing = Agent(name="billing", tools=[charge_card])
    front = Agent(name="front", handoffs=[billing])
    billing.handoffs = [front]

    copy = saga_agent(front, Steps())
    [billing_copy] = copy.handoffs
    assert isinstance(billing_copy, Agent) and billing_copy is not billing
    assert billing_copy.handoffs == [copy]  # the cycle closes on the copies
    assert billing_copy.tools[0] is not charge_card


async def test_an_agent_reached_through_a_handoff_object_is_converted_when_handed_to() -> None:
    steps = Steps()
    billing = Agent(name="billing", tools=[charge_card])
    front = Agent(name="front", handoffs=[handoff(billing)])

    [wrapped] = saga_agent(front, steps).handoffs
    assert not isinstance(wrapped, Agent)
    ctx = RunContextWrapper(context=None)
    target = await wrapped.on_invoke_handoff(ctx, "{}")
    assert target is not billing
    [tool_copy] = [t for t in target.tools if isinstance(t, FunctionTool)]
    await invoke(tool_copy, '{"amount": 3}')
    assert steps.calls == [("charge_card", {"amount": 3}, False)]


async def test_calls_reach_the_saga_in_the_models_order_even_when_a_policy_awaits() -> None:
    """The SDK runs the calls of one response as concurrent tasks: a policy that awaits
    must not let a later call overtake (a rejected wire must stop a charge asked after
    it). Found by an outside attack."""

    async def slow_policy(ctx: RunContextWrapper[Any], args: dict[str, Any], call_id: str) -> bool:
        for _ in range(3):
            await asyncio.sleep(0)
        return True

    @function_tool(needs_approval=slow_policy, name_override="send_wire_transfer")
    def wire(iban: str, amount: int) -> str:
        """Wire money."""
        raise AssertionError("a converted tool's body never runs")

    steps = Steps()
    tools = converted(shop_agent(wire, charge_card), steps)
    await asyncio.gather(
        invoke(tools["send_wire_transfer"], '{"iban": "DE89", "amount": 5}'),
        invoke(tools["charge_card"], '{"amount": 2500}'),
    )
    assert steps.queued == ["send_wire_transfer", "charge_card"]
    assert ("send_wire_transfer", {"iban": "DE89", "amount": 5}, True) in steps.calls


def test_a_handoff_objects_agent_is_checked_before_anything_runs() -> None:
    """`handoff(agent)` keeps its agent: an unconvertible tool there is refused at worker
    start and before the run, not when the model hands off (found by an outside attack)."""
    helper = Agent(name="helper").as_tool(tool_name="helper", tool_description="d")
    back = Agent(name="back", tools=[charge_card, helper])
    front = Agent(name="front", tools=[charge_card], handoffs=[handoff(back)])
    with pytest.raises(AgentToolsError) as refused:
        saga_agent(front, Steps())
    assert "runs another agent" in refused.value.problems[0]
    from sagacity.examples.orders import Shop

    class NoFile(Shop):
        def __init__(self) -> None:  # the declarations only: no shop database
            pass

    with pytest.raises(AgentToolsError, match="runs another agent"):
        check_agent_tools(front, Toolbox.build(NoFile()))


async def test_a_handoff_refused_during_the_run_fails_the_saga(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A custom Handoff's agent is known only when it runs; one the saga cannot run then
    fails the saga (non-retryable, so it compensates) instead of failing the workflow task
    for ever with the steps that ran standing."""

    async def refused(self: Any, work: Any) -> Any:
        work.close()
        raise AgentToolsError(["agent 'back' has a hosted tool"])

    monkeypatch.setattr(StepRouter, "serve", refused)
    with pytest.raises(ApplicationError) as failed:
        await run_agent(Any, Agent(name="front"), "go")  # type: ignore[arg-type]
    assert failed.value.type == AGENT_RUN_FAILED and failed.value.non_retryable
    assert "hosted tool" in failed.value.message


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        (WebSearchTool(), "WebSearchTool"),
        (
            Agent(name="helper").as_tool(tool_name="helper", tool_description="d"),
            "runs another agent",
        ),
        (slow_charge, "timeout_seconds"),
    ],
    ids=["hosted", "agent-as-tool", "timeout"],
)
def test_tools_the_saga_cannot_run_are_refused_before_anything_runs(extra: Any, why: str) -> None:
    with pytest.raises(AgentToolsError) as refused:
        saga_agent(shop_agent(charge_card, extra), Steps())
    assert len(refused.value.problems) == 1 and why in refused.value.problems[0]


def test_mcp_servers_are_refused() -> None:
    agent = Agent(
        name="shop", tools=[charge_card], mcp_servers=[MCPServerStdio(params={"command": "true"})]
    )
    with pytest.raises(AgentToolsError, match="MCP servers"):
        saga_agent(agent, Steps())


# ---- the agent's tools against the worker's toolbox ------------------------------------------


class Payments:
    @compensable("refund_card")
    def charge_card(self, amount: int, currency: str = "EUR") -> dict[str, Any]:
        return {}

    @compensation
    def refund_card(self, ctx: CompensationContext) -> None:
        pass

    @irreversible
    def send_wire_transfer(self, iban: str, amount: int) -> dict[str, Any]:
        return {}

    @tool
    def refund(self, amount: int) -> dict[str, Any]:
        return {}


PAYMENTS = Toolbox.build(Payments())


def test_an_agent_matching_the_toolbox_passes() -> None:
    check_agent_tools(shop_agent(charge_card, send_wire_transfer), PAYMENTS)


def test_every_mismatch_is_listed() -> None:
    @function_tool
    def charge_crad(amount: int) -> str:
        """Misspelt."""
        return ""

    @function_tool(name_override="send_wire_transfer")
    def wire_without_iban(amount: int, memo: str) -> str:
        """Sends a parameter the toolbox does not take and omits one it needs."""
        return ""

    billing = shop_agent(refund)  # needs approval above 1000; the toolbox never asks
    agent = Agent(name="front", tools=[charge_crad, wire_without_iban], handoffs=[billing])

    with pytest.raises(AgentToolsError) as refused:
        check_agent_tools(agent, PAYMENTS)
    problems = refused.value.problems
    assert len(problems) == 4, problems
    text = " | ".join(problems)
    assert (
        "'charge_crad' is not a tool of the worker's toolbox (did you mean 'charge_card'?)" in text
    )
    assert "sends ['memo']" in text and "never sends ['iban']" in text
    assert "'refund' needs approval in the agent, but the toolbox declares it plain" in text


def test_the_example_agent_declares_the_shops_tools() -> None:
    from sagacity.examples.orders import Shop

    class NoFile(Shop):
        def __init__(self) -> None:  # the declarations only: no shop database
            pass

    check_agent_tools(order_agent("any"), Toolbox.build(NoFile()))


# ---- how a run ends ---------------------------------------------------------------------------


def test_a_run_the_sdk_gave_up_on_fails_the_saga_and_a_misconfiguration_stays_a_bug() -> None:
    from agents import MaxTurnsExceeded, UserError

    gave_up = run_failure(MaxTurnsExceeded("Max turns (10) exceeded"))
    assert isinstance(gave_up, ApplicationError)
    assert gave_up.type == AGENT_RUN_FAILED and gave_up.non_retryable
    assert "MaxTurnsExceeded" in str(gave_up)
    wrong = UserError("bad agent")
    assert run_failure(wrong) is wrong


class Answer(BaseModel):
    done: bool


def test_the_final_output_is_journaled_as_text_within_the_limit() -> None:
    assert final_answer("done", 100) == "done"
    assert final_answer(Answer(done=True), 100) == '{"done":true}'
    assert final_answer({"done": True}, 100) == '{"done": true}'
    assert final_answer("x" * 500, 100) == "x" * 99 + "…"  # a cut text says it was cut
