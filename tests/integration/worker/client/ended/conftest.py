"""Fixtures of the ended-saga tests: the order saga (examples.order_workflow) and a parent
that starts it as a child, on a worker built by new_worker() on the session's dev server,
journaling to SQLite or PostgreSQL (both, by parameter), with a SagaClient holding the
journal and the `sagacity` CLI pointed at the same journal."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from sagacity.examples.order_workflow import Order, OrderWorkflow
from sagacity.examples.orders import INITIAL_STOCK, Shop
from sagacity.stores import JournalStore, open_store
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker.client._saga_client import SagaClient
from tests.integration.worker.client.ended.parents import OrdersParent, ParentInput, Stranger
from tests.support.cli import Ran, invoke_sync
from tests.support.pg_fixtures import pg_journal_url, pg_schema
from tests.support.workers import assert_chain_closed, eventually

__all__ = ["pg_journal_url", "pg_schema"]

IBAN = "DE89370400440532013000"
JOURNALS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


def order(**changes: Any) -> Order:
    """An order that reserves 2 widgets, charges 1250, ships, then waits for the
    approval of its supplier wire (irreversible)."""
    base = {"sku": "widget", "qty": 2, "amount": 1250, "address": "Main St 1"}
    return Order.model_validate({**base, "supplier_iban": IBAN, **changes})


@dataclass
class Ended:
    temporal: Client
    client: SagaClient
    store: JournalStore
    journal_url: str
    shop: Shop
    task_queue: str
    env: dict[str, str]

    def new_id(self, prefix: str = "order") -> str:
        return f"{prefix}-{uuid.uuid4().hex[:12]}"

    async def cli(self, *args: str) -> Ran:
        """`sagacity ARGS` in-process (in a thread), pointed at this journal and server."""
        return await asyncio.to_thread(invoke_sync, list(args), self.env, None)

    async def awaiting_approval(self, saga_id: str) -> None:
        """Until the saga waits on its wire's approval (steps 1-3 ran)."""

        async def pending() -> bool:
            try:
                return (await self.client.status(saga_id)).pending_approval is not None
            except Exception:  # not started, or not opened yet
                return False

        await eventually(pending, 30, f"{saga_id} awaiting approval")

    async def start(self, saga_id: str, **kwargs: Any) -> WorkflowHandle[Any, Any]:
        return await self.temporal.start_workflow(
            OrderWorkflow.run, order(), id=saga_id, task_queue=self.task_queue, **kwargs
        )

    def undone(self, saga_id: str) -> dict[str, Any]:
        """The shop's ledger read back and the journal: the stock released, the card
        refunded, no wire; the chain closed after both compensations, COMPENSATED.
        Returns what the closing entry says."""
        assert self.shop.stock("widget") == INITIAL_STOCK["widget"]
        assert [(c["key"], c["refunded"]) for c in self.shop.charges()] == [(f"{saga_id}:2", True)]
        assert self.shop.wires() == []
        entries = assert_chain_closed(self.store, saga_id)
        tail = [(e.phase.value, e.step) for e in entries][-3:]
        assert tail == [("COMPENSATED", 2), ("COMPENSATED", 1), ("SAGA_CLOSED", 0)]
        closing = entries[-1].result
        assert isinstance(closing, dict) and closing["status"] == "COMPENSATED"
        return closing

    async def awaiting_order(self) -> str:
        """A new order saga, once it waits on its wire's approval: its id."""
        saga_id = self.new_id()
        await self.start(saga_id)
        await self.awaiting_approval(saga_id)
        return saga_id

    async def start_parent(self, **options: Any) -> tuple[WorkflowHandle[Any, Any], str]:
        """An OrdersParent whose child saga places order() (ParentInput `options`): the
        parent's handle and the child's id, `<parent id>/order`."""
        parent_id = self.new_id("parent")
        child_id = f"{parent_id}/order"
        parent = await self.temporal.start_workflow(
            OrdersParent.run,
            ParentInput(child_id=child_id, order=order(), **options),
            id=parent_id,
            task_queue=self.task_queue,
        )
        return parent, child_id


@pytest.fixture(params=JOURNALS)
def journal_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        url: str = request.getfixturevalue("pg_journal_url")
        return url
    return f"sqlite:///{tmp_path}/journal.db"


@pytest.fixture
def ended_store(journal_url: str) -> Iterator[JournalStore]:
    store = open_store(journal_url)
    yield store
    store.close()


@pytest.fixture
async def ended(
    temporal_env: WorkflowEnvironment, ended_store: JournalStore, journal_url: str, tmp_path: Path
) -> AsyncIterator[Ended]:
    shop = Shop(tmp_path / "shop.db")
    task_queue = f"ended-{uuid.uuid4().hex[:8]}"
    client = SagaClient(temporal_env.client, task_queue=task_queue, store=ended_store)
    env = {
        "TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host,
        "TEMPORAL_NAMESPACE": temporal_env.client.namespace,
        "SAGACITY_TASK_QUEUE": task_queue,
        "SAGACITY_JOURNAL_URL": journal_url,
    }
    worker = new_worker(
        temporal_env.client,
        store=ended_store,
        toolbox=Toolbox.build(shop),
        task_queue=task_queue,
        workflows=[OrderWorkflow, OrdersParent, Stranger],
    )
    async with worker:
        yield Ended(temporal_env.client, client, ended_store, journal_url, shop, task_queue, env)
