"""Fixtures of the Pydantic AI adapter tests: the example's order clerk (and the test's
own agent) on a worker whose client has SagacityPlugin and Pydantic AI's plugin, the
shop's toolbox, a PostgreSQL journal in a fresh schema, and a SagaClient to approve."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from temporalio.testing import WorkflowEnvironment

from sagacity.examples.orders import Shop
from sagacity.stores import JournalStore
from sagacity.worker.client._saga_client import SagaClient
from tests.histories.record_pydantic_ai import clerk_worker
from tests.support.pg_fixtures import pg_journal_url, pg_schema, pg_store, shop

__all__ = ["pg_journal_url", "pg_schema", "pg_store", "shop"]


@dataclass
class Clerks:
    client: SagaClient
    store: JournalStore
    shop: Shop

    def new_id(self) -> str:
        return f"clerk-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def clerks(
    temporal_env: WorkflowEnvironment, pg_store: JournalStore, shop: Shop
) -> AsyncIterator[Clerks]:
    target = temporal_env.client.service_client.config.target_host
    worker, client = await clerk_worker(target, pg_store, shop, f"clerk-{uuid.uuid4().hex[:8]}")
    async with worker:
        yield Clerks(client, pg_store, shop)
