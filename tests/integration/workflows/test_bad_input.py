"""Bad input never fails a workflow task, crashes the worker or loses journal entries:
malformed decisions are refused and journaled; invalid model calls go back to the model."""

from __future__ import annotations

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError

from sagacity.journal._chain import verify_chain
from sagacity.journal._phases import SagaStatus
from sagacity.worker.client._client import saga_result
from sagacity.workflows._models import ModelSettings, ModelTurn, SagaInput, ToolCall
from tests.integration.workflows.test_approval_flows import decision, pending
from tests.support.workflows import RESERVE, WIRE, entries_of, eventually


async def failed_workflow_tasks(handle: WorkflowHandle) -> int:
    history = await handle.fetch_history()
    return sum(
        1 for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    )


async def _async(value):
    return value


MALFORMED = [
    None,
    "approve please",
    [1, 2, 3],
    {"payload_sha256": "ab" * 32, "approver": "alice"},  # no step
    {"step": "3", "payload_sha256": "ab" * 32, "approver": "alice"},  # wrong type
    {"step": 2, "payload_sha256": 42, "approver": "alice"},
    {"step": 2, "payload_sha256": "ab" * 32, "approver": "a" * 2_000_000},  # huge
    {"step": 2, "payload_sha256": "ab" * 32, "approver": "alice", "extra": True},
]


async def test_malformed_decisions_are_refused_and_journaled(saga) -> None:
    handle = await saga.start(SagaInput(plan=[RESERVE, WIRE]))
    p = await pending(handle)

    for body in MALFORMED:
        await handle.signal("approve", body)
    refused = await eventually(
        lambda: _async(
            r
            if len(r := entries_of(saga.store, handle.id, "APPROVAL_REFUSED")) == len(MALFORMED)
            else None
        )
    )
    assert all((e.error or "").startswith("MALFORMED") for e in refused), [e.error for e in refused]
    huge = next(e for e in refused if "bytes" in (e.input or {}))
    assert huge.input["bytes"] > 2_000_000 and len(huge.input["prefix"]) == 4_096

    with pytest.raises(WorkflowUpdateFailedError) as exc:
        await handle.execute_update("decide", {"step": "two"})
    assert "MALFORMED" in str(exc.value.cause)

    assert (await pending(handle)).payload_sha256 == p.payload_sha256
    await handle.signal("approve", decision(p))
    result = await saga_result(handle)
    assert result.status is SagaStatus.COMPLETED
    assert await failed_workflow_tasks(handle) == 0
    assert verify_chain(handle.id, saga.store.entries(handle.id)).ok


async def test_invalid_model_calls_are_refused_and_returned_to_the_model(saga) -> None:
    script = [
        ModelTurn(tool_calls=[ToolCall(tool="launch_rockets", args={}, call_id="a")]),
        ModelTurn(
            tool_calls=[
                ToolCall(
                    tool="reserve_inventory", args={"sku": "widget", "qty": "many"}, call_id="b"
                )
            ]
        ),
        ModelTurn(
            tool_calls=[
                ToolCall(tool="reserve_inventory", args={"sku": "widget", "qty": 1}, call_id="c")
            ]
        ),
        ModelTurn(final="reserved one widget"),
    ]
    handle = await saga.start(
        SagaInput(goal="reserve a widget", model=ModelSettings(script=script))
    )
    result = await saga_result(handle)

    assert result.status is SagaStatus.COMPLETED
    assert result.final_answer == "reserved one widget"
    refused = entries_of(saga.store, handle.id, "CALL_REFUSED")
    assert [(e.step, e.tool) for e in refused] == [(1, "launch_rockets"), (2, "reserve_inventory")]
    assert "launch_rockets" in (refused[0].error or "") and "qty" in (refused[1].error or "")
    assert [s.status for s in result.steps] == ["REFUSED", "REFUSED", "EXECUTED"]
    # the model saw the errors: the third model call carried both refusals as tool messages
    history = await handle.fetch_history()
    model_inputs = [
        e.activity_task_scheduled_event_attributes.input
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "sagacity.next_turn"
    ]
    third = model_inputs[2].payloads[0].data.decode()
    assert "launch_rockets" in third and "qty" in third and '"tool"' in third
    assert await failed_workflow_tasks(handle) == 0
    assert saga.shop.stock("widget") == 9


async def test_consecutive_invalid_calls_fail_the_saga(saga) -> None:
    bad = ModelTurn(tool_calls=[ToolCall(tool="nope", args={})])
    script = [ModelTurn(tool_calls=[RESERVE]), bad, bad, bad, ModelTurn(final="never")]
    result = await saga.run(
        SagaInput(goal="x", model=ModelSettings(script=script), max_invalid_calls=3)
    )
    assert result.status is SagaStatus.COMPENSATED
    assert "3 invalid tool calls in a row" in (result.first_failure or "")
    assert saga.shop.stock("widget") == 10


async def test_plan_with_unknown_tool_is_refused_before_its_first_step(saga) -> None:
    """The whole plan is checked before anything runs: a typo in step 2 does not run step
    1 and then undo it, and the saga says REFUSED, not COMPENSATED."""
    result = await saga.run(SagaInput(plan=[RESERVE, ToolCall(tool="teleport", args={})]))
    assert result.status is SagaStatus.REFUSED
    assert "step 2" in (result.first_failure or "") and "teleport" in (result.first_failure or "")
    assert result.steps == [] and result.compensations == []
    phases = [e.phase.value for e in saga.store.entries(result.saga_id)]
    assert phases == ["SAGA_OPENED", "SAGA_CLOSED"]
    assert saga.shop.stock("widget") == 10
