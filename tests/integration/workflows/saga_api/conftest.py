"""Fixtures of the saga-API tests: the user's order workflow on a worker with
SagacityPlugin, journaling to PostgreSQL in a fresh schema, and a SagaClient."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from temporalio.testing import WorkflowEnvironment

from sagacity.examples.order_workflow import OrderWorkflow
from sagacity.examples.orders import Shop
from sagacity.stores import JournalStore
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker.client._saga_client import SagaClient
from tests.support.pg_fixtures import pg_journal_url, pg_schema, pg_store, shop, workers
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


@dataclass
class Orders:
    client: SagaClient
    store: JournalStore
    shop: Shop
    task_queue: str

    def new_id(self) -> str:
        return f"order-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def orders(
    temporal_env: WorkflowEnvironment, pg_store: JournalStore, shop: Shop
) -> AsyncIterator[Orders]:
    task_queue = f"orders-{uuid.uuid4().hex[:8]}"
    worker = new_worker(
        temporal_env.client,
        store=pg_store,
        toolbox=Toolbox.build(shop),
        task_queue=task_queue,
        workflows=USER_WORKFLOWS,
    )
    client = SagaClient(temporal_env.client, task_queue=task_queue, store=pg_store)
    async with worker:
        yield Orders(client, pg_store, shop, task_queue)
