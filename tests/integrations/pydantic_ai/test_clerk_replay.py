"""The clerk's histories replay against the current code: the committed ones (recorded by
clerk_histories.py) and ones recorded now. The agent's tool calls are saga steps served
in workflow code, so a change to how they are served must keep these replaying (or go
behind `workflow.patched()`)."""

from __future__ import annotations

import pytest
from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from sagacity.worker.plugin import SagacityPlugin

from .clerk_histories import FLOWS, HISTORIES, WORKFLOWS
from .conftest import Clerks


async def _failure(history: WorkflowHistory) -> Exception | None:
    replayer = Replayer(workflows=WORKFLOWS, plugins=[SagacityPlugin(), PydanticAIPlugin()])
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    return result.replay_failure


def test_every_clerk_flow_has_a_history() -> None:
    assert {p.stem for p in HISTORIES.glob("*.json")} == set(FLOWS)


@pytest.mark.parametrize("name", sorted(FLOWS))
async def test_committed_clerk_history_replays(name: str) -> None:
    history = WorkflowHistory.from_json(name, (HISTORIES / f"{name}.json").read_text())
    failure = await _failure(history)
    assert failure is None, f"{name}: {type(failure).__name__}: {failure}"


@pytest.mark.temporal
@pytest.mark.postgres
@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(FLOWS))
async def test_fresh_clerk_history_replays(clerks: Clerks, name: str) -> None:
    handle = await FLOWS[name](clerks.client, clerks.new_id())
    failure = await _failure(await handle.fetch_history())
    assert failure is None, f"{name}: {type(failure).__name__}: {failure}"
