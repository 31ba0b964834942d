"""A user's own workflow (examples/order_workflow.py) on the saga API, end to end: the
session's dev server, a worker with SagacityPlugin, a PostgreSQL journal, SagaClient."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import CancelledError

from sagacity.approval._judge import approval_hash
from sagacity.examples.order_workflow import Order, OrderWorkflow, Receipt
from sagacity.examples.orders import INITIAL_STOCK
from sagacity.journal._phases import Phase, SagaStatus
from sagacity.workflows._inspection import SAGA_STATUS
from tests.integration.workflows.saga_api.conftest import Orders
from tests.support.workers import (
    assert_chain_closed,
    assert_executed_ran_once,
    eventually,
    phases,
)

pytestmark = [pytest.mark.temporal, pytest.mark.postgres, pytest.mark.timeout(60)]

IBAN = "DE89370400440532013000"


def order(**changes: Any) -> Order:
    base = {"sku": "widget", "qty": 2, "amount": 1250, "address": "Main St 1"}
    return Order.model_validate({**base, **changes})


async def start(orders: Orders, o: Order) -> WorkflowHandle[Any, Receipt]:
    return await orders.client.start_workflow(OrderWorkflow.run, o, saga_id=orders.new_id())


async def awaiting(orders: Orders, saga_id: str) -> None:
    async def pending() -> bool:
        view = await orders.client.status(saga_id)
        return view.pending_approval is not None

    await eventually(pending, 20, "the wire awaiting approval")


async def test_an_order_completes(orders: Orders) -> None:
    handle = await start(orders, order())
    receipt = await handle.result()

    assert receipt.status == "COMPLETED" and receipt.shipment is not None
    entries = assert_chain_closed(orders.store, handle.id)
    assert phases(orders.store, handle.id) == [
        ("SAGA_OPENED", 0), ("INTENT", 1), ("EXECUTED", 1), ("INTENT", 2), ("EXECUTED", 2),
        ("INTENT", 3), ("EXECUTED", 3), ("SAGA_CLOSED", 0),
    ]  # fmt: skip
    assert entries[0].input["workflow_type"] == "OrderWorkflow"
    assert entries[-1].result["status"] == "COMPLETED"
    assert orders.shop.stock("widget") == INITIAL_STOCK["widget"] - 2
    assert (await handle.describe()).typed_search_attributes.get(SAGA_STATUS) == "COMPLETED"
    assert [s.status for s in await orders.client.steps(handle.id)] == ["EXECUTED"] * 3


async def test_a_failure_at_step_3_undoes_2_then_1(orders: Orders) -> None:
    handle = await start(orders, order(address="nowhere"))
    receipt = await handle.result()

    assert receipt.status == "COMPENSATED", receipt
    assert receipt.failure is not None and "step 3 (ship_order) failed" in receipt.failure
    entries = assert_chain_closed(orders.store, handle.id)
    assert [(e.phase.value, e.step) for e in entries][-5:] == [
        ("FAILED", 3), ("COMPENSATING", 0), ("COMPENSATED", 2), ("COMPENSATED", 1),
        ("SAGA_CLOSED", 0),
    ]  # fmt: skip
    assert_executed_ran_once(orders.shop.calls(), handle.id, entries)
    assert orders.shop.stock("widget") == INITIAL_STOCK["widget"]
    assert [c["refunded"] for c in orders.shop.charges()] == [True]


async def test_the_wire_waits_and_runs_with_the_approved_payload(orders: Orders) -> None:
    handle = await start(orders, order(supplier_iban=IBAN))
    await awaiting(orders, handle.id)
    review = await orders.client.review(handle.id)
    assert review.pending.payload == {"iban": IBAN, "amount": 1250, "currency": "EUR"}
    assert orders.shop.wires() == []  # nothing ran before the approval

    decision = await orders.client.approve(
        handle.id, approver="alice@example.com", reason="invoice 7"
    )
    receipt = await handle.result()

    assert receipt.status == "COMPLETED" and receipt.wire is not None
    [approved] = [e for e in orders.store.entries(handle.id) if e.phase is Phase.APPROVED]
    assert (approved.seq, approved.hash, approved.actor) == (
        decision.seq,
        decision.hash,
        "alice@example.com",
    )
    assert approved.result["payload_sha256"] == approval_hash(
        "send_wire_transfer", review.pending.payload
    )
    [wire] = orders.shop.wires()
    assert (wire["iban"], wire["amount"]) == (IBAN, 1250)


async def test_an_approver_not_allowed_is_refused_and_journaled(orders: Orders) -> None:
    """The order names its own approver; the workflow's list (FINANCE) decides."""
    from sagacity.worker.client._client import ApprovalRefusedError

    handle = await start(orders, order(supplier_iban=IBAN, options={"approvers": ["mallory"]}))
    await awaiting(orders, handle.id)
    with pytest.raises(ApprovalRefusedError) as refused:
        await orders.client.approve(handle.id, approver="mallory")
    assert refused.value.journaled
    refused_entries = [
        e for e in orders.store.entries(handle.id) if e.phase is Phase.APPROVAL_REFUSED
    ]
    # The claimed name is evidence in the refused decision, never a proven actor.
    assert [(e.actor, e.input["approver"]) for e in refused_entries] == [(None, "mallory")]
    assert orders.shop.wires() == []
    await orders.client.reject(handle.id, approver="alice@example.com", reason="not this one")
    assert (await handle.result()).status == "COMPENSATED"


