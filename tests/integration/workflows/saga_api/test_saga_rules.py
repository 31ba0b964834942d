"""The saga API's rules, each tried with a small user workflow (tests/integration/workflows/
user_workflows.py): an uncaught failure, two sagas in one run, a handler name the saga
needs, continue-as-new carrying the saga."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from sagacity.examples.orders import INITIAL_STOCK
from sagacity.journal._phases import SagaStatus
from sagacity.workflows._inspection import SAGA_NEEDS_HUMAN
from sagacity.workflows._models import SagaResult
from tests.integration.workflows.saga_api.conftest import Orders, planted_charge
from tests.support.user_workflows import (
    ForgetsHandover,
    LetsFailureOut,
    LongInput,
    LongOrder,
    OwnApproveSignal,
    TwoSagas,
)
from tests.support.workers import assert_chain_closed, phases

pytestmark = [pytest.mark.temporal, pytest.mark.postgres, pytest.mark.timeout(60)]


async def failure_of(orders: Orders, run: Any, *args: Any) -> tuple[str, ApplicationError]:
    saga_id = orders.new_id()
    handle = await orders.client.start_workflow(run, *args, saga_id=saga_id)
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError), repr(cause)
    return saga_id, cause


async def test_an_uncaught_failure_fails_the_workflow_with_the_saga_result(
    orders: Orders,
) -> None:
    saga_id, error = await failure_of(orders, LetsFailureOut.run, "nowhere")

    assert error.type == "SagaCompensated" and error.non_retryable
    assert "step 2 (ship_order) failed" in error.message
    result = SagaResult.model_validate(error.details[0])
    assert result.status is SagaStatus.COMPENSATED
    assert [(c.step, c.ok) for c in result.compensations] == [(1, True)]
    assert phases(orders.store, saga_id)[-4:] == [
        ("FAILED", 2), ("COMPENSATING", 0), ("COMPENSATED", 1), ("SAGA_CLOSED", 0),
    ]  # fmt: skip
    assert orders.shop.stock("widget") == INITIAL_STOCK["widget"]


async def test_a_second_saga_in_one_run_is_refused(orders: Orders) -> None:
    saga_id, error = await failure_of(orders, TwoSagas.run)

    assert error.type == "SagaUsageError" and "already opened" in error.message
    entries = assert_chain_closed(orders.store, saga_id)  # the first saga closed whole
    assert [e.tool for e in entries if e.phase.value == "INTENT"] == ["reserve_inventory"]
    assert orders.shop.stock("widget") == INITIAL_STOCK["widget"] - 1  # it completed


async def test_a_handler_the_saga_needs_is_refused_before_anything_runs(orders: Orders) -> None:
    saga_id, error = await failure_of(orders, OwnApproveSignal.run)

    assert error.type == "SagaUsageError" and "signal 'approve'" in error.message
    assert list(orders.store.entries(saga_id)) == []
    assert orders.shop.calls() == []


async def test_continue_as_new_carries_the_saga(orders: Orders) -> None:
    saga_id = orders.new_id()
    handle = await orders.client.start_workflow(
        LongOrder.run, LongInput(reservations=5), saga_id=saga_id
    )
    assert await handle.result() == 5

    runs = {e.input.get("run_id") for e in orders.store.entries(saga_id) if e.step == 0 and e.input}
    assert len(runs) == 1  # one SAGA_OPENED, in the first run
    described = await handle.describe()
    assert described.run_id != handle.first_execution_run_id  # it did continue as new
    entries = assert_chain_closed(orders.store, saga_id)
    assert [e.step for e in entries if e.phase.value == "EXECUTED"] == [1, 2, 3, 4, 5]


async def test_a_failure_after_continue_as_new_undoes_steps_of_earlier_runs(
    orders: Orders,
) -> None:
    saga_id, error = await failure_of(
        orders, LongOrder.run, LongInput(reservations=4, fail_at_end=True)
    )

    assert error.type == "SagaCompensated"
    compensated = [e.step for e in orders.store.entries(saga_id) if e.phase.value == "COMPENSATED"]
    assert compensated == [4, 3, 2, 1]
    assert orders.shop.stock("widget") == INITIAL_STOCK["widget"]


async def test_state_planted_in_a_first_run_is_refused(orders: Orders) -> None:
    """A starter who could hand the saga a state could plant an executed step (to have a
    refund run on someone else's charge) or skip the opening entry."""
    planted = planted_charge()
    saga_id, error = await failure_of(
        orders, LongOrder.run, LongInput(reservations=1, fail_at_end=True, state=planted)
    )

    assert error.type == "SagaUsageError" and "first run" in error.message
    assert list(orders.store.entries(saga_id)) == [] and orders.shop.calls() == []


async def test_continuing_as_new_without_the_handover_fails_clearly(orders: Orders) -> None:
    saga_id, error = await failure_of(orders, ForgetsHandover.run, False)

    assert error.type == "SagaUsageError" and "saga.handover()" in error.message
    assert phases(orders.store, saga_id) == [("SAGA_OPENED", 0), ("INTENT", 1), ("EXECUTED", 1)]
    described = await orders.client.handle(saga_id).describe()
    assert described.typed_search_attributes.get(SAGA_NEEDS_HUMAN) is True  # left for a human
