"""The default deadline, on skipped time: a dirty saga nobody resolves waits 30 days, then
closes UNRESOLVED, still flagged (the time-skipping test server)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from sagacity.approval._resolutions import DEFAULT_DEADLINE_SECONDS
from sagacity.audit._export import verify_store
from sagacity.examples.orders import Shop
from sagacity.journal._phases import SagaStatus
from sagacity.stores import open_store
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker.client._client import saga_result
from sagacity.workflows._models import SagaInput, SagaResult, SagaView
from tests.support.workflows import CHARGE, RESERVE, SHIP_FAILS, eventually, time_skipping_server

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(90)]


@pytest.fixture
async def skipping() -> AsyncIterator[WorkflowEnvironment]:
    async with time_skipping_server() as env:
        yield env


async def test_nobody_comes_for_thirty_days(skipping: WorkflowEnvironment, tmp_path: Path) -> None:
    assert DEFAULT_DEADLINE_SECONDS == 30 * 24 * 3600
    store, shop = open_store(f"sqlite:///{tmp_path}/journal.db"), Shop(tmp_path / "shop.db")
    shop.set_fault("refund")
    queue = f"ts-{uuid.uuid4().hex[:8]}"
    try:
        async with new_worker(skipping.client, store=store, toolbox=Toolbox.build(shop),
                              task_queue=queue):  # fmt: skip
            handle = await skipping.client.start_workflow(
                "AgentSaga",
                SagaInput(plan=[RESERVE, CHARGE, SHIP_FAILS], compensation_attempts=1),
                id=f"ts-{uuid.uuid4().hex[:12]}", task_queue=queue, result_type=SagaResult,
            )  # fmt: skip

            async def waiting() -> SagaView | None:
                view = await handle.query("status", result_type=SagaView)
                return view if view.status is SagaStatus.NEEDS_HUMAN else None

            view = await eventually(waiting, 30)
            since = await skipping.get_current_time()
            assert view.human_deadline is not None
            left = view.human_deadline - since
            assert timedelta(days=29, hours=23) < left <= timedelta(days=30), left
            result = await asyncio.wait_for(saga_result(handle), 60)  # skips the 30 days
            skipped = await skipping.get_current_time() - since
        assert skipped >= timedelta(days=29, hours=23), skipped
        assert result.status is SagaStatus.UNRESOLVED and result.needs_human
        assert [d.step for d in result.dirty] == [2] and result.resolutions == []
        assert verify_store(store, handle.id).ok
        assert [c["refunded"] for c in shop.charges()] == [False]
    finally:
        store.close()