async def test_a_cancel_during_the_approval_wait_compensates(orders: Orders) -> None:
    handle = await start(orders, order(supplier_iban=IBAN))
    await awaiting(orders, handle.id)
    await orders.client.cancel(handle.id)

    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    assert isinstance(failed.value.cause, CancelledError)
    entries = assert_chain_closed(orders.store, handle.id)
    assert [(e.phase.value, e.step) for e in entries][-6:] == [
        ("AWAITING_APPROVAL", 4), ("REJECTED", 4), ("COMPENSATING", 0), ("COMPENSATED", 2),
        ("COMPENSATED", 1),
        ("SAGA_CLOSED", 0),
    ]  # fmt: skip
    assert entries[-1].result["status"] == "COMPENSATED"
    assert orders.shop.wires() == [] and orders.shop.shipments() != []  # shipping stays
    assert orders.shop.stock("widget") == INITIAL_STOCK["widget"]
    view = await orders.client.steps(handle.id)
    assert [s.status for s in view] == ["COMPENSATED", "COMPENSATED", "NOT_COMPENSABLE", "REJECTED"]


async def test_a_swallowed_step_error_still_compensates(orders: Orders) -> None:
    handle = await start(orders, order(address="nowhere", ship_best_effort=True))
    receipt = await handle.result()

    assert receipt.status == "COMPENSATED", receipt
    assert "step 3 (ship_order) failed" in (receipt.failure or "")
    assert [c["refunded"] for c in orders.shop.charges()] == [True]
    assert orders.shop.stock("widget") == INITIAL_STOCK["widget"]
    assert phases(orders.store, handle.id)[-4:] == [
        ("COMPENSATING", 0), ("COMPENSATED", 2), ("COMPENSATED", 1), ("SAGA_CLOSED", 0),
    ]  # fmt: skip


async def test_concurrent_orders_each_keep_their_own_saga(orders: Orders) -> None:
    handles = [await start(orders, order(qty=1)) for _ in range(4)]
    receipts = await asyncio.gather(*(h.result() for h in handles))
    assert [r.status for r in receipts] == ["COMPLETED"] * 4
    for h in handles:
        assert_chain_closed(orders.store, h.id)
    assert orders.client.verify(handles[0].id).ok


async def test_status_and_pending_list_user_workflows(orders: Orders) -> None:
    handle = await start(orders, order(supplier_iban=IBAN))
    await awaiting(orders, handle.id)

    async def listed() -> bool:
        return any(i.summary.saga_id == handle.id for i in (await orders.client.pending()).items)

    await eventually(listed, 20, "the order in the pending list")
    view = await orders.client.status(handle.id)
    assert view.status is SagaStatus.AWAITING_APPROVAL and view.steps == 4
    await orders.client.approve(handle.id, approver="bob@example.com")
    assert (await handle.result()).status == "COMPLETED"
