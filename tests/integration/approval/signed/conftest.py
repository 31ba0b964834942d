"""The bench that the signed and the passkey approval tests run their sagas on: a worker
on its own task queue whose approver registry is the bench's file."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sagacity.stores import JournalStore
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from tests.integration.approval.signed.test_signed_approvals import Bench


@pytest.fixture
async def bench(temporal_env: Any, journal: JournalStore, tmp_path: Path) -> AsyncIterator[Bench]:
    queue = f"tq-{uuid.uuid4().hex[:8]}"
    b = Bench(tmp_path, temporal_env.client, journal, queue)
    worker = new_worker(
        temporal_env.client, store=journal, toolbox=Toolbox.build(b.shop, b.bank),
        task_queue=queue, approvers=b.registry_file,
        log_key=None,  # its exports are hand-made entry lines: no checkpoints to check
    )  # fmt: skip
    async with worker:
        yield b
