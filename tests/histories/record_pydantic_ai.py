"""The worker of the Pydantic AI clerk tests, and the recorder of the clerk's histories
that test_clerk_replay.py replays.

    .venv/bin/python -m tests.histories.record_pydantic_ai

Starts its own dev server and a worker (SagacityPlugin and Pydantic AI's plugin on its
client), runs each flow to its end and writes `tests/histories/pydantic_ai/<flow>.json`.
Commit the files (tests/histories says when to record).
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from temporalio.client import Client, WorkflowHandle, WorkflowHistory
from temporalio.worker import Replayer, Worker

from sagacity.contrib.pydantic_ai import check_agent
from sagacity.examples.orders import Shop
from sagacity.examples.pydantic_ai_order import ClerkOrder, OrderClerk, clerk
from sagacity.stores import JournalStore
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._plugin import SagacityPlugin
from sagacity.worker.client._saga_client import SagaClient
from tests.histories import PYDANTIC_AI
from tests.histories._recording import record_each
from tests.integration.contrib.pydantic_ai.agents import ApprovalByAmount, ClerkOnABudget

HISTORIES = PYDANTIC_AI
IBAN = "DE89370400440532013000"
WORKFLOWS = [OrderClerk, ApprovalByAmount, ClerkOnABudget]

Handle = WorkflowHandle[Any, Any]


async def clerk_worker(
    target: str, store: JournalStore, shop: Shop, task_queue: str
) -> tuple[Worker, SagaClient]:
    """A worker for the clerks, wired as examples/pydantic_ai_order.py wires its own."""
    toolbox = Toolbox.build(shop)
    check_agent(clerk, toolbox)
    plugin = SagacityPlugin(store=store, toolbox=toolbox)
    client = await Client.connect(target, plugins=[plugin, PydanticAIPlugin()])
    worker = Worker(client, task_queue=task_queue, workflows=WORKFLOWS)
    return worker, SagaClient(client, task_queue=task_queue, store=store)


async def replay_failure(history: WorkflowHistory) -> Exception | None:
    """Why `history` does not replay against the current code (None: it does)."""
    replayer = Replayer(workflows=WORKFLOWS, plugins=[SagacityPlugin(), PydanticAIPlugin()])
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    return result.replay_failure


async def _start(client: SagaClient, saga_id: str, **order: Any) -> Handle:
    return await client.start_workflow(OrderClerk.run, ClerkOrder(**order), saga_id=saga_id)


async def _ends(handle: Handle, status: str) -> Handle:
    report = await handle.result()
    assert report.status == status, report
    return handle


async def completes(client: SagaClient, saga_id: str) -> Handle:
    return await _ends(await _start(client, saga_id), "COMPLETED")


async def ship_fails(client: SagaClient, saga_id: str) -> Handle:
    return await _ends(await _start(client, saga_id, address="nowhere"), "COMPENSATED")


async def approved_wire(client: SagaClient, saga_id: str) -> Handle:
    handle = await _start(client, saga_id, supplier_iban=IBAN)
    await client.wait_pending(saga_id, timeout=30)
    await client.approve(saga_id, approver="alice@example.com")
    return await _ends(handle, "COMPLETED")


async def rejected_wire(client: SagaClient, saga_id: str) -> Handle:
    handle = await _start(client, saga_id, supplier_iban=IBAN)
    await client.wait_pending(saga_id, timeout=30)
    await client.reject(saga_id, approver="bob@example.com", reason="unknown supplier")
    return await _ends(handle, "COMPENSATED")


async def approval_not_gated(client: SagaClient, saga_id: str) -> Handle:
    order = ClerkOrder(amount=1250)
    handle = await client.start_workflow(ApprovalByAmount.run, order, saga_id=saga_id)
    return await _ends(handle, "COMPENSATED")


async def run_fails(client: SagaClient, saga_id: str) -> Handle:
    handle = await client.start_workflow(ClerkOnABudget.run, ClerkOrder(), saga_id=saga_id)
    return await _ends(handle, "COMPENSATED")


FLOWS: dict[str, Callable[[SagaClient, str], Awaitable[Handle]]] = {
    f.__name__: f
    for f in (
        completes,
        ship_fails,
        approved_wire,
        rejected_wire,
        approval_not_gated,
        run_fails,
    )
}


async def record(names: list[str], out: Path = HISTORIES) -> list[Path]:
    return await record_each(names, out, _record_one)


async def _record_one(client: Client, store: JournalStore, shop: Shop, name: str) -> Handle:
    target = client.service_client.config.target_host
    worker, saga_client = await clerk_worker(target, store, shop, f"record-{uuid.uuid4().hex[:8]}")
    async with worker:
        return await FLOWS[name](saga_client, name)


if __name__ == "__main__":
    asyncio.run(record(sys.argv[1:] or list(FLOWS)))
