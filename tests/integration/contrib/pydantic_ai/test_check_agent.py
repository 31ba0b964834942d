"""check_agent, the worker-start check of an agent's declarations against the toolbox that
runs them (no server): every mismatch is named, before any saga runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, FunctionToolset
from pydantic_ai.durable_exec.temporal import PydanticAIPayloadConverter, PydanticAIPlugin
from pydantic_ai.models.test import TestModel
from temporalio.converter import DataConverter

from sagacity import CompensationContext, Toolbox, ToolContext
from sagacity.contrib.pydantic_ai import AgentToolboxMismatch, SagaToolset, check_agent
from sagacity.examples.orders import Shop
from sagacity.examples.pydantic_ai_order import clerk
from sagacity.tools import ToolKind
from sagacity.tools._decorators import compensable, compensation, irreversible
from sagacity.worker._plugin import SagacityPlugin, saga_converter
from tests.integration.contrib.pydantic_ai.agents import strict_clerk


class Payments:
    """A toolbox of two tools: a compensable charge and an irreversible payout."""

    @compensable("refund_card")
    def charge_card(self, amount: int, ctx: ToolContext, currency: str = "EUR") -> str:
        return ctx.idempotency_key

    @compensation
    def refund_card(self, ctx: CompensationContext) -> None:
        return None

    @irreversible
    def payout(self, iban: str, amount: int) -> str:
        return iban


def agent_of(tools: FunctionToolset[None], *, own: bool = False) -> Agent[None, str]:
    agent = Agent(TestModel(), name="payer", toolsets=[SagaToolset(tools)])
    if own:

        @agent.tool_plain
        def local_time() -> str:
            """The agent's own tool: Pydantic AI runs it, outside the saga."""
            return "noon"

    return agent


def test_the_example_clerk_matches_the_shop(tmp_path: Path) -> None:
    found = check_agent(clerk, Toolbox.build(Shop(tmp_path / "shop.db")))

    assert found.steps == {
        "reserve_inventory": ToolKind.COMPENSABLE,
        "charge_card": ToolKind.COMPENSABLE,
        "ship_order": ToolKind.PLAIN,
        "send_wire_transfer": ToolKind.IRREVERSIBLE,
    }
    assert found.approval == ["send_wire_transfer"] and found.outside == []


def test_tools_the_saga_does_not_run_are_named() -> None:
    tools = FunctionToolset[None](id="pay")

    @tools.tool_plain
    def charge_card(amount: int, currency: str = "EUR") -> str:
        raise NotImplementedError

    found = check_agent(agent_of(tools, own=True), Toolbox.build(Payments()))
    assert found.steps == {"charge_card": ToolKind.COMPENSABLE}
    assert found.outside == ["local_time"]


def test_an_agent_function_under_a_toolbox_tools_name_is_refused() -> None:
    """A careless `tools=[payout]` beside the SagaToolset: the model's payout would run the
    agent's own function, outside the saga and ungated (found by an outside attack)."""
    tools = FunctionToolset[None](id="pay")

    @tools.tool_plain
    def charge_card(amount: int, currency: str = "EUR") -> str:
        raise NotImplementedError

    def payout(iban: str, amount: float) -> str:
        """Pays out, for real, right here."""
        return iban

    agent = Agent(TestModel(), name="payer", toolsets=[SagaToolset(tools)], tools=[payout])
    with pytest.raises(AgentToolboxMismatch) as refused:
        check_agent(agent, Toolbox.build(Payments()))
    assert "'payout' is the toolbox's irreversible tool of that name" in str(refused.value)
    assert "outside the saga" in str(refused.value)


def test_every_mismatch_is_listed_at_once() -> None:
    tools = FunctionToolset[None](id="pay")

    @tools.tool_plain(requires_approval=True)
    def charge_card(amount: int, card: str, currency: str = "USD") -> str:
        """Asks for approval, but the toolbox's charge runs without one."""
        raise NotImplementedError

    @tools.tool_plain
    def payout(iban: str, amount: int = 0) -> str:
        """Leaves amount out, which the toolbox requires."""
        raise NotImplementedError

    @tools.tool_plain
    def ship_order(address: str) -> str:
        raise NotImplementedError

    with pytest.raises(AgentToolboxMismatch) as mismatch:
        check_agent(agent_of(tools), Toolbox.build(Payments()))

    text = str(mismatch.value)
    assert text.startswith("agent 'payer' does not match its toolbox: ")
    assert "tool 'charge_card': the model may send ['card']" in text
    assert "'currency' defaults to 'USD' in the Pydantic AI declaration but to 'EUR'" in text
    assert "tool 'charge_card': Pydantic AI has a person approve its calls" in text
    assert "declares it compensable" in text
    assert "tool 'payout': the toolbox's tool requires ['amount']" in text
    assert "tool 'ship_order' runs as a saga step, but the toolbox has no tool" in text


def test_an_approval_required_toolset_needs_irreversible_tools(tmp_path: Path) -> None:
    """Its approval is decided call by call, so every tool under it must be gated."""
    with pytest.raises(AgentToolboxMismatch) as mismatch:
        check_agent(strict_clerk, Toolbox.build(Shop(tmp_path / "shop.db")))
    text = str(mismatch.value)
    for tool in ("reserve_inventory", "charge_card", "ship_order"):
        assert f"tool {tool!r}: Pydantic AI has a person approve its calls" in text
    assert "'send_wire_transfer': Pydantic AI" not in text  # irreversible: gated already


@pytest.mark.parametrize("order", ["sagacity first", "pydantic ai first"])
def test_the_clients_plugin_order_keeps_pydantic_ais_converter(order: str) -> None:
    plugins: list[Any] = [SagacityPlugin(), PydanticAIPlugin()]
    if order != "sagacity first":
        plugins.reverse()
    converter: DataConverter | None = DataConverter.default
    for plugin in plugins:
        converter = plugin.data_converter(converter)
    assert converter is not None
    assert converter.payload_converter_class is PydanticAIPayloadConverter
    assert saga_converter(converter) is converter


def test_one_function_can_carry_both_declarations() -> None:
    """A tool without a ToolContext is both the agent's declaration and the toolbox's
    implementation: the decorators of both only mark the function."""
    tools = FunctionToolset[None](id="pay")

    @tools.tool_plain
    @compensable("refund")
    def charge_card(amount: int, currency: str = "EUR") -> dict[str, int]:
        """Charge `amount`."""
        return {"charged": amount}

    @compensation
    def refund(ctx: CompensationContext) -> None:
        return None

    found = check_agent(agent_of(tools), Toolbox.build(charge_card, refund))
    assert found.steps == {"charge_card": ToolKind.COMPENSABLE}
