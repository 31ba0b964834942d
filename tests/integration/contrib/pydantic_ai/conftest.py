"""Fixtures of the Pydantic AI adapter tests: the example's order clerk (and the test's
own agent) on a worker whose client has SagacityPlugin and Pydantic AI's plugin, the
shop's toolbox, a PostgreSQL journal in a fresh schema, and a SagaClient to approve."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.testing import WorkflowEnvironment

from sagacity.examples.orders import Shop
from sagacity.stores import JournalStore
from tests.histories.record_pydantic_ai import clerk_worker
from tests.support.pg_fixtures import pg_journal_url, pg_schema, pg_store, shop
from tests.support.rigs import SagaRig

__all__ = ["pg_journal_url", "pg_schema", "pg_store", "shop"]


class Clerks(SagaRig[Shop]):
    """The clerks on a worker wired as the example wires its own (clerk_worker)."""

    id_prefix = "clerk"


@pytest.fixture
async def clerks(
    temporal_env: WorkflowEnvironment, pg_store: JournalStore, shop: Shop
) -> AsyncIterator[Clerks]:
    target = temporal_env.client.service_client.config.target_host
    task_queue = f"clerk-{uuid.uuid4().hex[:8]}"
    worker, client = await clerk_worker(target, pg_store, shop, task_queue)
    async with worker:
        yield Clerks(client, pg_store, shop, task_queue)
