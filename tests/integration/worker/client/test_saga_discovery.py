"""Sagas are found wherever they run: a user's own workflow type on the saga API (the
examples' OrderWorkflow, not AgentSaga), on a task queue of its own that the CLI is not
configured with, is listed as awaiting approval by `sagacity pending` (with and without
--task-queue), by SagaClient.pending and by the inbox, and as needing a human by
`sagacity dirty` and the inbox; an empty list says what was searched. Real dev server,
a production worker (new_worker) of the user's workflow, the CLI in-process."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from sagacity.examples.order_workflow import Order, OrderWorkflow, Receipt
from sagacity.examples.orders import Shop
from sagacity.stores import JournalStore, open_store
from sagacity.tools._toolbox import Toolbox
from sagacity.worker.client._saga_client import SagaClient
from sagacity.worker.inbox import InboxConfig, create_app
from sagacity.worker.inbox._source import SagaSource
from tests.support.cli import Ran, invoke_sync
from tests.support.rigs import serving
from tests.support.workers import eventually

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(120)]

IBAN = "DE89370400440532013000"
BASE = "http://localhost:8200"


@dataclass
class Payouts:
    """The user's workflow on its own task queue; the CLI configured with none of it."""

    client: SagaClient
    store: JournalStore
    shop: Shop
    task_queue: str
    env: dict[str, str]
    started: list[str]

    async def cli(self, *args: str) -> Ran:
        return await asyncio.to_thread(invoke_sync, list(args), self.env)

    async def start(self, **changes: Any) -> WorkflowHandle[Any, Receipt]:
        fields = {"sku": "widget", "qty": 1, "amount": 1250, "address": "Main St 1", **changes}
        saga_id = f"payout-{uuid.uuid4().hex[:10]}"
        self.started.append(saga_id)
        return await self.client.start_workflow(
            OrderWorkflow.run, Order.model_validate(fields), saga_id=saga_id
        )

    def inbox_page(self, path: str) -> str:
        """The inbox's page at `path`, over the real source (as `sagacity inbox` builds it:
        a SagaClient on the CLI's default task queue, not the workflow's)."""
        source = SagaSource(SagaClient(self.client.temporal, store=self.store))
        app = create_app(InboxConfig(origin=BASE), source=source)
        with TestClient(app, base_url=BASE, headers={"Origin": BASE}) as browser:
            page = browser.get(path)
        assert page.status_code == 200, page.text
        return page.text


@pytest.fixture
async def payouts(temporal_env: WorkflowEnvironment, tmp_path: Path) -> AsyncIterator[Payouts]:
    journal_url = f"sqlite:///{tmp_path}/journal.db"
    store = open_store(journal_url)
    shop = Shop(tmp_path / "shop.db")
    temporal = temporal_env.client
    env = {
        "TEMPORAL_ADDRESS": temporal.service_client.config.target_host,
        "TEMPORAL_NAMESPACE": temporal.namespace,
        "SAGACITY_JOURNAL_URL": journal_url,
    }  # the CLI's own settings: the default task queue, no --workflow
    try:
        async with serving(temporal, store, Toolbox.build(shop), [OrderWorkflow], "payouts") as (
            client,
            task_queue,
        ):
            rig = Payouts(client, store, shop, task_queue, env, [])
            try:
                yield rig
            finally:
                for saga_id in rig.started:
                    handle = temporal.get_workflow_handle(saga_id)
                    if (await handle.describe()).close_time is None:
                        await handle.terminate("test over")
    finally:
        store.close()


def rows(ran: Ran) -> list[dict[str, Any]]:
    assert ran.code == 0, ran.output
    listed: list[dict[str, Any]] = json.loads(ran.stdout)
    return listed


async def test_a_user_workflow_awaiting_approval_is_pending_everywhere(payouts: Payouts) -> None:
    handle = await payouts.start(supplier_iban=IBAN)
    review = await payouts.client.wait_pending(handle.id, timeout=30)
    assert review.pending.tool == "send_wire_transfer"

    async def listed_by_visibility() -> bool:
        return any(i.summary.saga_id == handle.id for i in (await payouts.client.pending()).items)

    await eventually(listed_by_visibility, 20, "the payout in SagaClient.pending")

    for args in ([], ["--task-queue", payouts.task_queue], ["--workflow-type", "OrderWorkflow"]):
        found = {r["saga_id"]: r for r in rows(await payouts.cli("pending", "--json", *args))}
        assert handle.id in found, args
        assert found[handle.id]["pending"]["payload_sha256"] == review.local_sha256

    text = await payouts.cli("pending")
    assert text.code == 0 and handle.id in text.stdout, text.output

    page = await asyncio.to_thread(payouts.inbox_page, "/")
    assert handle.id in page

    # A filter that does not match leaves it out, and says what it searched.
    other = await payouts.cli("pending", "--task-queue", f"nobody-{uuid.uuid4().hex[:6]}")
    assert other.code == 0 and handle.id not in other.output


async def test_a_user_workflow_needing_a_human_is_listed_by_dirty_and_the_inbox(
    payouts: Payouts,
) -> None:
    payouts.shop.set_fault("refund")
    handle = await payouts.start(address="nowhere", options={"compensation_attempts": 2})

    async def flagged() -> bool:
        found = await payouts.client.needing_human()
        return any(i.summary.saga_id == handle.id and i.dirty for i in found)

    await eventually(flagged, 40, "the payout needing a human")

    for args in ([], ["--task-queue", payouts.task_queue]):
        found = {r["saga_id"]: r for r in rows(await payouts.cli("dirty", "--json", *args))}
        assert handle.id in found, args
        assert found[handle.id]["dirty"][0]["tool"] == "charge_card"

    page = await asyncio.to_thread(payouts.inbox_page, "/dirty")
    assert handle.id in page


async def test_an_empty_list_says_what_was_searched(payouts: Payouts) -> None:
    queue = f"nobody-{uuid.uuid4().hex[:6]}"
    namespace = payouts.client.temporal.namespace

    empty = await payouts.cli("pending", "--task-queue", queue)
    assert empty.code == 0, empty.output
    said = " ".join(empty.stderr.split())
    assert "no saga is awaiting approval" in said
    assert f"namespace {namespace!r}" in said and f"task queue {queue!r}" in said
    assert "Temporal visibility" in said and "any workflow type" in said

    as_json = await payouts.cli("pending", "--json", "--task-queue", queue)
    assert rows(as_json) == [] and f"task queue {queue!r}" in " ".join(as_json.stderr.split())

    page = await payouts.client.pending(task_queue=queue)
    assert page.items == [] and f"task queue {queue!r}" in page.searched

    dirty = await payouts.cli("dirty", "--task-queue", queue)
    said = " ".join(dirty.stderr.split())
    assert dirty.code == 0 and "no saga needs a human" in said
    assert f"namespace {namespace!r}" in said and f"task queue {queue!r}" in said


async def test_without_visibility_the_list_fails_rather_than_says_none(payouts: Payouts) -> None:
    """A namespace Temporal does not have: visibility cannot be asked, so no "none"."""
    missing = f"nowhere-{uuid.uuid4().hex[:6]}"
    for command in ("pending", "dirty"):
        ran = await payouts.cli(command, "--namespace", missing)
        assert ran.code != 0 and "no saga" not in ran.output, ran.output
        assert missing in ran.stderr
