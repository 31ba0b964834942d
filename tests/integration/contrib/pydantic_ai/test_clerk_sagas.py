"""A Pydantic AI agent, run through its Temporal integration, with every tool call a saga
step: the example's order clerk on the session's dev server, its model scripted
(FunctionModel), the shop's toolbox, a PostgreSQL journal and SagaClient's approvals.

The clerk reports success whatever its tools answered; the saga, not the model, says how
the order ended."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import CancelledError

from sagacity.approval._judge import approval_hash
from sagacity.audit._export import verify_store
from sagacity.examples.orders import INITIAL_STOCK
from sagacity.examples.pydantic_ai_order import ClerkOrder, ClerkReport, OrderClerk
from sagacity.journal._phases import Phase
from tests.histories.record_pydantic_ai import replay_failure
from tests.integration.contrib.pydantic_ai.agents import ApprovalByAmount, ClerkOnABudget
from tests.integration.contrib.pydantic_ai.conftest import Clerks
from tests.support.workers import (
    assert_chain_closed,
    assert_executed_ran_once,
    failed_workflow_tasks,
    phases,
)

pytestmark = [pytest.mark.temporal, pytest.mark.postgres, pytest.mark.timeout(90)]

IBAN = "DE89370400440532013000"


async def start(clerks: Clerks, order: ClerkOrder) -> WorkflowHandle[Any, ClerkReport]:
    return await clerks.client.start_workflow(OrderClerk.run, order, saga_id=clerks.new_id())


async def verified(clerks: Clerks, handle: WorkflowHandle[Any, Any]) -> list[Any]:
    """The saga's journal verifies and closes; its workflow history replays."""
    entries = assert_chain_closed(clerks.store, handle.id)
    report = verify_store(clerks.store, handle.id)
    assert report.ok and report.closed, report.describe()
    assert await replay_failure(await handle.fetch_history()) is None
    return entries


async def test_a_failed_shipment_is_undone_newest_first_though_the_clerk_says_done(
    clerks: Clerks,
) -> None:
    handle = await start(clerks, ClerkOrder(address="nowhere"))
    report = await handle.result()

    assert report.agent_said == "Order placed: 2 x widget. All done!"  # the model carried on
    assert report.status == "COMPENSATED"
    [told] = report.told  # the model was told, as a failed tool call
    assert told.startswith("ship_order: step 3 (ship_order) failed: ShopError: carrier refused")
    assert report.failure is not None and "step 3 (ship_order) failed" in report.failure
    entries = await verified(clerks, handle)
    assert phases(clerks.store, handle.id) == [
        ("SAGA_OPENED", 0), ("INTENT", 1), ("EXECUTED", 1), ("INTENT", 2), ("EXECUTED", 2),
        ("INTENT", 3), ("FAILED", 3), ("COMPENSATING", 0), ("COMPENSATED", 2), ("COMPENSATED", 1),
        ("SAGA_CLOSED", 0),
    ]  # fmt: skip
    assert [e.tool for e in entries if e.phase is Phase.COMPENSATED] == [
        "charge_card",
        "reserve_inventory",
    ]
    assert entries[0].input["workflow_type"] == "OrderClerk"
    assert entries[-1].result["status"] == "COMPENSATED"
    assert_executed_ran_once(clerks.shop.calls(), handle.id, entries)
    assert clerks.shop.stock("widget") == INITIAL_STOCK["widget"]
    assert [c["refunded"] for c in clerks.shop.charges()] == [True]
    assert clerks.shop.shipments() == []


async def activity_types(handle: WorkflowHandle[Any, Any]) -> list[str]:
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        async for e in handle.fetch_history_events()
        if e.HasField("activity_task_scheduled_event_attributes")
    ]


