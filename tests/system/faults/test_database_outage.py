"""Journal database outages: a TCP proxy between the worker and PostgreSQL is cut
mid-saga (live connections reset, new ones refused) and later restored.

Appends that hit the outage must fail loudly and be retried — never dropped — and the
saga must complete with exactly the journal it would have had without the outage. The
evidence that the outage was real: the proxy's counts of cut and refused connections,
and the store's own count of failed calls (a counting wrapper around the real store).

And a journal that is unreachable when a worker starts must stop the start with one
clear line and a non-zero exit, before anything polls the task queue.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from sagacity.examples.orders import Shop
from sagacity.journal._phases import SagaStatus
from sagacity.stores import JournalStore, open_store
from sagacity.tools._decorators import ToolContext, tool
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker.client._client import saga_result
from sagacity.workflows._models import SagaInput, SagaResult, ToolCall
from tests.support.workers import (
    CHARGE,
    RESERVE,
    SHIP,
    CountingStore,
    WorkerProcesses,
    assert_chain_closed,
    assert_evidence_consistent,
    assert_executed_ran_once,
    eventually,
    failed_workflow_tasks,
    history_events,
    phases,
    restock,
    worker_env,
)
from tests.system.faults.proxy import TcpProxy, target_of, through

pytestmark = [pytest.mark.temporal, pytest.mark.postgres, pytest.mark.timeout(60)]


class Carrier:
    """A slow plain tool that never reads the journal itself: only the runner's INTENT
    and EXECUTED appends touch the database around it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, int]] = []

    @tool
    async def book_courier(self, seconds: float, ctx: ToolContext) -> dict[str, Any]:
        """Book a courier (takes a while)."""
        await asyncio.sleep(seconds)
        self.calls.append(("book_courier", ctx.idempotency_key, ctx.attempt))
        return {"courier": ctx.idempotency_key}


def courier(seconds: float) -> ToolCall:
    return ToolCall(tool="book_courier", args={"seconds": seconds})


HAPPY_STORY = [
    ("SAGA_OPENED", 0), ("INTENT", 1), ("EXECUTED", 1), ("INTENT", 2), ("EXECUTED", 2),
    ("INTENT", 3), ("EXECUTED", 3), ("SAGA_CLOSED", 0),
]  # fmt: skip


@dataclass
class ProxiedWorker:
    proxy: TcpProxy
    store: CountingStore
    shop: Shop
    carrier: Carrier
    task_queue: str
    env: WorkflowEnvironment

    def calls(self) -> list[tuple[str, str, int]]:
        return self.shop.calls() + self.carrier.calls

    async def start(self, plan: list[ToolCall], **options: Any) -> WorkflowHandle[Any, SagaResult]:
        return await self.env.client.start_workflow(
            "AgentSaga",
            SagaInput(plan=plan, **options),
            id=f"outage-{uuid.uuid4().hex[:12]}",
            task_queue=self.task_queue,
            result_type=SagaResult,
        )


@pytest.fixture
async def proxied(
    temporal_env: WorkflowEnvironment,
    pg_journal_url: str,
    pg_store: JournalStore,
    tmp_path: Path,
) -> AsyncIterator[ProxiedWorker]:
    """A worker (built by new_worker, as production) whose journal connections all go
    through the proxy. `pg_store` is the test's direct view, past the proxy."""
    restock(tmp_path / "shop.db", 1_000)
    shop = Shop(tmp_path / "shop.db")
    with TcpProxy(*target_of(pg_journal_url)) as proxy:
        store = CountingStore(open_store(through(pg_journal_url, proxy)))
        carrier = Carrier()
        task_queue = f"outage-{uuid.uuid4().hex[:8]}"
        try:
            async with new_worker(
                temporal_env.client, store=store, toolbox=Toolbox.build(shop, carrier),
                task_queue=task_queue,
            ):  # fmt: skip
                yield ProxiedWorker(proxy, store, shop, carrier, task_queue, temporal_env)
        finally:
            proxy.restore()
            store.close()


