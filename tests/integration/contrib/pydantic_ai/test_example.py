"""examples/pydantic_ai_order.py runs as its docstring says: its worker (journal and shop
in sagacity's data home, Temporal from TEMPORAL_ADDRESS) and its starter, the command
line included, against the session's dev server."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.testing import WorkflowEnvironment

from sagacity import open_store
from sagacity._data_home import default_journal_url
from sagacity.examples.orders import Shop, shop_path
from sagacity.examples.pydantic_ai_order import ClerkOrder, main, place_order, run_worker
from tests.support.workers import assert_chain_closed

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(60)]

IBAN = "DE89370400440532013000"


async def test_the_example_worker_and_starter(
    temporal_env: WorkflowEnvironment,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", temporal_env.client.service_client.config.target_host)
    queue = f"clerk-{uuid.uuid4().hex[:8]}"
    failing_id, wire_id = f"{queue}-2", f"{queue}-3"
    worker = asyncio.create_task(run_worker(queue))
    try:
        failing = await place_order(failing_id, ClerkOrder(address="nowhere"), task_queue=queue)
        await asyncio.to_thread(main, ["--task-queue", queue, "start", wire_id, "--wire", IBAN])
    finally:
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)

    assert (failing.status, failing.agent_said) == (
        "COMPENSATED",
        "Order placed: 2 x widget. All done!",
    )
    out = capsys.readouterr().out
    assert "worker ready" in out
    assert (
        f"approving send_wire_transfer {{'iban': '{IBAN}', 'amount': 1250, 'currency': 'EUR'}}"
        in out
    )
    assert "COMPLETED: the clerk said 'Order placed: 2 x widget. All done!'" in out
    store = open_store(default_journal_url())
    try:
        for saga_id in (failing_id, wire_id):
            assert_chain_closed(store, saga_id)
    finally:
        store.close()
    [wire] = Shop(shop_path()).wires()
    assert (wire["key"], wire["amount"]) == (f"{wire_id}:4", 1250)
