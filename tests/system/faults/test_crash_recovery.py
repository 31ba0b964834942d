"""A worker killed between INTENT and EXECUTED.

A real worker process (`python -m sagacity.worker worker`, as production runs it) is SIGKILLed
while ship_order hangs heartbeating after its INTENT was journaled. Temporal notices the
dead worker by the missed heartbeats and retries the activity on a fresh worker process;
the retry finds the orphan INTENT and must not run the tool a second time. The saga then
compensates the steps whose EXECUTED was journaled, reports the orphan as needing a
human, and the journal loses nothing.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from sagacity.examples.orders import INITIAL_STOCK, Shop
from sagacity.journal._chain import verify_chain
from sagacity.journal._phases import Phase, SagaStatus
from sagacity.stores import JournalStore, open_store
from sagacity.tools._decorators import ToolContext, tool
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker.client._client import saga_result
from sagacity.workflows._inspection import SAGA_NEEDS_HUMAN, SAGA_STATUS
from sagacity.workflows._models import ResolutionPolicy, SagaInput, SagaResult, ToolCall
from tests.support.workers import WorkerProcesses, worker_env

INTENT_DEADLINE_S = 20.0
RECOVERY_DEADLINE_S = 40.0

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(75)]


@pytest.fixture
def workers(temporal_env: WorkflowEnvironment, tmp_path: Path) -> Iterator[WorkerProcesses]:
    address = temporal_env.client.service_client.config.target_host
    env = worker_env(address, tmp_path / "shop.db")
    args = [
        "--tools", "sagacity.examples.orders:toolbox",
        "--journal", f"sqlite:///{tmp_path}/journal.db",
        "--task-queue", f"crash-{uuid.uuid4().hex[:8]}",
    ]  # fmt: skip
    procs = WorkerProcesses(tmp_path, env, args)
    try:
        yield procs
    finally:
        procs.stop_all()


async def _wait_for_intent(
    store: JournalStore,
    saga_id: str,
    step: int,
    worker: subprocess.Popen[bytes],
    procs: WorkerProcesses,
) -> None:
    deadline = time.monotonic() + INTENT_DEADLINE_S
    while time.monotonic() < deadline:
        phases = [e.phase for e in store.step_entries(saga_id, step)]
        if Phase.INTENT in phases:
            assert Phase.EXECUTED not in phases and Phase.FAILED not in phases, phases
            return
        if worker.poll() is not None:
            pytest.fail(
                f"worker exited early ({worker.returncode}):\n{procs.output(worker)[-4_000:]}"
            )
        await asyncio.sleep(0.05)
    pytest.fail(
        f"no INTENT for step {step} within {INTENT_DEADLINE_S}s; journal: "
        f"{[(e.seq, e.phase.value, e.step) for e in store.entries(saga_id)]}\n"
        f"{procs.output(worker)[-4_000:]}"
    )


async def test_worker_killed_between_intent_and_executed(
    temporal_env: WorkflowEnvironment, workers: WorkerProcesses, tmp_path: Path
) -> None:
    client: Client = temporal_env.client
    shop = Shop(tmp_path / "shop.db")
    shop.set_fault("ship_delay", "30")  # ship_order heartbeats for 30 s before shipping
    store = open_store(f"sqlite:///{tmp_path}/journal.db")
    saga_id = f"crash-{uuid.uuid4().hex[:12]}"
    task_queue = workers.args[-1]
    try:
        first = workers.start()
        handle = await client.start_workflow(
            "AgentSaga",
            SagaInput(
                plan=[
                    ToolCall(tool="reserve_inventory", args={"sku": "widget", "qty": 2}),
                    ToolCall(tool="charge_card", args={"amount": 100}),
                    ToolCall(tool="ship_order", args={"address": "Main St 1"}),
                ],
                tool_heartbeat_timeout_seconds=3,
                tool_timeout_seconds=120,
                # Nobody resolves the unknown step here: it closes UNRESOLVED, flagged.
                resolution=ResolutionPolicy(deadline_seconds=1),
            ),
            id=saga_id,
            task_queue=task_queue,
            result_type=SagaResult,
        )
        await _wait_for_intent(store, saga_id, 3, first, workers)

        os.kill(first.pid, signal.SIGKILL)
        assert first.wait(timeout=10) == -signal.SIGKILL, "the worker did not die by SIGKILL"
        assert shop.calls("ship_order") == [] and shop.shipments() == []

        shop.set_fault("ship_delay", "0")
        second = workers.start()
        try:
            result = await asyncio.wait_for(saga_result(handle), RECOVERY_DEADLINE_S)
        except TimeoutError:
            pytest.fail(
                f"saga not final {RECOVERY_DEADLINE_S}s after the restart; journal: "
                f"{[(e.seq, e.phase.value, e.step) for e in store.entries(saga_id)]}\n"
                f"{workers.output(second)[-4_000:]}"
            )

        # The saga is final, the orphan is reported, nothing is compensated blindly.
        assert result.status is SagaStatus.UNRESOLVED, result
        assert result.unknown_outcome_steps == [3]
        assert result.needs_human is True
        by_step = {s.step: s for s in result.steps}
        assert by_step[3].status == "UNKNOWN"
        assert [(c.step, c.ok) for c in result.compensations] == [(2, True), (1, True)]

        # Steps 1 and 2 ran exactly once (the new worker replayed them from history),
        # ship_order never ran a second time, and the effects of 1 and 2 are undone.
        assert len(shop.calls("reserve_inventory")) == 1
        assert len(shop.calls("charge_card")) == 1
        assert shop.calls("ship_order") == []
        assert shop.shipments() == []
        assert len(shop.calls("release_inventory")) == 1
        assert len(shop.calls("refund_card")) == 1
        assert shop.stock("widget") == INITIAL_STOCK["widget"]
        assert shop.charges() == [
            {"key": f"{saga_id}:2", "amount": 100, "currency": "EUR", "refunded": True}
        ]

        # No journal entry lost, none invented, and the chain verifies.
        entries = list(store.entries(saga_id))
        assert [(e.phase, e.step) for e in entries] == [
            (Phase.SAGA_OPENED, 0),
            (Phase.INTENT, 1),
            (Phase.EXECUTED, 1),
            (Phase.INTENT, 2),
            (Phase.EXECUTED, 2),
            (Phase.INTENT, 3),
            (Phase.COMPENSATING, 0),
            (Phase.COMPENSATED, 2),
            (Phase.COMPENSATED, 1),
            (Phase.NEEDS_HUMAN, 0),
            (Phase.SAGA_CLOSED, 0),
        ]
        report = verify_chain(saga_id, entries)
        assert report.ok and report.closed, report.describe()
        closing = entries[-1].result
        assert isinstance(closing, dict)
        assert closing["status"] == "UNRESOLVED"
        assert closing["unknown_outcome_steps"] == [3]
        assert closing["needs_human"] is True
        assert (result.head_seq, result.head_hash) == (entries[-1].seq, entries[-1].hash)

        # Operators find it without reading the result: the search attributes say so.
        described = await handle.describe()
        assert described.typed_search_attributes.get(SAGA_NEEDS_HUMAN) is True
        assert described.typed_search_attributes.get(SAGA_STATUS) == "UNRESOLVED"
    finally:
        store.close()


class SlowTools:
    """A tool that takes a while and never heartbeats itself, as most tools don't."""

    @tool
    async def slow_lookup(self, seconds: float, ctx: ToolContext) -> dict[str, float]:
        """Look something up slowly."""
        await asyncio.sleep(seconds)
        return {"took": seconds}


