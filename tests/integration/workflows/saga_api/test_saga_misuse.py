"""The saga API under misuse, each case found by an outside attack on it: calls not
awaited one at a time, a swallowed cancellation, a workflow's own handler waiting for
the saga, a listed failure type, a state forwarded into a continued run, a call after
the block. Each shows what the tools really did (the shop's record) and the journal."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError, WorkflowUpdateStage
from temporalio.exceptions import ApplicationError

from tests.integration.workflows.saga_api.conftest import Orders, planted_charge
from tests.support.user_workflows import (
    CallsAfterTheBlock,
    ForgetsToAwait,
    ForwardInput,
    ForwardsInput,
    OpensLater,
    ParallelWires,
    SwallowsCancel,
    WaitsForTheEnd,
)
from tests.support.workers import assert_chain_closed, eventually, phases

pytestmark = [pytest.mark.temporal, pytest.mark.postgres, pytest.mark.timeout(60)]


async def failure(handle: Any) -> ApplicationError:
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError), repr(cause)
    return cause


async def test_parallel_irreversible_calls_never_cross_their_approvals(orders: Orders) -> None:
    """Two wires at once (asyncio.gather runs each in a task of its own): refused before
    either is a step; no wire goes out, the charge is refunded."""
    handle = await orders.client.start_workflow(ParallelWires.run, saga_id=orders.new_id())
    error = await failure(handle)

    assert error.type == "SagaUsageError" and "another task" in error.message
    assert orders.shop.wires() == []
    entries = assert_chain_closed(orders.store, handle.id)
    assert not any(e.step >= 2 for e in entries)  # neither wire became a step
    assert [c["refunded"] for c in orders.shop.charges()] == [True]


async def test_a_call_from_a_task_of_its_own_is_refused_and_runs_nothing(orders: Orders) -> None:
    """ensure_future(saga.call(...)) left behind: refused in its task, never run; the
    saga closes with what the block did."""
    handle = await orders.client.start_workflow(ForgetsToAwait.run, saga_id=orders.new_id())
    assert await handle.result() == "left"

    assert orders.shop.calls("reserve_inventory") == []
    assert phases(orders.store, handle.id)[-2:] == [("EXECUTED", 1), ("SAGA_CLOSED", 0)]


async def test_a_swallowed_cancellation_still_fails_the_saga(orders: Orders) -> None:
    handle = await orders.client.start_workflow(SwallowsCancel.run, saga_id=orders.new_id())
    await orders.client.wait_pending(handle.id)
    await orders.client.cancel(handle.id)
    error = await failure(handle)

    assert error.type == "SagaCompensated" and "saga cancelled" in error.message
    assert orders.shop.calls("reserve_inventory") == []  # the call after it never ran
    assert orders.shop.wires() == [] and [c["refunded"] for c in orders.shop.charges()] == [True]
    entries = assert_chain_closed(orders.store, handle.id)
    assert ("REJECTED", 2) in [(e.phase.value, e.step) for e in entries]


async def test_the_workflows_own_handler_waiting_for_the_end_does_not_hang_the_close(
    orders: Orders,
) -> None:
    handle = await orders.client.start_workflow(WaitsForTheEnd.run, False, saga_id=orders.new_id())
    update = await handle.start_update(
        WaitsForTheEnd.wait_done, wait_for_stage=WorkflowUpdateStage.ACCEPTED
    )
    assert await asyncio.wait_for(handle.result(), 20) == "closed"
    assert await update.result() == "done"
    assert_chain_closed(orders.store, handle.id)


async def test_a_listed_failure_type_compensates(orders: Orders) -> None:
    """ValueError is in the workflow's failure_exception_types: it fails the workflow
    (not its task), so the saga must undo what ran before it."""
    handle = await orders.client.start_workflow(WaitsForTheEnd.run, True, saga_id=orders.new_id())
    await handle.start_update(WaitsForTheEnd.wait_done, wait_for_stage=WorkflowUpdateStage.ACCEPTED)
    error = await failure(handle)

    assert error.type == "SagaCompensated" and "a listed failure type" in error.message
    assert phases(orders.store, handle.id)[-2:] == [("COMPENSATED", 1), ("SAGA_CLOSED", 0)]
    assert [c["refunded"] for c in orders.shop.charges()] == [True]


async def test_a_state_forwarded_into_a_continued_run_is_checked_against_the_journal(
    orders: Orders,
) -> None:
    planted = planted_charge()
    handle = await orders.client.start_workflow(
        ForwardsInput.run, ForwardInput(state=planted), saga_id=orders.new_id()
    )
    error = await failure(handle)

    assert error.type == "SagaUsageError" and "not handed over by the run" in error.message
    assert list(orders.store.entries(handle.id)) == [] and orders.shop.calls() == []


async def test_a_call_after_the_block_is_refused(orders: Orders) -> None:
    handle = await orders.client.start_workflow(CallsAfterTheBlock.run, saga_id=orders.new_id())
    error = await failure(handle)

    assert error.type == "SagaUsageError" and "the saga is closed" in error.message
    assert len(orders.shop.calls("reserve_inventory")) == 1
    view = await eventually(lambda: orders.client.status(handle.id), 10, "a status")
    assert view.status.value == "COMPLETED" and not view.needs_human


async def test_a_saga_not_opened_yet_says_so(orders: Orders) -> None:
    from sagacity.worker.client._client import SagaNotOpenError

    handle = await orders.client.start_workflow(OpensLater.run, saga_id=orders.new_id())
    with pytest.raises(SagaNotOpenError, match="has not opened yet"):
        await orders.client.status(handle.id)
    await handle.signal(OpensLater.on_go)
    assert await handle.result() == "charged"
    assert (await orders.client.status(handle.id)).status.value == "COMPLETED"
