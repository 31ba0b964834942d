"""A saga that judged passkey decisions replays from its recorded history: the committed
one (recorded by tests/integration/approval/signed/test_passkey_approvals.py with
SAGACITY_RECORD_PASSKEY_HISTORY=1) holds a refused and an accepted passkey decision, and
replays without a server. Likewise a saga that
judged passkey resolutions of its dirty state (recorded by
tests/integration/workflows/dirty/test_passkey_resolutions.py)."""

from __future__ import annotations

import base64
import json

from temporalio import workflow
from temporalio.client import WorkflowHistory

with workflow.unsafe.imports_passed_through():
    from sagacity.workflows._agent_saga import AgentSagaWorkflow
    from tests.histories import PASSKEY_DECISIONS as PASSKEY_HISTORIES
    from tests.histories import PASSKEY_RESOLUTIONS as PASSKEY_RESOLUTION_HISTORIES
    from tests.integration.workflows.test_replay import _replay_failure


async def replay_failure(history: WorkflowHistory) -> Exception | None:
    return await _replay_failure(history, AgentSagaWorkflow)


async def test_the_recorded_passkey_saga_replays() -> None:
    [path] = PASSKEY_HISTORIES.glob("*.json")
    text = path.read_text()
    events = json.loads(text)["events"]
    updates = [
        e["workflowExecutionUpdateAcceptedEventAttributes"]["acceptedRequest"]["input"]
        for e in events
        if "workflowExecutionUpdateAcceptedEventAttributes" in e
    ]
    assert [u["name"] for u in updates] == ["decide", "decide"]  # ivan refused, alice accepted
    bodies = [json.loads(base64.b64decode(u["args"]["payloads"][0]["data"])) for u in updates]
    assert [b["approver"] for b in bodies] == ["ivan", "alice"]
    assert all(set(b["passkey"]) >= {"authenticator_data", "signature"} for b in bodies)
    failure = await replay_failure(WorkflowHistory.from_json(path.stem, text))
    assert failure is None, f"{type(failure).__name__}: {failure}"


async def test_the_recorded_passkey_resolution_saga_replays() -> None:
    [path] = PASSKEY_RESOLUTION_HISTORIES.glob("*.json")
    text = path.read_text()
    events = json.loads(text)["events"]
    updates = [
        e["workflowExecutionUpdateAcceptedEventAttributes"]["acceptedRequest"]["input"]
        for e in events
        if "workflowExecutionUpdateAcceptedEventAttributes" in e
    ]
    bodies = [json.loads(base64.b64decode(u["args"]["payloads"][0]["data"])) for u in updates]
    assert [(u["name"], b["actor"]) for u, b in zip(updates, bodies, strict=True)] == [
        ("resolve", "alice"),
        ("resolve", "olivia"),
        ("resolve", "olivia"),
        ("resolve", "olivia"),
    ]  # fmt: skip  (alice refused, two moved assertions refused, olivia's accepted)
    assert all("signature" not in b and "authenticator_data" in b["passkey"] for b in bodies)
    failure = await replay_failure(WorkflowHistory.from_json(path.stem, text))
    assert failure is None, f"{type(failure).__name__}: {failure}"