async def test_live_worker_with_a_slow_tool_is_not_mistaken_for_dead(
    temporal_env: WorkflowEnvironment, journal: JournalStore
) -> None:
    """The counterpart of the crash test: with the same short heartbeat timeout, a worker
    that is alive must keep its activity alive. The tool runner heartbeats on the tool's
    behalf, so a slow tool that does not heartbeat itself must still finish as EXECUTED,
    not end as an unknown outcome that a human has to chase."""
    task_queue = f"slow-{uuid.uuid4().hex[:8]}"
    async with new_worker(
        temporal_env.client, store=journal, toolbox=Toolbox.build(SlowTools()),
        task_queue=task_queue,
    ):  # fmt: skip
        result = await asyncio.wait_for(
            temporal_env.client.execute_workflow(
                "AgentSaga",
                SagaInput(
                    plan=[ToolCall(tool="slow_lookup", args={"seconds": 4})],
                    tool_heartbeat_timeout_seconds=2,
                ),
                id=f"slow-{uuid.uuid4().hex[:12]}",
                task_queue=task_queue,
                result_type=SagaResult,
            ),
            30,
        )
    assert result.unknown_outcome_steps == [], result
    assert result.status is SagaStatus.COMPLETED, result
    assert [(e.phase, e.step) for e in journal.entries(result.saga_id)] == [
        (Phase.SAGA_OPENED, 0),
        (Phase.INTENT, 1),
        (Phase.EXECUTED, 1),
        (Phase.SAGA_CLOSED, 0),
    ]
