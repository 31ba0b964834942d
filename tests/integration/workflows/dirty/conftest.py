"""A worker serving the shop and the hanging ledger, on the session dev server."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from sagacity.examples.orders import Shop
from sagacity.stores import JournalStore
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from tests.integration.workflows.dirty.toolkit import HangingLedger


@dataclass
class DirtyHarness:
    client: Client
    store: JournalStore
    shop: Shop
    ledger: HangingLedger
    task_queue: str


@pytest.fixture
async def dirty(
    temporal_env: WorkflowEnvironment, journal: JournalStore, tmp_path: Path
) -> AsyncIterator[DirtyHarness]:
    shop, ledger = Shop(tmp_path / "shop.db"), HangingLedger(tmp_path / "ledger.db")
    task_queue = f"dirty-{uuid.uuid4().hex[:8]}"
    toolbox = Toolbox.build(shop, ledger)
    async with new_worker(
        temporal_env.client, store=journal, toolbox=toolbox, task_queue=task_queue
    ):
        yield DirtyHarness(temporal_env.client, journal, shop, ledger, task_queue)