async def test_journal_cut_while_a_tool_runs_then_restored(
    proxied: ProxiedWorker, pg_store: JournalStore
) -> None:
    """The database goes away while a tool runs: its EXECUTED append fails, is retried,
    and lands once the database is back. Nothing is lost or run twice."""
    handle = await proxied.start([RESERVE, CHARGE, courier(2)])
    await eventually(lambda: ("INTENT", 3) in phases(pg_store, handle.id), 20, "INTENT 3")

    cut = proxied.proxy.cut()
    await eventually(  # the outage lasts: the retry's reconnects are refused too
        lambda: proxied.proxy.stats().refused >= 2, 10, "refused reconnects"
    )
    assert ("EXECUTED", 3) not in phases(pg_store, handle.id)
    proxied.proxy.restore()

    result = await asyncio.wait_for(saga_result(handle), 40)
    stats = proxied.proxy.stats()
    assert cut >= 1 and stats.dropped >= 1 and stats.refused >= 1, stats
    assert result.status is SagaStatus.COMPLETED, result
    entries = assert_chain_closed(pg_store, handle.id)
    assert [(e.phase.value, e.step) for e in entries] == HAPPY_STORY
    assert_evidence_consistent(result, entries)
    assert_executed_ran_once(proxied.calls(), handle.id, entries)
    assert await failed_workflow_tasks(handle) == []


async def test_fence_check_during_an_outage_does_not_fail_the_tool(
    proxied: ProxiedWorker, pg_store: JournalStore
) -> None:
    """ship_order checks `ctx.is_fenced()` right before shipping, as tools must. When that
    check meets the outage, the saga must still complete once the database is back: an
    unreachable journal is an infrastructure fault, not the carrier refusing the order."""
    # The check comes 4 s after INTENT 3; the cut follows INTENT 3 as soon as the test sees
    # it (under load, a second or more later), and lasts 6 s: the check lands inside it.
    # (With 2 s and 4 s the check could pass before the cut on a busy machine.)
    proxied.shop.set_fault("ship_delay", "4")
    handle = await proxied.start([RESERVE, CHARGE, SHIP])
    await eventually(lambda: ("INTENT", 3) in phases(pg_store, handle.id), 20, "INTENT 3")
    # The outage ends on its own clock, in another thread: ship_order is async, so its
    # fence check runs on the event loop this test shares with the worker.
    restore = threading.Timer(6, proxied.proxy.restore)
    proxied.proxy.cut()
    restore.start()
    try:
        await eventually(lambda: proxied.store.failures["is_fenced"], 10, "a failed check")
        result = await asyncio.wait_for(saga_result(handle), 40)
    finally:
        restore.join()
    assert result.status is SagaStatus.COMPLETED, result.first_failure
    entries = assert_chain_closed(pg_store, handle.id)
    assert [(e.phase.value, e.step) for e in entries] == HAPPY_STORY
    assert len(proxied.shop.shipments()) == 1


