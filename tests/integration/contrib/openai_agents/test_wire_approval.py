"""The wire of the order agent: `needs_approval=True` on the SDK's tool waits on the
saga's payload-bound gate (not the SDK's own interruption), runs with exactly the
approved arguments once approved, and compensates the order when rejected."""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import CancelledError
from temporalio.worker import Replayer

from sagacity.approval._judge import approval_hash
from sagacity.contrib.openai_agents import SagaAgentsPlugin
from sagacity.examples.openai_agents_order import AgentOrderWorkflow
from sagacity.examples.orders import INITIAL_STOCK
from sagacity.journal._phases import Phase, SagaStatus
from sagacity.worker._plugin import SagacityPlugin
from tests.integration.contrib.openai_agents.conftest import AgentRig, OrderHandle
from tests.support.chat_server import call, completion
from tests.support.workers import entries_of, eventually, phases

pytestmark = [pytest.mark.temporal, pytest.mark.postgres, pytest.mark.timeout(90)]

IBAN = "DE89370400440532013000"
WIRE = {"iban": IBAN, "amount": 2500}
APPROVED_PAYLOAD = {"iban": IBAN, "amount": 2500, "currency": "EUR"}


async def wire_pending(rig: AgentRig) -> OrderHandle:
    """An order whose model reserves and charges (two calls in one answer), then asks for
    the wire; returned once the saga waits for the wire's approval."""
    rig.server.script(
        completion(
            call("reserve_inventory", {"sku": "widget", "qty": 2}, "r"),
            call("charge_card", {"amount": 2500}, "c"),
        ),
        completion(call("send_wire_transfer", WIRE, "w")),
        completion(content="done"),
    )
    handle = await rig.start()

    async def waiting() -> bool:
        view = await rig.sagas.status(handle.id)
        return view.status is SagaStatus.AWAITING_APPROVAL

    await eventually(waiting, 30, "the wire awaiting approval")
    return handle


async def test_the_wire_waits_then_runs_with_exactly_the_approved_args(rig: AgentRig) -> None:
    handle = await wire_pending(rig)
    view = await rig.sagas.status(handle.id)
    pending = view.pending_approval
    assert pending is not None
    assert (pending.step, pending.tool, pending.payload) == (
        3, "send_wire_transfer", APPROVED_PAYLOAD,
    )  # fmt: skip
    assert pending.payload_sha256 == approval_hash("send_wire_transfer", APPROVED_PAYLOAD)
    # Waiting: nothing wired, and the model has not been asked again (the SDK's tool call
    # is the step that waits).
    assert rig.shop.wires() == [] and len(rig.server.requests) == 2
    [asked] = entries_of(rig.store, handle.id, Phase.AWAITING_APPROVAL)
    assert asked.result["payload_sha256"] == pending.payload_sha256

    decision = await rig.sagas.approve(handle.id, approver="alice@example.com")
    report = await handle.result()

    assert report.status == "COMPLETED" and report.agent_said == "done"
    [wire] = rig.shop.wires()
    assert {k: wire[k] for k in ("iban", "amount", "currency")} == APPROVED_PAYLOAD
    [approved] = entries_of(rig.store, handle.id, Phase.APPROVED)
    assert (approved.seq, approved.actor) == (decision.seq, "alice@example.com")
    assert approved.result["payload_sha256"] == pending.payload_sha256
    [executed] = [e for e in entries_of(rig.store, handle.id, Phase.EXECUTED) if e.step == 3]
    assert executed.result["iban"] == IBAN and executed.result["amount"] == 2500
    assert phases(rig.store, handle.id) == [
        ("SAGA_OPENED", 0), ("INTENT", 1), ("EXECUTED", 1), ("INTENT", 2), ("EXECUTED", 2),
        ("AWAITING_APPROVAL", 3), ("APPROVED", 3), ("INTENT", 3), ("EXECUTED", 3),
        ("SAGA_CLOSED", 0),
    ]  # fmt: skip
    assert rig.sagas.verify(handle.id).ok
    assert rig.shop.stock("widget") == INITIAL_STOCK["widget"] - 2


async def test_a_rejected_wire_compensates_the_order(rig: AgentRig) -> None:
    handle = await wire_pending(rig)

    await rig.sagas.reject(handle.id, approver="bob@example.com", reason="unknown supplier")
    report = await handle.result()

    assert report.status == "COMPENSATED" and report.agent_said == "done"
    assert "rejected" in (report.failure or "")
    assert rig.shop.wires() == []
    assert [c["refunded"] for c in rig.shop.charges()] == [True]
    assert rig.shop.stock("widget") == INITIAL_STOCK["widget"]
    assert phases(rig.store, handle.id)[-6:] == [
        ("AWAITING_APPROVAL", 3), ("REJECTED", 3), ("COMPENSATING", 0), ("COMPENSATED", 2),
        ("COMPENSATED", 1),
        ("SAGA_CLOSED", 0),
    ]  # fmt: skip
    # The SDK told the model the wire did not run; the model said "done" regardless.
    [wire_output] = [
        m["content"] for m in rig.server.messages(2, "tool") if m["tool_call_id"] == "w"
    ]
    assert "rejected" in wire_output
    assert rig.sagas.verify(handle.id).ok


async def test_the_agents_history_replays(rig: AgentRig) -> None:
    """The run's history (two tool calls in one answer, an approval) replays without
    nondeterminism: the router's order of steps is the workflow's own."""
    handle = await wire_pending(rig)
    await rig.sagas.approve(handle.id, approver="alice@example.com")
    await handle.result()

    replayer = Replayer(
        workflows=[AgentOrderWorkflow], plugins=[SagacityPlugin(), SagaAgentsPlugin()]
    )
    replayed = await replayer.replay_workflow(await handle.fetch_history())
    assert replayed.replay_failure is None


async def test_a_cancel_while_the_wire_waits_stops_the_agent_and_compensates(
    rig: AgentRig,
) -> None:
    handle = await wire_pending(rig)

    await rig.sagas.cancel(handle.id)
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()

    assert isinstance(failed.value.cause, CancelledError)
    assert len(rig.server.requests) == 2  # the agent was stopped, not asked again
    assert phases(rig.store, handle.id)[-6:] == [
        ("AWAITING_APPROVAL", 3), ("REJECTED", 3), ("COMPENSATING", 0), ("COMPENSATED", 2),
        ("COMPENSATED", 1),
        ("SAGA_CLOSED", 0),
    ]  # fmt: skip
    assert rig.shop.wires() == [] and [c["refunded"] for c in rig.shop.charges()] == [True]
    assert rig.sagas.verify(handle.id).ok
