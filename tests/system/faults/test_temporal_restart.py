"""Temporal restart: the dev server (with a file database, fixed port) is stopped in the
middle of a saga and started again on the same file; the worker process rides through
it and the saga completes, with nothing lost and no step run twice.

While the server is down the running tool finishes: its EXECUTED entry is journaled,
but the activity's completion may not reach Temporal. After the restart Temporal times
the attempt out and retries it; the retry finds EXECUTED in the journal and returns the
recorded result instead of shipping again (observed: step 3 reported `replayed`). Either
way — completion delivered late or attempt retried — ship_order runs once.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from pathlib import Path

import pytest

from sagacity.examples.orders import Shop
from sagacity.journal._phases import SagaStatus
from sagacity.stores import JournalStore
from sagacity.worker._devserver import start_dev_server
from sagacity.worker.client._client import saga_result
from sagacity.workflows._models import SagaInput, SagaResult
from tests.support.workers import (
    CHARGE,
    RESERVE,
    SHIP,
    WorkerProcesses,
    assert_chain_closed,
    assert_evidence_consistent,
    assert_executed_ran_once,
    eventually,
    failed_workflow_tasks,
    free_port,
    phases,
    worker_env,
)

pytestmark = [pytest.mark.temporal, pytest.mark.postgres, pytest.mark.timeout(90)]


def accepting(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


async def test_saga_survives_a_temporal_restart(
    tmp_path: Path, pg_journal_url: str, pg_store: JournalStore, shop: Shop
) -> None:
    port, db_file = free_port(), str(tmp_path / "temporal.db")
    env = await start_dev_server(port=port, db_file=db_file)
    args = [
        "--tools", "sagacity.examples.orders:toolbox",
        "--journal", pg_journal_url,
        "--task-queue", f"restart-{uuid.uuid4().hex[:8]}",
    ]  # fmt: skip
    workers = WorkerProcesses(tmp_path, worker_env(f"127.0.0.1:{port}", tmp_path / "shop.db"), args)
    saga_id = f"restart-{uuid.uuid4().hex[:12]}"
    try:
        shop.set_fault("ship_delay", "3")
        worker = workers.start()
        await workers.wait_ready(worker)
        await env.client.start_workflow(
            "AgentSaga",
            SagaInput(plan=[RESERVE, CHARGE, SHIP], tool_heartbeat_timeout_seconds=5),
            id=saga_id,
            task_queue=workers.task_queue,
            result_type=SagaResult,
        )
        await eventually(lambda: ("INTENT", 3) in phases(pg_store, saga_id), 30, "INTENT 3")

        await env.shutdown()
        assert not accepting(port), "the server is still up"
        # The tool finishes and journals EXECUTED while Temporal is away.
        await eventually(lambda: ("EXECUTED", 3) in phases(pg_store, saga_id), 15, "EXECUTED 3")
        await asyncio.sleep(1)
        assert worker.poll() is None, workers.output(worker)[-3000:]

        env = await start_dev_server(port=port, db_file=db_file)
        handle = env.client.get_workflow_handle(saga_id, result_type=SagaResult)
        try:
            result = await asyncio.wait_for(saga_result(handle), 50)
        except TimeoutError:
            pytest.fail(f"not final after the restart: {phases(pg_store, saga_id)}")

        assert worker.poll() is None  # the same worker process rode through the restart
        assert result.status is SagaStatus.COMPLETED, result
        entries = assert_chain_closed(pg_store, saga_id)
        assert [(e.phase.value, e.step) for e in entries] == [
            ("SAGA_OPENED", 0), ("INTENT", 1), ("EXECUTED", 1), ("INTENT", 2),
            ("EXECUTED", 2), ("INTENT", 3), ("EXECUTED", 3), ("SAGA_CLOSED", 0),
        ]  # fmt: skip
        assert_evidence_consistent(result, entries)
        assert_executed_ran_once(shop.calls(), saga_id, entries)
        assert len(shop.shipments()) == 1 and len(shop.calls("ship_order")) == 1
        assert await failed_workflow_tasks(handle) == []
    finally:
        workers.stop_all()
        await env.shutdown()
