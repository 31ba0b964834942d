"""Fixtures of the Pydantic AI adapter tests: the example's order clerk (and the test's
own agents) on a worker whose client has SagacityPlugin and Pydantic AI's plugin, the
shop's toolbox, a PostgreSQL journal in a fresh schema, and a SagaClient to approve."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from sagacity.examples.orders import Shop
from sagacity.examples.pydantic_ai_order import OrderClerk, clerk
from sagacity.integrations.pydantic_ai_saga import check_agent
from sagacity.stores import JournalStore
from sagacity.toolbox import Toolbox
from sagacity.worker.plugin import SagacityPlugin
from sagacity.worker.saga_client import SagaClient
from tests.faults.conftest import pg_journal_url, pg_schema, pg_store, shop

from .agents import ApprovalByAmount

__all__ = ["pg_journal_url", "pg_schema", "pg_store", "shop"]


@dataclass
class Clerks:
    client: SagaClient
    store: JournalStore
    shop: Shop
    task_queue: str

    def new_id(self) -> str:
        return f"clerk-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def clerks(
    temporal_env: WorkflowEnvironment, pg_store: JournalStore, shop: Shop
) -> AsyncIterator[Clerks]:
    toolbox = Toolbox.build(shop)
    check_agent(clerk, toolbox)
    plugin = SagacityPlugin(store=pg_store, toolbox=toolbox)
    target = temporal_env.client.service_client.config.target_host
    client = await Client.connect(target, plugins=[plugin, PydanticAIPlugin()])
    task_queue = f"clerk-{uuid.uuid4().hex[:8]}"
    worker = Worker(client, task_queue=task_queue, workflows=[OrderClerk, ApprovalByAmount])
    saga_client = SagaClient(client, task_queue=task_queue, store=pg_store)
    async with worker:
        yield Clerks(saga_client, pg_store, shop, task_queue)
