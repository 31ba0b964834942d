"""The compatibility rule: models decoded from history or by another version's client
ignore fields they do not know; strictness is at the door (a first run's start input)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError, WorkflowHistory

from sagacity.journal._phases import SagaStatus
from sagacity.worker.client._client import saga_result
from sagacity.workflows._agent_saga import AgentSagaWorkflow
from sagacity.workflows._models import SagaInput, SagaResult, SagaRunInput, StepReport, ToolCall
from tests.integration.workflows.test_replay import _replay_failure


def _with_extra_start_field(history: WorkflowHistory) -> WorkflowHistory:
    data = json.loads(history.to_json())
    started = data["events"][0]["workflowExecutionStartedEventAttributes"]
    payload = started["input"]["payloads"][0]
    body = json.loads(base64.b64decode(payload["data"]))
    body["field_from_a_newer_version"] = {"anything": [1, 2]}
    body["carry"]["field_from_a_newer_version"] = True
    payload["data"] = base64.b64encode(json.dumps(body).encode()).decode()
    return WorkflowHistory.from_json(history.workflow_id, json.dumps(data))


async def test_a_continued_history_with_one_more_field_still_replays(saga: Any) -> None:
    """A run's input as a newer version wrote it (one more field in the input and in the
    carry) replays on this version: decoded from history, unknown fields are ignored."""
    plan = [ToolCall(tool="catalog_export", args={"size_bytes": 10}) for _ in range(3)]
    handle = await saga.start(SagaInput(plan=plan, continue_as_new_after_steps=1))
    result = await saga_result(handle)
    assert result.status is SagaStatus.COMPLETED
    last_run = saga.client.get_workflow_handle(handle.id)  # the latest run: a continuation
    history = await last_run.fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    assert started.continued_execution_run_id  # really a continued run
    assert await _replay_failure(_with_extra_start_field(history), AgentSagaWorkflow) is None


async def test_a_first_run_with_an_unknown_start_field_is_refused(saga: Any) -> None:
    """At the door the rule is the opposite: a field this version cannot honour (a newer
    version's, or a misspelt `aprovers` that would silently drop an allow-list) is refused."""
    handle = await saga.client.start_workflow(
        "AgentSaga",
        {"plan": [], "aprovers": ["alice"]},
        id=f"door-{saga.task_queue}",
        task_queue=saga.task_queue,
    )
    with pytest.raises(WorkflowFailureError) as failed:
        await saga_result(handle)
    assert "aprovers" in str(failed.value.cause)


def test_a_newer_result_with_one_more_field_decodes() -> None:
    newer = {
        "saga_id": "s",
        "status": "COMPLETED",
        "steps": [{"step": 1, "tool": "t", "status": "EXECUTED", "signed_by": "k1"}],
        "attestation": {"kind": "a field this version does not know"},
    }
    result = SagaResult.model_validate_json(json.dumps(newer))
    assert result.status is SagaStatus.COMPLETED and result.steps[0] == StepReport(
        step=1, tool="t", status="EXECUTED"
    )


def test_a_carry_with_one_more_field_decodes() -> None:
    run_input = SagaRunInput.model_validate(
        {"goal": "g", "carry": {"next_step": 4, "merkle_root": "ab" * 32}}
    )
    assert run_input.carry is not None and run_input.carry.next_step == 4
