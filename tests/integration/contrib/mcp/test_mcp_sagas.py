"""MCP tools as saga steps, end to end: a real stdio MCP server (the example shop), the
dev server, a PostgreSQL journal. The shop's record of what it received is the witness
of what was sent; the journal must verify."""

from __future__ import annotations

import pytest

from sagacity.activities._models import ModelTurn
from sagacity.approval._judge import approval_hash
from sagacity.audit._export import verify_store
from sagacity.examples.mcp_order import scenario
from sagacity.examples.order_workflow import Order, OrderWorkflow
from sagacity.examples.orders import INITIAL_STOCK
from sagacity.journal._canonical import canonical_text
from sagacity.journal._phases import SagaStatus
from sagacity.workflows._models import ModelSettings, SagaInput, ToolCall
from tests.integration.contrib.mcp.conftest import McpOrders

pytestmark = [pytest.mark.temporal, pytest.mark.postgres, pytest.mark.timeout(90)]

IBAN = "DE89370400440532013000"
RESERVE = ToolCall(tool="reserve_inventory", args={"sku": "widget", "qty": 2})
CHARGE = ToolCall(tool="charge_card", args={"amount": 1250})
SHIP_FAILS = ToolCall(tool="ship_order", args={"address": "Main St 1", "fail": True})


def journal(orders: McpOrders, saga_id: str) -> list[tuple[str, int, str]]:
    report = verify_store(orders.store, saga_id)
    assert report.ok and report.closed, report.describe()
    return [(e.phase.value, e.step, e.tool) for e in orders.store.entries(saga_id)]


async def test_a_failed_mcp_call_compensates_newest_first_on_the_server(
    mcp_orders: McpOrders,
) -> None:
    saga_id = mcp_orders.new_id()
    await mcp_orders.client.start(SagaInput(plan=[RESERVE, CHARGE, SHIP_FAILS]), saga_id=saga_id)
    result = await mcp_orders.client.result(saga_id)

    assert result.status is SagaStatus.COMPENSATED
    assert result.first_failure is not None
    assert "step 3 (ship_order) failed: McpToolError" in result.first_failure
    assert "carrier refused to ship to 'Main St 1'" in result.first_failure
    assert journal(mcp_orders, saga_id) == [
        ("SAGA_OPENED", 0, ""),
        ("INTENT", 1, "reserve_inventory"), ("EXECUTED", 1, "reserve_inventory"),
        ("INTENT", 2, "charge_card"), ("EXECUTED", 2, "charge_card"),
        ("INTENT", 3, "ship_order"), ("FAILED", 3, "ship_order"),
        ("COMPENSATING", 0, ""), ("COMPENSATED", 2, "charge_card"),
        ("COMPENSATED", 1, "reserve_inventory"),
        ("SAGA_CLOSED", 0, ""),
    ]  # fmt: skip
    received = mcp_orders.shop.calls()
    assert [(c["tool"], c["key"]) for c in received] == [
        ("reserve_inventory", f"{saga_id}:1"),
        ("charge_card", f"{saga_id}:2"),
        ("ship_order", f"{saga_id}:3"),
        ("refund_card", f"{saga_id}:2:compensate"),
        ("release_inventory", f"{saga_id}:1:compensate"),
    ]
    # each undo got the forward call's (structured) result as its arguments
    assert received[3]["arguments"] == {"charge": f"{saga_id}:2", "amount": 1250, "currency": "EUR"}
    assert received[4]["arguments"] == {"reservation": f"{saga_id}:1", "sku": "widget", "qty": 2}
    shop = mcp_orders.shop.shop
    assert shop.stock("widget") == INITIAL_STOCK["widget"]
    assert [c["refunded"] for c in shop.charges()] == [True]
    assert shop.shipments() == []


