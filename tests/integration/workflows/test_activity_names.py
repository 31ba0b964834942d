"""What the Temporal UI lists for a saga's steps, read from the real history: the approval
check of an irreversible tool and its approved run are two honestly named activities, and
a tool that failed is a failed activity (red), not a green one."""

from __future__ import annotations

import json

import pytest
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHandle

from sagacity.journal._phases import SagaStatus
from sagacity.worker.client._client import saga_result
from sagacity.workflows._models import ModelSettings, ModelTurn, SagaInput, SagaResult
from tests.integration.workflows.test_approval_flows import decision, pending
from tests.support.workflows import CHARGE, RESERVE, SHIP_FAILS, WIRE

pytestmark = [pytest.mark.temporal]

WIRE_SUMMARY = "send_wire_transfer(iban='DE89370400440532013000', amount=5000)"


async def _events(handle: WorkflowHandle[object, SagaResult]) -> list[HistoryEvent]:
    return [e async for e in handle.fetch_history_events()]


def _summaries(events: list[HistoryEvent]) -> list[str]:
    return [
        json.loads(e.user_metadata.summary.data)
        for e in events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.user_metadata.HasField("summary")
    ]


async def test_an_approval_check_and_the_approved_run_are_named_apart(saga) -> None:
    handle = await saga.start(SagaInput(plan=[RESERVE, CHARGE, WIRE]))
    await handle.signal("approve", decision(await pending(handle)))
    assert (await saga_result(handle)).status is SagaStatus.COMPLETED

    summaries = _summaries(await _events(handle))
    assert summaries == [
        "reserve_inventory(sku='widget', qty=2)",
        "charge_card(amount=100, currency='EUR')",
        "approval check " + WIRE_SUMMARY,
        "run approved " + WIRE_SUMMARY,
    ]


async def test_a_model_driven_saga_names_the_approval_check_too(saga) -> None:
    """The model turn says which of the tools it calls wait for approval."""
    script = [ModelTurn(tool_calls=[WIRE.model_copy(update={"call_id": "c1"})])]
    handle = await saga.start(
        SagaInput(goal="pay the supplier", model=ModelSettings(script=script))
    )
    await pending(handle)
    assert "approval check " + WIRE_SUMMARY in _summaries(await _events(handle))
    await handle.terminate("seen")


async def test_a_failed_tool_is_a_failed_activity_and_the_saga_still_compensates(saga) -> None:
    handle = await saga.start(SagaInput(plan=[RESERVE, CHARGE, SHIP_FAILS]))
    result = await saga_result(handle)
    assert result.status is SagaStatus.COMPENSATED
    assert [c.step for c in result.compensations] == [2, 1]
    assert result.steps[2].status.value == "FAILED" and "carrier" in (result.steps[2].error or "")

    events = await _events(handle)
    failed = [
        e.activity_task_failed_event_attributes.failure
        for e in events
        if e.HasField("activity_task_failed_event_attributes")
    ]
    [failure] = failed  # one attempt: a tool's own failure is journaled, never retried
    info = failure.application_failure_info
    assert (info.type, info.non_retryable) == ("ToolFailed", True)
    assert failure.message.startswith("ship_order failed: ShopError")
    assert len(saga.shop.calls("ship_order")) == 1