async def test_outage_longer_than_the_heartbeat_timeout_keeps_the_outcome(
    proxied: ProxiedWorker, pg_store: JournalStore
) -> None:
    """The tool finished; its EXECUTED append meets an outage of 8 s with a 3 s heartbeat
    timeout. The attempt holds a known outcome, so it must keep heartbeating while it
    retries the append, and write it when the database returns — not be declared lost and
    replaced by a retry that would find an orphan INTENT and call the outcome unknown."""
    handle = await proxied.start(
        [RESERVE, courier(1)], tool_heartbeat_timeout_seconds=3, tool_timeout_seconds=60
    )
    await eventually(lambda: ("INTENT", 2) in phases(pg_store, handle.id), 20, "INTENT 2")
    proxied.proxy.cut()
    cut_at = time.time()
    await eventually(
        lambda: any("EXECUTED step 2" in e for e in proxied.store.errors), 10, "EXECUTED failing"
    )

    async def heartbeat_beyond_two_timeouts() -> bool:
        """The server saw the attempt heartbeat more than two heartbeat timeouts into the
        outage: it would have been declared lost by now had it stopped."""
        pending = (await handle.describe()).raw_description.pending_activities
        beats = [a.last_heartbeat_time.ToDatetime().timestamp() for a in pending]
        return any(beat - cut_at > 2 * 3 for beat in beats)

    await eventually(heartbeat_beyond_two_timeouts, 20, "heartbeats through the outage")
    assert ("EXECUTED", 2) not in phases(pg_store, handle.id)  # the outage still holds
    proxied.proxy.restore()

    result = await asyncio.wait_for(saga_result(handle), 40)
    assert result.status is SagaStatus.COMPLETED, _post_mortem(proxied, pg_store, result)
    assert result.unknown_outcome_steps == []
    entries = assert_chain_closed(pg_store, handle.id)
    assert [(e.phase.value, e.step) for e in entries] == [
        ("SAGA_OPENED", 0), ("INTENT", 1), ("EXECUTED", 1), ("INTENT", 2), ("EXECUTED", 2),
        ("SAGA_CLOSED", 0),
    ]  # fmt: skip
    assert_executed_ran_once(proxied.calls(), handle.id, entries)
    started = [
        e.activity_task_started_event_attributes
        for e in await history_events(handle)
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    assert [a.attempt for a in started] == [1, 1]  # step 2 was never declared lost
    assert proxied.store.failures["append"] >= 1  # the append did meet the outage
    assert proxied.proxy.stats().refused >= 1  # and reconnects were refused while it lasted


async def test_journal_cut_under_many_sagas_then_restored(
    proxied: ProxiedWorker, pg_store: JournalStore
) -> None:
    """Twelve sagas in flight when the database goes away for three seconds: appends of
    every kind (lifecycle, INTENT, EXECUTED) and reads fail; every saga still completes
    with its exact journal."""
    handles = [await proxied.start([RESERVE, CHARGE, courier(1)]) for _ in range(12)]
    await eventually(
        lambda: sum(("INTENT", 3) in phases(pg_store, h.id) for h in handles) >= 4, 20, "progress"
    )
    proxied.proxy.cut()
    # Held until several journal calls have failed and reconnects are being refused.
    await eventually(
        lambda: proxied.store.failures.total() >= 3 and proxied.proxy.stats().refused >= 1,
        20,
        "journal calls failing",
    )
    proxied.proxy.restore()

    results = await asyncio.wait_for(asyncio.gather(*(saga_result(h) for h in handles)), 45)
    stats = proxied.proxy.stats()
    assert stats.dropped >= 1 and stats.refused >= 1, stats
    for handle, result in zip(handles, results, strict=True):
        assert result.status is SagaStatus.COMPLETED, _post_mortem(proxied, pg_store, result)
        entries = assert_chain_closed(pg_store, handle.id)
        assert [(e.phase.value, e.step) for e in entries] == HAPPY_STORY, handle.id
        assert_evidence_consistent(result, entries)
        assert_executed_ran_once(proxied.calls(), handle.id, entries)
        assert await failed_workflow_tasks(handle) == []
    assert len(proxied.shop.charges()) == 12


def _post_mortem(proxied: ProxiedWorker, store: JournalStore, result: SagaResult) -> str:
    sid = result.saga_id
    story = [(e.phase.value, e.step, e.attempt) for e in store.entries(sid)]
    errors = [e for e in proxied.store.errors if sid in e]
    return f"{result.status} {result.first_failure}\n{story}\n" + "\n".join(errors)


# ---- unreachable at start -----------------------------------------------------------------


@pytest.mark.parametrize("fault", ["refused", "blackhole"])
async def test_worker_refuses_to_start_without_its_journal(
    temporal_env: WorkflowEnvironment,
    pg_journal_url: str,
    pg_store: JournalStore,
    tmp_path: Path,
    fault: str,
) -> None:
    """The journal refuses connections, or swallows them without an answer. The worker
    process exits non-zero with one clear line, and never polls its task queue: a saga
    already waiting there is not picked up."""
    client = temporal_env.client
    task_queue = f"nojournal-{uuid.uuid4().hex[:8]}"
    handle = await client.start_workflow(
        "AgentSaga", SagaInput(plan=[RESERVE]), id=f"orphan-{uuid.uuid4().hex[:12]}",
        task_queue=task_queue, result_type=SagaResult,
    )  # fmt: skip
    with TcpProxy(*target_of(pg_journal_url)) as proxy:
        if fault == "refused":
            proxy.cut()
        else:
            proxy.blackhole()
        address = client.service_client.config.target_host
        journal = through(pg_journal_url, proxy)
        args = [
            "--tools",
            "sagacity.examples.orders:toolbox",
            "--journal",
            journal,
            "--task-queue",
            task_queue,
        ]
        workers = WorkerProcesses(tmp_path, worker_env(address, tmp_path / "shop.db"), args)
        proc = workers.start()
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            workers.stop_all()
            pytest.fail(f"worker still running without its journal:\n{workers.output(proc)}")
        stats = proxy.stats()

    assert code == 1, workers.output(proc)
    err = [line for line in workers.output(proc, "err").splitlines() if line.strip()]
    assert len(err) == 1, err
    assert err[0].startswith("error: cannot reach the sagacity journal at postgresql://"), err
    assert "Traceback" not in workers.output(proc)
    assert "sagacity worker:" not in workers.output(proc, "out")  # the banner never printed
    assert (stats.refused if fault == "refused" else stats.blackholed) >= 1, stats

    # Nothing polled the task queue, and the saga waiting there was never picked up.
    described = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    assert list(described.pollers) == []
    history = await handle.fetch_history()
    assert not any(
        e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED for e in history.events
    )
    assert list(pg_store.entries(handle.id)) == []
    await handle.terminate("test over")