async def test_a_wire_waits_for_approval_and_the_server_gets_exactly_the_approved_args(
    mcp_orders: McpOrders,
) -> None:
    order = Order(sku="widget", qty=1, amount=5000, address="Main St 1", supplier_iban=IBAN)
    handle = await mcp_orders.client.start_workflow(
        OrderWorkflow.run, order, saga_id=mcp_orders.new_id()
    )
    review = await mcp_orders.client.wait_pending(handle.id)
    pending = review.pending
    assert pending.tool == "send_wire_transfer"
    # the schema's default currency is part of what the approver sees and the hash binds
    approved_args = {"iban": IBAN, "amount": 5000, "currency": "EUR"}
    assert pending.payload == approved_args
    assert pending.payload_sha256 == approval_hash("send_wire_transfer", approved_args)
    assert mcp_orders.shop.calls("send_wire_transfer") == []  # nothing sent before approval

    decision = await mcp_orders.client.approve(handle.id, approver="alice@example.com")
    receipt = await handle.result()

    assert receipt.status == "COMPLETED" and receipt.wire == f"{handle.id}:4"
    [wire] = mcp_orders.shop.calls("send_wire_transfer")
    assert canonical_text(wire["arguments"]) == canonical_text(approved_args)
    assert wire["key"] == f"{handle.id}:4"
    phases = journal(mcp_orders, handle.id)
    assert phases[-5:] == [
        ("AWAITING_APPROVAL", 4, "send_wire_transfer"), ("APPROVED", 4, "send_wire_transfer"),
        ("INTENT", 4, "send_wire_transfer"), ("EXECUTED", 4, "send_wire_transfer"),
        ("SAGA_CLOSED", 0, ""),
    ]  # fmt: skip
    approved = [e for e in mcp_orders.store.entries(handle.id) if e.phase.value == "APPROVED"]
    assert approved[0].seq == decision.seq
    assert mcp_orders.shop.shop.wires() == [
        {"key": f"{handle.id}:4", "iban": IBAN, "amount": 5000, "currency": "EUR"}
    ]


async def test_arguments_that_break_the_input_schema_are_refused_and_never_sent(
    mcp_orders: McpOrders,
) -> None:
    saga_id = mcp_orders.new_id()
    bad = ToolCall(tool="charge_card", args={"amount": "twelve euros"})
    await mcp_orders.client.start(SagaInput(plan=[RESERVE, bad]), saga_id=saga_id)
    result = await mcp_orders.client.result(saga_id)

    assert result.status is SagaStatus.REFUSED
    assert "amount: 'twelve euros' is not of type 'integer'" in (result.first_failure or "")
    assert result.steps == []
    assert mcp_orders.shop.calls() == []  # not even the valid first step ran
    assert journal(mcp_orders, saga_id)[-1] == ("SAGA_CLOSED", 0, "")


async def test_a_models_call_that_breaks_the_schema_is_journaled_refused_and_not_sent(
    mcp_orders: McpOrders,
) -> None:
    script = [
        ModelTurn(tool_calls=[ToolCall(tool="charge_card", args={"amount": -5, "card": 7})]),
        ModelTurn(tool_calls=[CHARGE]),
        ModelTurn(final="charged"),
    ]
    saga_id = mcp_orders.new_id()
    inp = SagaInput(goal="charge the customer", model=ModelSettings(script=script))
    await mcp_orders.client.start(inp, saga_id=saga_id)
    result = await mcp_orders.client.result(saga_id)

    assert result.status is SagaStatus.COMPLETED
    refused = [e for e in mcp_orders.store.entries(saga_id) if e.phase.value == "CALL_REFUSED"]
    assert [(e.step, e.tool) for e in refused] == [(1, "charge_card")]
    assert refused[0].input == {"amount": -5, "card": 7}
    assert "card: 7 is not of type 'string'" in (refused[0].error or "")
    # only the valid call reached the server
    assert [c["key"] for c in mcp_orders.shop.calls()] == [f"{saga_id}:2"]
    assert journal(mcp_orders, saga_id)[-3:] == [
        ("INTENT", 2, "charge_card"), ("EXECUTED", 2, "charge_card"), ("SAGA_CLOSED", 0, ""),
    ]  # fmt: skip


async def test_the_example_runs_its_scenario(mcp_orders: McpOrders) -> None:
    """examples/mcp_order.py's two sagas, on this test's worker and journal."""
    assert await scenario(mcp_orders.client, mcp_orders.store, mcp_orders.shop.path)
    assert [c["tool"] for c in mcp_orders.shop.calls()][-2:] == ["ship_order", "send_wire_transfer"]
