"""Fixtures of the saga-API tests: the user's order workflow on a worker with
SagacityPlugin, journaling to PostgreSQL in a fresh schema, and a SagaClient."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from temporalio.testing import WorkflowEnvironment

from sagacity.examples.order_workflow import OrderWorkflow
from sagacity.examples.orders import Shop
from sagacity.journal._phases import StepStatus
from sagacity.stores import JournalStore
from sagacity.tools._decorators import ToolKind
from sagacity.tools._toolbox import Toolbox
from sagacity.workflows._models import SagaState, StepReport
from tests.support.pg_fixtures import pg_journal_url, pg_schema, pg_store, shop, workers
from tests.support.rigs import SagaRig, serving
from tests.support.user_workflows import (
    CallsAfterTheBlock,
    ForgetsHandover,
    ForgetsToAwait,
    ForwardsInput,
    LetsFailureOut,
    LongOrder,
    OpensLater,
    OwnApproveSignal,
    ParallelWires,
    SwallowsCancel,
    TwoSagas,
    WaitsForTheEnd,
)

__all__ = ["pg_journal_url", "pg_schema", "pg_store", "shop", "workers"]

USER_WORKFLOWS = [
    OrderWorkflow, LetsFailureOut, TwoSagas, OwnApproveSignal, LongOrder, ForgetsHandover,
    ParallelWires, ForgetsToAwait, SwallowsCancel, WaitsForTheEnd, ForwardsInput,
    CallsAfterTheBlock, OpensLater,
]  # fmt: skip


def planted_charge() -> SagaState:
    """A saga state claiming step 1 charged a card: what a starter who could hand the saga
    a state would plant, to have a refund run on someone else's charge."""
    return SagaState(
        next_step=1,
        steps=[
            StepReport(step=1, tool="charge_card", status=StepStatus.EXECUTED,
                       tool_kind=ToolKind.COMPENSABLE)
        ],
    )  # fmt: skip


class Orders(SagaRig[Shop]):
    """The user's workflows (USER_WORKFLOWS) on a worker journaling to PostgreSQL."""

    id_prefix = "order"


@pytest.fixture
async def orders(
    temporal_env: WorkflowEnvironment, pg_store: JournalStore, shop: Shop
) -> AsyncIterator[Orders]:
    toolbox = Toolbox.build(shop)
    async with serving(temporal_env.client, pg_store, toolbox, USER_WORKFLOWS, "orders") as (
        client,
        task_queue,
    ):
        yield Orders(client, pg_store, shop, task_queue)
