"""When the journal deterministically refuses a write mid-saga (here: someone with write
access to the database planted a row), the saga says what happened instead of retrying
for minutes or blaming a cancel that never was."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from sagacity.activities import NOT_THE_SAGAS_RUN, SagaActivities
from sagacity.activities._models import CompensateInput, RunToolInput, ToolCall
from sagacity.examples.orders import Shop
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase, SagaStatus
from sagacity.stores._memory import MemoryJournalStore
from sagacity.tools._toolbox import Toolbox
from sagacity.worker.client._client import saga_result
from sagacity.workflows._approval_gate import CANCELLED_ACTOR, FAILED_ACTOR
from sagacity.workflows._models import SagaInput
from tests.integration.workflows.test_approval_flows import decision, pending
from tests.support.saga_activity_env import opening, saga_env
from tests.support.workflows import RESERVE, WIRE, entries_of


async def test_a_journal_failure_while_awaiting_approval_is_not_called_a_cancel(saga: Any) -> None:
    handle = await saga.start(SagaInput(plan=[RESERVE, WIRE]))
    p = await pending(handle)
    # A hostile writer plants an APPROVED for the pending step: the saga's own APPROVED for
    # the same logical entry now conflicts (non-retryable), as any deterministic journal
    # refusal would.
    planted = EntryDraft.new(handle.id, Phase.APPROVED, step=p.step, tool=p.tool, actor="eve")
    saga.store.append(planted)
    await handle.signal("approve", decision(p))
    result = await saga_result(handle)

    assert result.status is SagaStatus.COMPENSATED
    assert saga.shop.wires() == []  # the approval never took effect: nothing ran
    rejected = entries_of(saga.store, handle.id, "REJECTED")
    assert [(e.step, e.actor) for e in rejected] == [(p.step, FAILED_ACTOR)]
    assert FAILED_ACTOR != CANCELLED_ACTOR and "failed while awaiting" in (rejected[0].error or "")
    assert saga.shop.stock("widget") == 10  # the reservation was undone


async def test_a_deterministic_journal_error_in_a_tool_step_is_not_retried(tmp_path: Any) -> None:
    """A chain closed behind the saga's back refuses every later step before anything
    runs: the tool step fails non-retryably at once (not ten attempts with back-off
    ending in "no outcome"), and the tool never runs. Likewise for a compensation."""
    shop = Shop(tmp_path / "shop.db")
    store = MemoryJournalStore()
    activities = SagaActivities(store, Toolbox.build(shop))
    store.append(opening("s1"))
    store.append(EntryDraft.new("s1", Phase.COMPENSATING))
    store.append(EntryDraft.new("s1", Phase.SAGA_CLOSED, result={"status": "forged"}))
    call = ToolCall(tool="reserve_inventory", args={"sku": "widget", "qty": 1})
    env = saga_env("s1")
    run = RunToolInput(saga_id="s1", step=1, call=call, worker=activities.identity)
    with pytest.raises(ApplicationError) as refused:
        await env.run(activities.run_tool, run)
    assert refused.value.non_retryable and refused.value.type == NOT_THE_SAGAS_RUN
    assert "closed" in refused.value.message
    assert shop.calls() == []
    undo = CompensateInput(saga_id="s1", step=1, tool="reserve_inventory", worker=run.worker)
    with pytest.raises(ApplicationError) as refused_undo:
        await env.run(activities.compensate, undo)
    assert refused_undo.value.non_retryable and "closed" in refused_undo.value.message
