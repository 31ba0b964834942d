"""A saga that judged passkey decisions replays from its recorded history: the committed
one (recorded by tests/signed/test_passkey_approvals.py with
SAGACITY_RECORD_PASSKEY_HISTORY=1) carries the `passkey-decisions` patch, a refused and
an accepted passkey decision, and replays without a server; histories recorded before
the patch replay too (they refuse an assertion, as they did). Likewise a saga that
judged passkey resolutions of its dirty state (recorded by
tests/dirty/test_passkey_resolutions.py), and the dirty sagas recorded before the
`passkey-resolutions` patch."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHistory

with workflow.unsafe.imports_passed_through():
    from sagacity.workflows.agent_saga import AgentSagaWorkflow
    from sagacity.workflows.approval_gate import PASSKEY_DECISIONS
    from sagacity.workflows.human_desk import HUMAN_WAIT, PASSKEY_RESOLUTIONS
    from tests.workflows.test_replay import HISTORIES, _patches, _replay_failure

PASSKEY_HISTORIES = HISTORIES / "passkeys"
"""Named by their workflow id (the saga id: what the statement signs, so a replay under
another id would judge another statement)."""
PASSKEY_RESOLUTION_HISTORIES = HISTORIES / "passkey-resolutions"
"""A saga that refused and accepted passkey resolutions (named by its saga id too)."""
BEFORE_PASSKEYS = sorted((HISTORIES / "1722997").glob("*.json"))
"""The histories committed at 1722997, the last commit before passkey decisions."""


async def replay_failure(history: WorkflowHistory) -> Exception | None:
    return await _replay_failure(history, AgentSagaWorkflow)


async def test_the_recorded_passkey_saga_replays() -> None:
    [path] = PASSKEY_HISTORIES.glob("*.json")
    text = path.read_text()
    assert PASSKEY_DECISIONS in _patches(text)
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


@pytest.mark.parametrize("path", BEFORE_PASSKEYS, ids=[p.stem for p in BEFORE_PASSKEYS])
async def test_histories_from_before_passkey_decisions_replay(path: Path) -> None:
    assert len(BEFORE_PASSKEYS) == 13  # the flows there were then
    text = path.read_text()
    assert PASSKEY_DECISIONS not in _patches(text)
    failure = await _replay_failure(WorkflowHistory.from_json(path.stem, text), AgentSagaWorkflow)
    assert failure is None, f"{path.stem}: {type(failure).__name__}: {failure}"


async def test_the_recorded_passkey_resolution_saga_replays() -> None:
    [path] = PASSKEY_RESOLUTION_HISTORIES.glob("*.json")
    text = path.read_text()
    assert PASSKEY_RESOLUTIONS in _patches(text)
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


def _waiting_histories_before_passkey_resolutions() -> list[Path]:
    """Committed histories of sagas that waited for a person and were sent resolutions
    (patch needs-human-wait, a `resolve` update or signal), before passkey resolutions."""
    found = []
    for path in sorted(HISTORIES.rglob("*.json")):
        text = path.read_text()
        patches = _patches(text)
        if HUMAN_WAIT in patches and PASSKEY_RESOLUTIONS not in patches and '"resolve"' in text:
            found.append(path)
    return found


DIRTY_BEFORE = _waiting_histories_before_passkey_resolutions()


@pytest.mark.parametrize(
    "path", DIRTY_BEFORE, ids=[str(p.relative_to(HISTORIES)) for p in DIRTY_BEFORE]
)
async def test_dirty_sagas_from_before_passkey_resolutions_replay(path: Path) -> None:
    """Sagas that waited for a person before passkey resolutions existed replay as they
    ran: the patch is asked, absent, and their resolutions are judged as then."""
    text = path.read_text()
    failure = await _replay_failure(WorkflowHistory.from_json(path.stem, text), AgentSagaWorkflow)
    assert failure is None, f"{path.stem}: {type(failure).__name__}: {failure}"


def test_there_are_dirty_histories_from_before_passkey_resolutions() -> None:
    names = {p.stem for p in DIRTY_BEFORE}
    assert "compensation_failed_resolved" in names and len(DIRTY_BEFORE) >= 3
