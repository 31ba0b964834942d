"""The order workflow's histories replay against the current code: the committed ones
(recorded by tests/histories/record_saga_api.py) and ones recorded now. The replayer is
set up by SagacityPlugin, as a user's replayer would be."""

from __future__ import annotations

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from sagacity.examples.order_workflow import OrderWorkflow
from sagacity.worker._plugin import SagacityPlugin
from tests.histories._recording import assert_replayed, committed, recorded_flows
from tests.histories.record_saga_api import FLOWS, HISTORIES
from tests.integration.workflows.saga_api.conftest import Orders
from tests.support.user_workflows import ForgetsToCompensate


def _replayer(*workflows: type) -> Replayer:
    # A replayer needs no journal or toolbox: the plugin sets the converter and sandbox.
    return Replayer(workflows=list(workflows), plugins=[SagacityPlugin()])


async def _failure(history: WorkflowHistory, cls: type = OrderWorkflow) -> Exception | None:
    result = await _replayer(cls).replay_workflow(history, raise_on_replay_failure=False)
    return result.replay_failure


def test_every_order_flow_has_a_history() -> None:
    assert recorded_flows(HISTORIES) == set(FLOWS)


@pytest.mark.parametrize("name", sorted(FLOWS))
async def test_committed_order_history_replays(name: str) -> None:
    assert_replayed(name, await _failure(committed(HISTORIES, name)))


async def test_replay_catches_an_edit_that_drops_compensation() -> None:
    failure = await _failure(committed(HISTORIES, "fails_at_step_3"), ForgetsToCompensate)
    assert isinstance(failure, workflow.NondeterminismError), repr(failure)


@pytest.mark.temporal
@pytest.mark.postgres
@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(FLOWS))
async def test_fresh_order_history_replays(orders: Orders, name: str) -> None:
    handle = await FLOWS[name](orders.client, orders.new_id())
    assert_replayed(name, await _failure(await handle.fetch_history()))
