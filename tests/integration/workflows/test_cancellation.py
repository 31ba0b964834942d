"""Cancellation never abandons compensation.

A cancel raises CancelledError while waiting and ActivityError during an activity; both
must compensate every executed step, and a second cancel during compensation must not
abandon the remaining compensations (the shield is awaited in a loop)."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import WorkflowFailureError

from sagacity.journal._chain import verify_chain
from sagacity.worker.client._client import saga_result
from sagacity.workflows._models import SagaInput
from tests.integration.workflows.test_approval_flows import pending
from tests.support.workflows import (
    CHARGE,
    RESERVE,
    SHIP,
    WIRE,
    accept_when_dirty,
    entries_of,
    eventually,
)


async def _async(value):
    return value


def closing_status(saga, saga_id: str) -> str:
    closed = entries_of(saga.store, saga_id, "SAGA_CLOSED")
    return closed[0].result["status"] if closed else ""


async def assert_cancelled_and_undone(saga, handle) -> None:
    """The cancelled saga's workflow fails, after its charge and reservation were undone
    (newest first) and the saga closed COMPENSATED."""
    with pytest.raises(WorkflowFailureError):
        await saga_result(handle)

    assert [e.step for e in entries_of(saga.store, handle.id, "COMPENSATED")] == [2, 1]
    assert closing_status(saga, handle.id) == "COMPENSATED"
    assert saga.shop.stock("widget") == 10 and saga.shop.charges()[0]["refunded"]


async def test_cancel_while_awaiting_approval_compensates(saga) -> None:
    handle = await saga.start(SagaInput(plan=[RESERVE, CHARGE, WIRE]))
    await pending(handle)

    await handle.cancel()
    await assert_cancelled_and_undone(saga, handle)
    assert saga.shop.wires() == []
    assert verify_chain(handle.id, saga.store.entries(handle.id)).ok


async def test_cancel_during_a_tool_compensates_and_reports_the_interrupted_step(saga) -> None:
    saga.shop.set_fault("ship_delay", "30")
    handle = await saga.start(
        SagaInput(plan=[RESERVE, CHARGE, SHIP], tool_heartbeat_timeout_seconds=5)
    )
    await eventually(
        lambda: _async([e for e in entries_of(saga.store, handle.id, "INTENT") if e.step == 3])
    )

    await handle.cancel()
    # The interrupted step's outcome is unknown: the saga compensates the rest, then waits
    # for a person (a cancel stops the work; it does not decide the dirt).
    dirty = await accept_when_dirty(handle, reason="the carrier was never called")
    assert [(d.step, d.kind) for d in dirty] == [(3, "UNKNOWN_OUTCOME")]
    with pytest.raises(WorkflowFailureError):
        await saga_result(handle)

    assert [e.step for e in entries_of(saga.store, handle.id, "COMPENSATED")] == [2, 1]
    closed = entries_of(saga.store, handle.id, "SAGA_CLOSED")[0].result
    assert closed["status"] == "ACCEPTED"
    assert closed["unknown_outcome_steps"] == [3]
    assert saga.store.is_fenced(handle.id, 3)
    assert saga.shop.shipments() == []
    assert saga.shop.stock("widget") == 10


async def test_second_cancel_during_compensation_does_not_abandon_it(saga) -> None:
    saga.shop.set_fault("refund_delay", "2")
    handle = await saga.start(SagaInput(plan=[RESERVE, CHARGE, WIRE]))
    await pending(handle)

    await handle.cancel()
    # The refund is in its delay: the saga is compensating, well before it closes.
    await eventually(lambda: _async(saga.shop.fault("refund_delaying")))
    await handle.cancel()
    await assert_cancelled_and_undone(saga, handle)


async def test_a_decision_racing_a_cancel_never_hangs_the_saga(saga) -> None:
    """Cancelled while awaiting approval, a valid decision that arrives during compensation
    is refused (nothing pending), and the saga still closes; the abandoned request gets
    its REJECTED by sagacity:cancelled."""
    from temporalio.client import WorkflowUpdateFailedError

    from tests.integration.workflows.test_approval_flows import decision

    saga.shop.set_fault("refund_delay", "3")
    handle = await saga.start(SagaInput(plan=[RESERVE, CHARGE, WIRE]))
    p = await pending(handle)
    await handle.cancel()
    # The refund is in its delay: the saga is compensating, well before it closes.
    await eventually(lambda: _async(saga.shop.fault("refund_delaying")))
    with pytest.raises(WorkflowUpdateFailedError):
        await handle.execute_update("decide", {**decision(p), "approve": True})
    with pytest.raises(WorkflowFailureError):
        await asyncio.wait_for(saga_result(handle), 30)

    rejected = entries_of(saga.store, handle.id, "REJECTED")
    assert [(e.step, e.actor) for e in rejected] == [(3, "sagacity:cancelled")]
    assert entries_of(saga.store, handle.id, "APPROVED") == []
    assert closing_status(saga, handle.id) == "COMPENSATED"
    assert saga.shop.wires() == []