async def test_an_order_completes_its_model_calls_pydantic_ai_activities_its_tools_steps(
    clerks: Clerks,
) -> None:
    handle = await start(clerks, ClerkOrder())
    report = await handle.result()

    assert report.status == "COMPLETED" and report.failure is None and report.told == []
    await verified(clerks, handle)
    assert [e.tool for e in clerks.store.entries(handle.id) if e.phase is Phase.EXECUTED] == [
        "reserve_inventory",
        "charge_card",
        "ship_order",
    ]
    model, step = "agent__order_clerk__model_request", "sagacity.run_tool"
    assert await activity_types(handle) == [model, step, model, step, model, step, model]
    assert clerks.shop.stock("widget") == INITIAL_STOCK["widget"] - 2
    assert len(clerks.shop.shipments()) == 1


async def wire_awaiting(clerks: Clerks) -> tuple[WorkflowHandle[Any, ClerkReport], Any]:
    """An order with a supplier wire, started and waiting for the wire's approval; its
    handle and the review of the pending wire."""
    handle = await start(clerks, ClerkOrder(supplier_iban=IBAN))
    review = await clerks.client.wait_pending(handle.id, timeout=30)
    assert review.pending.tool == "send_wire_transfer"
    return handle, review


UNDONE_AFTER_THE_WIRE = [
    ("AWAITING_APPROVAL", 4), ("REJECTED", 4), ("COMPENSATING", 0), ("COMPENSATED", 2),
    ("COMPENSATED", 1),
    ("SAGA_CLOSED", 0),
]  # fmt: skip
"""How the journal of a wire order ends when the wire is refused (rejected, or the saga
cancelled while it waits): the charge and the reservation undone, newest first."""


async def test_the_wire_waits_for_its_approval_and_runs_with_exactly_the_approved_args(
    clerks: Clerks,
) -> None:
    handle, review = await wire_awaiting(clerks)

    payload = {"iban": IBAN, "amount": 1250, "currency": "EUR"}
    assert review.pending.payload == payload
    sha256 = approval_hash("send_wire_transfer", payload)
    assert review.pending.payload_sha256 == review.local_sha256 == sha256
    assert (await clerks.client.status(handle.id)).status.value == "AWAITING_APPROVAL"
    [waiting] = [e for e in clerks.store.entries(handle.id) if e.phase is Phase.AWAITING_APPROVAL]
    assert waiting.result["payload_sha256"] == sha256
    assert clerks.shop.wires() == []  # nothing ran before the approval

    decision = await clerks.client.approve(handle.id, approver="alice@example.com")
    report = await handle.result()

    assert report.status == "COMPLETED"
    [wire] = clerks.shop.wires()
    assert {k: wire[k] for k in payload} == payload
    assert wire["key"] == f"{handle.id}:4"
    entries = await verified(clerks, handle)
    assert [(e.phase.value, e.step) for e in entries][-5:] == [
        ("AWAITING_APPROVAL", 4), ("APPROVED", 4), ("INTENT", 4), ("EXECUTED", 4),
        ("SAGA_CLOSED", 0),
    ]  # fmt: skip
    [approved] = [e for e in entries if e.phase is Phase.APPROVED]
    assert (approved.seq, approved.actor) == (decision.seq, "alice@example.com")
    assert approved.result["payload_sha256"] == sha256


async def test_a_rejected_wire_is_told_to_the_clerk_and_the_order_is_undone(
    clerks: Clerks,
) -> None:
    handle, _ = await wire_awaiting(clerks)
    await clerks.client.reject(handle.id, approver="bob@example.com", reason="unknown supplier")
    report = await handle.result()

    assert report.agent_said == "Order placed: 2 x widget. All done!"
    assert report.status == "COMPENSATED"
    assert "rejected: unknown supplier" in (report.failure or "")
    [told] = report.told
    assert told.startswith("send_wire_transfer: step 4 (send_wire_transfer) rejected")
    entries = await verified(clerks, handle)
    assert [(e.phase.value, e.step) for e in entries][-6:] == UNDONE_AFTER_THE_WIRE
    assert clerks.shop.wires() == []
    assert clerks.shop.stock("widget") == INITIAL_STOCK["widget"]
    assert [c["refunded"] for c in clerks.shop.charges()] == [True]
    steps = await clerks.client.steps(handle.id)
    assert [s.status.value for s in steps] == [
        "COMPENSATED", "COMPENSATED", "NOT_COMPENSABLE", "REJECTED",
    ]  # fmt: skip


