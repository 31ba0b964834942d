"""The clerk's committed histories (recorded by clerk_histories.py) replay against the
current code; test_clerk_sagas.py replays each history it makes as well. The agent's tool
calls are saga steps served in workflow code, so a change to how they are served must keep
these replaying (or go behind `workflow.patched()`)."""

from __future__ import annotations

import pytest

from tests.histories._recording import assert_replayed, committed, recorded_flows
from tests.histories.record_pydantic_ai import FLOWS, HISTORIES, replay_failure


def test_every_clerk_flow_has_a_history() -> None:
    assert recorded_flows(HISTORIES) == set(FLOWS)


@pytest.mark.parametrize("name", sorted(FLOWS))
async def test_committed_clerk_history_replays(name: str) -> None:
    assert_replayed(name, await replay_failure(committed(HISTORIES, name)))
