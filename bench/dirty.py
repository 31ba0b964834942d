"""`python -m bench.dirty` — what a person's resolution costs, beside an approval, in one run.

On the embedded dev server, one worker, a SQLite journal. Per saga, the time from sending
the person's action to the saga's result:

- baseline: an approval (`SagaClient.approve`: APPROVED journaled, the wire runs, the
  saga closes) — the other "a person unblocks a waiting saga" path;
- resolution: `SagaClient.retry_compensation` on a saga waiting in NEEDS_HUMAN after its
  refund failed (RESOLVED journaled, the refund activity runs, COMPENSATED, the close).

Both are one update, one activity and a handful of journal writes, so the ratio says
what the desk, the judge and the wait loop add. Rounds alternate; medians reported.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
import uuid
from pathlib import Path

from bench.common import print_medians_ms
from sagacity.examples.orders import Shop
from sagacity.journal._phases import SagaStatus
from sagacity.stores import open_store
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker._devserver import start_dev_server
from sagacity.worker.client._saga_client import SagaClient
from sagacity.workflows._models import SagaInput, ToolCall

CHARGE = ToolCall(tool="charge_card", args={"amount": 10})
SHIP_FAILS = ToolCall(tool="ship_order", args={"address": "x", "fail": True})
WIRE = ToolCall(tool="send_wire_transfer", args={"iban": "DE89370400440532013000", "amount": 1})


async def _approval(client: SagaClient) -> float:
    saga_id = f"b-{uuid.uuid4().hex[:10]}"
    await client.start(SagaInput(plan=[WIRE]), saga_id=saga_id)
    await client.wait_pending(saga_id)
    t0 = time.perf_counter()
    await client.approve(saga_id, approver="bench")
    await client.result(saga_id)
    return time.perf_counter() - t0


async def _resolution(client: SagaClient, shop: Shop) -> float:
    saga_id = f"b-{uuid.uuid4().hex[:10]}"
    shop.set_fault("refund")
    inp = SagaInput(plan=[CHARGE, SHIP_FAILS], compensation_attempts=1)
    await client.start(inp, saga_id=saga_id)
    while (await client.status(saga_id)).status is not SagaStatus.NEEDS_HUMAN:
        await asyncio.sleep(0.05)
    shop.clear_fault("refund")
    t0 = time.perf_counter()
    await client.retry_compensation(saga_id, 1, actor="bench")
    result = await client.result(saga_id)
    elapsed = time.perf_counter() - t0
    assert result.status is SagaStatus.COMPENSATED, result
    return elapsed


async def run(rounds: int = 6, per_round: int = 8) -> dict[str, float]:
    # The refund fault is injected on purpose; its failures are not news here.
    logging.getLogger("temporalio.activity").setLevel(logging.ERROR)
    env = await start_dev_server()
    times: dict[str, list[float]] = {"approval": [], "resolution": []}
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/journal.db")
        shop = Shop(Path(tmp) / "shop.db")
        try:
            worker = new_worker(
                env.client, store=store, toolbox=Toolbox.build(shop), task_queue="bench-dirty"
            )
            async with worker:
                client = SagaClient(env.client, task_queue="bench-dirty")
                await _approval(client)  # warm-up, not counted
                for r in range(rounds):
                    order = ["approval", "resolution"] if r % 2 == 0 else ["resolution", "approval"]
                    for side in order:
                        for _ in range(per_round):
                            took = (
                                await _approval(client)
                                if side == "approval"
                                else await _resolution(client, shop)
                            )
                            times[side].append(took)
        finally:
            store.close()
            await env.shutdown()
    med = print_medians_ms(times, "action to result", 11)
    print(f"resolution / approval: {med['resolution'] / med['approval']:.2f}x")
    return med


if __name__ == "__main__":
    asyncio.run(run())