async def test_an_approval_pydantic_ai_asks_for_that_the_toolbox_would_skip_refuses_the_call(
    clerks: Clerks,
) -> None:
    """ApprovalRequiredToolset asks a person for charges over 1000; the toolbox's
    charge_card runs without one: the charge is refused before it runs, and the
    reservation made before it is undone."""
    handle = await clerks.client.start_workflow(
        ApprovalByAmount.run, ClerkOrder(amount=1250), saga_id=clerks.new_id()
    )
    report = await handle.result()

    assert report.status == "COMPENSATED"
    assert "'charge_card' was not run" in (report.failure or "")
    assert clerks.shop.charges() == [] and clerks.shop.shipments() == []
    assert clerks.shop.calls("charge_card") == []
    assert phases(clerks.store, handle.id) == [
        ("SAGA_OPENED", 0), ("INTENT", 1), ("EXECUTED", 1), ("COMPENSATING", 0),
        ("COMPENSATED", 1), ("SAGA_CLOSED", 0),
    ]  # fmt: skip
    await verified(clerks, handle)
    # The clerk was told, and its next call was not run either: the saga had failed.
    assert [t.split(":")[0] for t in report.told] == ["charge_card", "ship_order"]
    assert "'charge_card' was not run" in report.told[0]
    assert "the saga has already failed" in report.told[1]


async def test_a_small_charge_the_same_toolset_does_not_gate_runs(clerks: Clerks) -> None:
    handle = await clerks.client.start_workflow(
        ApprovalByAmount.run, ClerkOrder(amount=900), saga_id=clerks.new_id()
    )
    assert (await handle.result()).status == "COMPLETED"
    assert [c["amount"] for c in clerks.shop.charges()] == [900]


async def test_a_run_that_fails_after_two_steps_undoes_them(clerks: Clerks) -> None:
    """The run exceeds its budget of model requests (UsageLimitExceeded, raised in the
    workflow): the saga block is left with the run's error, and compensates."""
    handle = await clerks.client.start_workflow(
        ClerkOnABudget.run, ClerkOrder(), saga_id=clerks.new_id()
    )
    report = await handle.result()

    assert report.status == "COMPENSATED" and report.agent_said is None
    assert (report.failure or "").startswith("UsageLimitExceeded: ")
    assert phases(clerks.store, handle.id)[-4:] == [
        ("COMPENSATING", 0), ("COMPENSATED", 2), ("COMPENSATED", 1), ("SAGA_CLOSED", 0),
    ]  # fmt: skip
    await verified(clerks, handle)
    assert clerks.shop.stock("widget") == INITIAL_STOCK["widget"]
    assert [c["refunded"] for c in clerks.shop.charges()] == [True]


async def test_a_cancel_while_the_wire_waits_compensates_and_stays_a_cancel(
    clerks: Clerks,
) -> None:
    handle, _ = await wire_awaiting(clerks)
    await clerks.client.cancel(handle.id, actor="olivia", reason="customer called back")

    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    assert isinstance(failed.value.cause, CancelledError)
    entries = await verified(clerks, handle)
    assert [(e.phase.value, e.step) for e in entries][-6:] == UNDONE_AFTER_THE_WIRE
    assert "customer called back" in entries[-1].result["first_failure"]
    assert clerks.shop.wires() == [] and clerks.shop.stock("widget") == INITIAL_STOCK["widget"]
    assert await failed_workflow_tasks(handle) == []
