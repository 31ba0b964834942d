"""Record the histories of the order workflow (examples/order_workflow.py) that
test_order_replay.py replays.

    .venv/bin/python -m tests.histories.record_saga_api

Starts its own dev server and a worker built by `new_worker(workflows=[OrderWorkflow])`,
runs each flow to its end and writes `tests/histories/saga_api/<flow>.json`. Commit the
files (tests/histories says when to record). The flows are importable, so the test also
records them fresh and replays.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowFailureError, WorkflowHandle

from sagacity.examples.order_workflow import Order, OrderWorkflow
from sagacity.examples.orders import Shop
from sagacity.stores import JournalStore
from sagacity.worker.client._saga_client import SagaClient
from tests.histories import SAGA_API
from tests.histories._recording import record_each

HISTORIES = SAGA_API
IBAN = "DE89370400440532013000"
BASE = {"sku": "widget", "qty": 2, "amount": 1250, "address": "Main St 1"}

Handle = WorkflowHandle[Any, Any]


async def _start(client: SagaClient, saga_id: str, **changes: Any) -> Handle:
    order = Order.model_validate({**BASE, **changes})
    return await client.start_workflow(OrderWorkflow.run, order, saga_id=saga_id)


async def _pending(client: SagaClient, saga_id: str) -> None:
    for _ in range(400):
        if (await client.status(saga_id)).pending_approval is not None:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{saga_id} never awaited approval")


async def completes(client: SagaClient, saga_id: str) -> Handle:
    handle = await _start(client, saga_id)
    assert (await handle.result()).status == "COMPLETED"
    return handle


async def fails_at_step_3(client: SagaClient, saga_id: str) -> Handle:
    handle = await _start(client, saga_id, address="nowhere")
    assert (await handle.result()).status == "COMPENSATED"
    return handle


async def swallowed(client: SagaClient, saga_id: str) -> Handle:
    handle = await _start(client, saga_id, address="nowhere", ship_best_effort=True)
    assert (await handle.result()).status == "COMPENSATED"
    return handle


async def approved_wire(client: SagaClient, saga_id: str) -> Handle:
    handle = await _start(client, saga_id, supplier_iban=IBAN)
    await _pending(client, saga_id)
    await client.approve(saga_id, approver="alice@example.com")
    assert (await handle.result()).status == "COMPLETED"
    return handle


async def cancelled_in_approval(client: SagaClient, saga_id: str) -> Handle:
    handle = await _start(client, saga_id, supplier_iban=IBAN)
    await _pending(client, saga_id)
    await client.cancel(saga_id)
    try:
        await handle.result()
    except WorkflowFailureError:
        return handle
    raise AssertionError("the cancelled order completed")


FLOWS: dict[str, Callable[[SagaClient, str], Awaitable[Handle]]] = {
    f.__name__: f
    for f in (completes, fails_at_step_3, swallowed, approved_wire, cancelled_in_approval)
}


async def record(names: list[str], out: Path = HISTORIES) -> list[Path]:
    return await record_each(names, out, _record_one)


async def _record_one(client: Client, store: JournalStore, shop: Shop, name: str) -> Handle:
    from sagacity.tools._toolbox import Toolbox
    from sagacity.worker._app import new_worker

    task_queue = f"record-{uuid.uuid4().hex[:8]}"
    worker = new_worker(
        client,
        store=store,
        toolbox=Toolbox.build(shop),
        task_queue=task_queue,
        workflows=[OrderWorkflow],
    )
    async with worker:
        return await FLOWS[name](SagaClient(client, task_queue=task_queue), name)


if __name__ == "__main__":
    asyncio.run(record(sys.argv[1:] or list(FLOWS)))
