"""A saga started as a child workflow with start_child_saga compensates when its parent
ends: the parent-close policy is REQUEST_CANCEL, so the server asks the child to cancel
and the saga's cancellation path undoes its executed steps and closes its journal. With
Temporal's default (TERMINATE) the child would be terminated with its stock reserved and
its card charged, and its journal open."""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from sagacity.examples.orders import INITIAL_STOCK
from tests.integration.worker.client.ended.conftest import Ended
from tests.integration.worker.client.ended.parents import OrdersParent
from tests.support.workers import assert_chain_closed, eventually

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(90)]


def assert_undone(ended: Ended, child_id: str) -> None:
    """Everything undone (Ended.undone), and the close says the child saga was cancelled
    (by its parent's end)."""
    assert "saga cancelled" in ended.undone(child_id)["first_failure"]


@pytest.mark.parametrize("parent_ends", ["fails", "is terminated"])
async def test_a_child_saga_whose_parent_ends_is_compensated(
    ended: Ended, parent_ends: str
) -> None:
    parent, child_id = await ended.start_parent()
    await ended.awaiting_approval(child_id)
    assert ended.shop.stock("widget") == INITIAL_STOCK["widget"] - 2  # it really reserved

    if parent_ends == "fails":
        await parent.signal(OrdersParent.give_up)
        with pytest.raises(WorkflowFailureError) as failed:
            await parent.result()
        assert isinstance(failed.value.cause, ApplicationError)
        assert failed.value.cause.type == "ParentGaveUp"
    else:
        await parent.terminate(reason="operator stops the parent")

    child = ended.temporal.get_workflow_handle(child_id)
    with pytest.raises(WorkflowFailureError):  # cancelled: the saga compensated first
        await child.result()
    assert_undone(ended, child_id)
    listed = await ended.client.needing_human()
    assert child_id not in {i.summary.saga_id for i in listed}  # closed: nothing flagged


async def test_the_helper_refuses_terminate(ended: Ended) -> None:
    parent, child_id = await ended.start_parent(policy="TERMINATE")
    with pytest.raises(WorkflowFailureError) as failed:
        await parent.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "SagaUsageError"
    assert "TERMINATE" in cause.message and "REQUEST_CANCEL" in cause.message
    assert list(ended.store.entries(child_id)) == []  # no child was started
    assert ended.shop.calls() == []


async def test_an_abandoned_child_saga_runs_on_alone(ended: Ended) -> None:
    """ABANDON, the other policy the helper takes: the parent's failure does not touch
    the child, which goes on waiting for its approval with its journal open (and closes
    it itself once decided)."""
    parent, child_id = await ended.start_parent(policy="ABANDON")
    await ended.awaiting_approval(child_id)
    await parent.signal(OrdersParent.give_up)
    with pytest.raises(WorkflowFailureError):
        await parent.result()
    await ended.client.reject(child_id, approver="alice@example.com", reason="no wire")

    async def closed() -> bool:
        head = ended.store.head(child_id)
        return head is not None and head.phase.value == "SAGA_CLOSED"

    await eventually(closed, 30, "the abandoned child closing its journal")
    entries = assert_chain_closed(ended.store, child_id)
    assert "rejected: no wire" in entries[-1].result["first_failure"]
    assert ended.shop.stock("widget") == INITIAL_STOCK["widget"]
