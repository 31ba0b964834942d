"""The worker's MCP session over its lifetime: a mapping that does not fit fails at start
(and leaves no server running), a server that dies between calls is restarted, a server
that dies mid-call leaves the step UNKNOWN (never FAILED), and a tool that changed since
start is not called."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer

from sagacity._errors import ToolInputError
from sagacity.audit._export import verify_store
from sagacity.contrib.mcp import (
    McpMappingError,
    McpToolChangedError,
    McpToolError,
    McpToolset,
    irreversible,
    plain,
)
from sagacity.journal._phases import SagaStatus, StepStatus
from sagacity.tools._decorators import CompensationContext, ToolContext
from sagacity.workflows._models import SagaInput, ToolCall
from tests.integration.contrib.mcp.conftest import (
    SHOP_MAPPING,
    McpOrders,
    McpShop,
    alive,
    assert_stopped,
)
from tests.support.workflows import accept_when_dirty, eventually

RESERVE = ToolCall(tool="reserve_inventory", args={"sku": "widget", "qty": 2})
CHARGE = ToolCall(tool="charge_card", args={"amount": 1250})


async def test_a_mapping_naming_a_tool_the_server_lacks_fails_at_start(mcp_shop: McpShop) -> None:
    mapping = {**SHOP_MAPPING, "send_wire": irreversible}
    with pytest.raises(McpMappingError) as caught:
        async with McpToolset(mcp_shop.server, tools=mapping):
            pytest.fail("the toolset opened with a name the server does not list")
    assert str(caught.value) == (
        "the mapping names tool 'send_wire', which MCP server 'shop' does not list; did you "
        "mean 'send_wire_transfer'?; MCP server 'shop' lists: charge_card, refund_card, "
        "release_inventory, reserve_inventory, send_wire_transfer, ship_order"
    )
    assert_stopped(mcp_shop.pids())
    assert mcp_shop.calls() == []


async def test_the_toolset_serves_only_while_open_and_stops_its_server(mcp_shop: McpShop) -> None:
    toolset = McpToolset(mcp_shop.server, tools=SHOP_MAPPING)
    with pytest.raises(RuntimeError, match="is not open"):
        toolset.toolbox  # noqa: B018
    async with toolset:
        [pid] = mcp_shop.pids()
        assert alive(pid)
        assert toolset.toolbox.names() == list(SHOP_MAPPING)
    assert_stopped([pid])
    with pytest.raises(RuntimeError, match="is not open"):
        toolset.toolbox  # noqa: B018


@pytest.mark.timeout(90)
async def test_a_server_that_died_between_calls_is_started_again(mcp_orders: McpOrders) -> None:
    first = mcp_orders.new_id()
    await mcp_orders.client.start(SagaInput(plan=[CHARGE]), saga_id=first)
    assert (await mcp_orders.client.result(first)).status is SagaStatus.COMPLETED
    [pid] = mcp_orders.shop.pids()
    os.kill(pid, signal.SIGKILL)

    second = mcp_orders.new_id()
    await mcp_orders.client.start(SagaInput(plan=[CHARGE]), saga_id=second)
    assert (await mcp_orders.client.result(second)).status is SagaStatus.COMPLETED
    assert mcp_orders.toolset.connection.connects == 2
    assert [c["key"] for c in mcp_orders.shop.calls()] == [f"{first}:1", f"{second}:1"]
    assert len(mcp_orders.shop.pids()) == 2 and not alive(pid)


@pytest.mark.timeout(90)
async def test_a_server_lost_mid_call_leaves_the_step_unknown_not_failed(
    mcp_orders: McpOrders,
) -> None:
    """The charge is applied and the server exits before answering: the step may have
    taken effect, so it is not journaled FAILED (which would leave it undone). It stays
    INTENT-only, the reservation is released (by a restarted server), and a person says
    what happened."""
    mcp_orders.shop.shop.set_fault("server_exit", "charge_card")
    saga_id = mcp_orders.new_id()
    await mcp_orders.client.start(SagaInput(plan=[RESERVE, CHARGE]), saga_id=saga_id)
    handle = mcp_orders.client.handle(saga_id)
    dirty = await accept_when_dirty(handle, reason="the charge went through; kept")
    result = await mcp_orders.client.result(saga_id)

    assert [(d.step, d.tool) for d in dirty] == [(2, "charge_card")]
    assert result.status is SagaStatus.ACCEPTED
    assert [s.status for s in result.steps] == [StepStatus.COMPENSATED, StepStatus.ACCEPTED]
    assert "outcome unknown" in (result.steps[1].error or "")
    step_2 = [e.phase.value for e in mcp_orders.store.entries(saga_id) if e.step == 2]
    assert "FAILED" not in step_2 and "EXECUTED" not in step_2 and step_2[0] == "INTENT"
    assert verify_store(mcp_orders.store, saga_id).ok
    assert [c["tool"] for c in mcp_orders.shop.calls()] == [
        "reserve_inventory", "charge_card", "release_inventory",
    ]  # fmt: skip
    assert [c["key"] for c in mcp_orders.shop.shop.charges()] == [f"{saga_id}:2"]
    assert mcp_orders.toolset.connection.connects == 2


# ---- a tool that changes after start (an in-process MCP server: no process, no Temporal) --


def in_process_shop(received: list[dict[str, Any]]) -> MCPServer:
    server = MCPServer("inproc", log_level="WARNING")

    @server.tool()
    def charge(amount: int) -> dict[str, int]:
        received.append({"charge": amount})
        return {"charged": amount}

    return server


async def test_a_tool_changed_since_start_is_not_called() -> None:
    received: list[dict[str, Any]] = []
    server = in_process_shop(received)
    async with McpToolset(server, tools={"charge": plain}) as toolset:
        spec = toolset.toolbox.get("charge")
        ctx = ToolContext(saga_id="s", step=1, attempt=1, tool="charge")
        five = spec.validate({"amount": 5})
        assert await spec.invoke(five, ctx) == {"charged": 5}

        server.remove_tool("charge")

        @server.tool(name="charge")
        def charge_in_cents(amount: str) -> dict[str, str]:
            received.append({"cents": amount})
            return {"charged": amount}

        assert spec.validate({"amount": 5}) == five  # still the definition taken
        with pytest.raises(McpToolChangedError, match="changed its schema since the worker"):
            await spec.invoke(five, ctx)
        server.remove_tool("charge")
        with pytest.raises(McpToolChangedError, match="no longer lists it"):
            await spec.invoke(five, ctx)
        with pytest.raises(ToolInputError, match="amount: 'five' is not of type 'integer'"):
            spec.validate({"amount": "five"})
    assert received == [{"charge": 5}]


# ---- streamable HTTP (the same shop, served on a loopback port; no Temporal) -----------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def listening(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    await writer.wait_closed()
    return True


async def test_a_streamable_http_server_serves_the_same_tools(mcp_shop: McpShop) -> None:
    port = free_port()
    command = [sys.executable, "-m", "sagacity.examples.mcp_shop_server",
               "--shop", str(mcp_shop.path), "--http", str(port)]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await eventually(lambda: listening(port), 30)
        url = f"http://127.0.0.1:{port}/mcp"
        async with McpToolset(url, tools=SHOP_MAPPING) as toolset:
            assert toolset.name == "shop"
            charge = toolset.toolbox.get("charge_card")
            ctx = ToolContext(saga_id="http", step=1, attempt=1, tool="charge_card")
            assert await charge.invoke(charge.validate({"amount": 7}), ctx) == {
                "charge": "http:1", "amount": 7, "currency": "EUR",
            }  # fmt: skip
            ship = toolset.toolbox.get("ship_order")
            with pytest.raises(McpToolError, match="carrier refused"):
                await ship.invoke(
                    ship.validate({"address": "nowhere"}),
                    ToolContext(saga_id="http", step=2, attempt=1, tool="ship_order"),
                )
            assert charge.compensation is not None
            await charge.compensation.invoke(
                CompensationContext(
                    saga_id="http",
                    step=1,
                    tool="charge_card",
                    input={"amount": 7},
                    result={"charge": "http:1", "amount": 7, "currency": "EUR"},
                )
            )
    finally:
        server.terminate()
        server.wait(timeout=15)
    assert [(c["tool"], c["key"]) for c in mcp_shop.calls()] == [
        ("charge_card", "http:1"), ("ship_order", "http:2"), ("refund_card", "http:1:compensate"),
    ]  # fmt: skip
    assert mcp_shop.shop.charges() == [
        {"key": "http:1", "amount": 7, "currency": "EUR", "refunded": True}
    ]
