"""The rig of the saga-API and adapter tests: a worker serving the user's workflows on a
task queue of its own, the SagaClient that starts them, the journal they write and the
shop their tools act on. One shape, so every suite's fixture reads the same way."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar

from temporalio.client import Client

from sagacity.stores import JournalStore
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker.client._saga_client import SagaClient

ShopT = TypeVar("ShopT")


@dataclass
class SagaRig(Generic[ShopT]):
    """What a test drives: the client, the journal, the shop, the worker's task queue."""

    client: SagaClient
    store: JournalStore
    shop: ShopT
    task_queue: str
    id_prefix: ClassVar[str] = "saga"
    """What a saga id of the suite starts with, so a leftover says which suite made it."""

    def new_id(self) -> str:
        return f"{self.id_prefix}-{uuid.uuid4().hex[:12]}"


@asynccontextmanager
async def serving(
    client: Client,
    store: JournalStore,
    toolbox: Toolbox,
    workflows: Sequence[type],
    queue_prefix: str,
) -> AsyncIterator[tuple[SagaClient, str]]:
    """A production worker (new_worker) of `workflows` on a fresh task queue, running
    while the block runs; yields a SagaClient on that queue and the queue's name."""
    task_queue = f"{queue_prefix}-{uuid.uuid4().hex[:8]}"
    worker = new_worker(
        client, store=store, toolbox=toolbox, task_queue=task_queue, workflows=workflows
    )
    async with worker:
        yield SagaClient(client, task_queue=task_queue, store=store), task_queue
