"""A saga that judged passkey decisions replays from its recorded history: the committed
one (recorded by tests/integration/approval/signed/test_passkey_approvals.py with
SAGACITY_RECORD_PASSKEY_HISTORY=1) holds a refused and an accepted passkey decision, and
replays without a server. Likewise a saga that
judged passkey resolutions of its dirty state (recorded by
tests/integration/workflows/dirty/test_passkey_resolutions.py)."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

from temporalio import workflow
from temporalio.client import WorkflowHistory

with workflow.unsafe.imports_passed_through():
    from sagacity.workflows._agent_saga import AgentSagaWorkflow
    from tests.histories import PASSKEY_DECISIONS as PASSKEY_HISTORIES
    from tests.histories import PASSKEY_RESOLUTIONS as PASSKEY_RESOLUTION_HISTORIES
    from tests.integration.workflows.test_replay import _replay_failure


async def replay_failure(history: WorkflowHistory) -> Exception | None:
    return await _replay_failure(history, AgentSagaWorkflow)


def keep_history(folder: Path, saga_id: str, history: WorkflowHistory) -> None:
    """With SAGACITY_RECORD_PASSKEY_HISTORY set, `history` becomes the one committed in
    `folder` (the recording tests call this after their saga has run)."""
    if os.environ.get("SAGACITY_RECORD_PASSKEY_HISTORY"):
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.json"):
            old.unlink()
        (folder / f"{saga_id}.json").write_text(history.to_json() + "\n")


def _recorded(folder: Path) -> tuple[WorkflowHistory, list[tuple[str, dict[str, Any]]]]:
    """The one history committed in `folder`, and each update it accepted: its name and
    the body it carried."""
    [path] = folder.glob("*.json")
    text = path.read_text()
    updates = [
        e["workflowExecutionUpdateAcceptedEventAttributes"]["acceptedRequest"]["input"]
        for e in json.loads(text)["events"]
        if "workflowExecutionUpdateAcceptedEventAttributes" in e
    ]
    bodies = [json.loads(base64.b64decode(u["args"]["payloads"][0]["data"])) for u in updates]
    named = [(u["name"], b) for u, b in zip(updates, bodies, strict=True)]
    return WorkflowHistory.from_json(path.stem, text), named


async def test_the_recorded_passkey_saga_replays() -> None:
    history, updates = _recorded(PASSKEY_HISTORIES)
    assert [name for name, _ in updates] == ["decide", "decide"]  # ivan refused, alice accepted
    bodies = [body for _, body in updates]
    assert [b["approver"] for b in bodies] == ["ivan", "alice"]
    assert all(set(b["passkey"]) >= {"authenticator_data", "signature"} for b in bodies)
    failure = await replay_failure(history)
    assert failure is None, f"{type(failure).__name__}: {failure}"


async def test_the_recorded_passkey_resolution_saga_replays() -> None:
    history, updates = _recorded(PASSKEY_RESOLUTION_HISTORIES)
    assert [(name, b["actor"]) for name, b in updates] == [
        ("resolve", "alice"),
        ("resolve", "olivia"),
        ("resolve", "olivia"),
        ("resolve", "olivia"),
    ]  # fmt: skip  (alice refused, two moved assertions refused, olivia's accepted)
    bodies = [body for _, body in updates]
    assert all("signature" not in b and "authenticator_data" in b["passkey"] for b in bodies)
    failure = await replay_failure(history)
    assert failure is None, f"{type(failure).__name__}: {failure}"
