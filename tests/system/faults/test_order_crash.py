"""The user's order workflow survives SIGKILL of its worker process (`python -m sagacity.worker
worker --workflow sagacity.examples.order_workflow:OrderWorkflow`, journaling to PostgreSQL): a
fresh worker takes over and no tool body runs twice (the shop's own log of body runs is
the witness)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

import pytest
from temporalio.testing import WorkflowEnvironment

from sagacity.examples.order_workflow import FINANCE, Order, OrderWorkflow
from sagacity.examples.orders import INITIAL_STOCK, Shop
from sagacity.journal._phases import Phase, SagaStatus
from sagacity.stores import JournalStore
from sagacity.worker.client._client import NoWorkerError
from sagacity.worker.client._resolutions import ResolutionRefusedError
from sagacity.worker.client._saga_client import SagaClient
from sagacity.workflows._models import DirtyStep, SagaOptions
from tests.support.workers import (
    WorkerProcesses,
    assert_chain_closed,
    assert_executed_ran_once,
    eventually,
    failed_workflow_tasks,
    phases,
)

pytestmark = [pytest.mark.temporal, pytest.mark.postgres, pytest.mark.timeout(90)]

WORKFLOW = ("--workflow", "sagacity.examples.order_workflow:OrderWorkflow")
IBAN = "DE89370400440532013000"


def answers(client: SagaClient, saga_id: str) -> Callable[[], Awaitable[bool]]:
    """Until a worker answers a query: Temporal sends the first ones to the killed
    worker's sticky queue, and they time out (NoWorkerError) until it gives up on it."""

    async def probe() -> bool:
        try:
            await client.status(saga_id)
        except NoWorkerError:
            return False
        return True

    return probe


def at(store: JournalStore, saga_id: str, phase: Phase, step: int) -> bool:
    return (phase.value, step) in phases(store, saga_id)


async def test_killed_while_the_wire_awaits_approval(
    temporal_env: WorkflowEnvironment, workers: WorkerProcesses, pg_store: JournalStore, shop: Shop
) -> None:
    client = SagaClient(temporal_env.client, task_queue=workers.task_queue, store=pg_store)
    first = workers.start(*WORKFLOW)
    order = Order(sku="widget", qty=1, amount=900, address="Main St 1", supplier_iban=IBAN)
    handle = await client.start_workflow(
        OrderWorkflow.run, order, saga_id=f"crash-{uuid.uuid4().hex[:12]}"
    )
    await eventually(lambda: at(pg_store, handle.id, Phase.AWAITING_APPROVAL, 4), 30, "the wait")

    workers.kill(first)
    ran_before = sorted(shop.calls())
    await workers.wait_ready(workers.start(*WORKFLOW))
    await eventually(answers(client, handle.id), 40, "a query answered by the new worker")
    # The new worker redoes the step's local activities (registry answer, journal) before
    # the request is pending again: a query can answer in between.
    await client.wait_pending(handle.id, timeout=40)
    decision = await client.approve(handle.id, approver="alice@example.com")
    receipt = await asyncio.wait_for(handle.result(), 40)

    assert receipt.status == "COMPLETED" and receipt.wire is not None
    entries = assert_chain_closed(pg_store, handle.id)
    assert_executed_ran_once(shop.calls(), handle.id, entries)
    assert [c for c in sorted(shop.calls()) if c not in ran_before] == [
        ("send_wire_transfer", f"{handle.id}:4", 1)
    ]  # only the wire ran after the restart: steps 1-3 were replayed, not run again
    assert decision.seq == next(e.seq for e in entries if e.phase is Phase.APPROVED)
    assert await failed_workflow_tasks(handle) == []


async def test_killed_during_a_tool_call_is_never_run_again(
    temporal_env: WorkflowEnvironment, workers: WorkerProcesses, pg_store: JournalStore, shop: Shop
) -> None:
    client = SagaClient(temporal_env.client, task_queue=workers.task_queue, store=pg_store)
    shop.set_fault("ship_delay", "30")
    first = workers.start(*WORKFLOW)
    options = SagaOptions(tool_heartbeat_timeout_seconds=3, tool_timeout_seconds=60)
    order = Order(sku="widget", qty=1, amount=900, address="Main St 1", options=options)
    handle = await client.start_workflow(
        OrderWorkflow.run, order, saga_id=f"crash-{uuid.uuid4().hex[:12]}"
    )
    await eventually(lambda: at(pg_store, handle.id, Phase.INTENT, 3), 30, "INTENT of step 3")

    workers.kill(first)
    shop.set_fault("ship_delay", "0")
    workers.start(*WORKFLOW)

    async def waiting() -> list[DirtyStep] | None:
        try:
            view = await client.status(handle.id)
        except NoWorkerError:  # the new worker is still starting
            return None
        return view.dirty if view.status is SagaStatus.NEEDS_HUMAN else None

    # The workflow's own saga waits for a person; its approvers resolve by default.
    [dirty] = await eventually(waiting, 60, "the saga to need a human")
    assert (dirty.step, dirty.tool) == (3, "ship_order")
    with pytest.raises(ResolutionRefusedError) as outsider:
        await client.resolve(handle.id, 3, happened=False, actor="mallory")
    assert outsider.value.reason == "RESOLVER_NOT_ALLOWED"
    done = await client.resolve(handle.id, 3, happened=False, actor=FINANCE[0])
    assert done.outcome == "nothing to undo"
    receipt = await asyncio.wait_for(handle.result(), 60)

    assert receipt.status == "COMPENSATED" and "step 3 (ship_order) unknown" in (
        receipt.failure or ""
    )
    entries = assert_chain_closed(pg_store, handle.id)
    assert_executed_ran_once(shop.calls(), handle.id, entries)
    assert shop.calls("ship_order") == [] and shop.shipments() == []
    assert pg_store.is_fenced(handle.id, 3)
    assert shop.stock("widget") == INITIAL_STOCK["widget"]
    assert entries[-1].result["needs_human"] is False  # resolved by a person
    assert [(e.phase.value, e.actor) for e in entries[-3:-1]] == [
        ("RESOLVED", FINANCE[0]), ("FAILED", FINANCE[0])
    ]  # fmt: skip
