"""The runtime: happy path, reverse compensation, swallowed failures,
a compensation that keeps failing. Real dev server, real SQLite journal, durable shop."""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from sagacity.journal._chain import verify_chain
from sagacity.journal._phases import SagaStatus
from sagacity.worker.client._client import saga_result
from sagacity.workflows._models import (
    ModelSettings,
    ModelTurn,
    ResolutionPolicy,
    SagaInput,
    SagaResult,
    ToolCall,
)
from tests.support.workflows import (
    CHARGE,
    RESERVE,
    SHIP,
    SHIP_FAILS,
    entries_of,
    phases,
    refund_refused,
)


async def test_happy_path_journals_every_step_and_hashes_match(saga) -> None:
    result = await saga.run(SagaInput(plan=[RESERVE, CHARGE, SHIP]))

    assert result.status is SagaStatus.COMPLETED
    assert phases(saga.store, result.saga_id) == [
        ("SAGA_OPENED", 0, ""),
        ("INTENT", 1, "reserve_inventory"),
        ("EXECUTED", 1, "reserve_inventory"),
        ("INTENT", 2, "charge_card"),
        ("EXECUTED", 2, "charge_card"),
        ("INTENT", 3, "ship_order"),
        ("EXECUTED", 3, "ship_order"),
        ("SAGA_CLOSED", 0, ""),
    ]
    entries = list(saga.store.entries(result.saga_id))
    assert verify_chain(result.saga_id, entries).ok
    by_seq = {e.seq: e.hash for e in entries}
    for step in result.steps:
        assert step.intent_seq is not None and step.seq is not None
        assert by_seq[step.intent_seq] == step.intent_hash
        assert by_seq[step.seq] == step.hash
    assert (result.head_seq, result.head_hash) == (entries[-1].seq, entries[-1].hash)
    assert entries[-1].result["status"] == "COMPLETED"
    assert saga.shop.stock("widget") == 8
    assert len(saga.shop.shipments()) == 1


async def test_failure_compensates_in_reverse_order_and_restores_the_shop(saga) -> None:
    result = await saga.run(SagaInput(plan=[RESERVE, CHARGE, SHIP_FAILS]))

    assert result.status is SagaStatus.COMPENSATED
    assert result.first_failure is not None and "ship_order" in result.first_failure
    tail = phases(saga.store, result.saga_id)[-6:]
    assert tail == [
        ("INTENT", 3, "ship_order"),
        ("FAILED", 3, "ship_order"),
        ("COMPENSATING", 0, ""),
        ("COMPENSATED", 2, "charge_card"),
        ("COMPENSATED", 1, "reserve_inventory"),
        ("SAGA_CLOSED", 0, ""),
    ]
    assert [c.step for c in result.compensations] == [2, 1]
    assert saga.shop.stock("widget") == 10
    assert [c["refunded"] for c in saga.shop.charges()] == [True]
    assert verify_chain(result.saga_id, saga.store.entries(result.saga_id)).ok


async def test_swallowed_failure_still_compensates(saga) -> None:
    """The model ignores the declined card, calls another tool and answers "done": the
    saga is failed the moment the tool failed, so nothing else runs and it compensates."""
    declined = ToolCall(
        tool="charge_card", args={"amount": 100, "card": "tok_declined"}, call_id="c2"
    )
    script = [
        ModelTurn(tool_calls=[RESERVE.model_copy(update={"call_id": "c1"})]),
        ModelTurn(tool_calls=[declined]),
        ModelTurn(tool_calls=[SHIP.model_copy(update={"call_id": "c3"})]),
        ModelTurn(final="done"),
    ]
    result = await saga.run(SagaInput(goal="buy a widget", model=ModelSettings(script=script)))

    assert result.status is SagaStatus.COMPENSATED
    assert result.final_answer is None
    assert "card declined" in (result.first_failure or "")
    assert saga.shop.shipments() == []
    assert saga.shop.calls("ship_order") == []
    assert saga.shop.stock("widget") == 10
    assert [e.step for e in entries_of(saga.store, result.saga_id, "COMPENSATED")] == [1]


async def test_compensation_that_keeps_failing_is_journaled_and_the_rest_still_run(saga) -> None:
    nobody_comes = ResolutionPolicy(deadline_seconds=1)
    result = await saga.run(refund_refused(saga.shop, resolution=nobody_comes))

    assert result.status is SagaStatus.UNRESOLVED
    assert result.needs_human is True and [d.step for d in result.dirty] == [2]
    failed = entries_of(saga.store, result.saga_id, "COMPENSATION_FAILED")
    assert [(e.step, e.tool) for e in failed] == [(2, "charge_card")]
    assert "refused the refund" in (failed[0].error or "")
    assert len(saga.shop.calls("refund_card")) == 2  # its retry policy ran, then gave up
    assert saga.shop.stock("widget") == 10  # step 1 was still compensated after step 2 failed
    assert [(c.step, c.ok) for c in result.compensations] == [(2, False), (1, True)]
    assert verify_chain(result.saga_id, saga.store.entries(result.saga_id)).ok


async def test_a_reused_saga_id_is_refused_and_the_old_journal_untouched(saga) -> None:
    from temporalio.client import WorkflowFailureError

    first = await saga.run(SagaInput(plan=[RESERVE]))
    before = list(saga.store.entries(first.saga_id))

    handle = await saga.start(SagaInput(plan=[RESERVE]), saga_id=first.saga_id)
    try:
        await saga_result(handle)
        raise AssertionError("a reused saga id must not run")
    except WorkflowFailureError as exc:
        assert "never reused" in str(exc.cause)
    assert list(saga.store.entries(first.saga_id)) == before
    assert saga.shop.stock("widget") == 8  # the second run reserved nothing


async def test_a_saga_that_did_not_complete_fails_its_workflow_with_its_result(saga) -> None:
    """What Temporal (its UI, its alerts) sees of an undone saga: a failed workflow, the
    first failure as the message and the whole SagaResult as the failure's details; a
    completed saga completes."""
    handle = await saga.start(SagaInput(plan=[RESERVE, CHARGE, SHIP_FAILS]))
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.non_retryable
    assert cause.type == "SagaCompensated"
    assert cause.message.startswith("saga compensated: step 3 (ship_order) failed")
    result = SagaResult.model_validate(cause.details[0])
    assert result.status is SagaStatus.COMPENSATED and [c.step for c in result.compensations] == [
        2,
        1,
    ]
    assert await saga_result(handle) == result  # the client reads it from the failure
    assert (await handle.describe()).status is WorkflowExecutionStatus.FAILED
    [closed] = entries_of(saga.store, handle.id, "SAGA_CLOSED")
    assert (result.head_seq, result.head_hash) == (closed.seq, closed.hash)

    done = await saga.start(SagaInput(plan=[RESERVE]))
    assert (await done.result()).status is SagaStatus.COMPLETED
    assert (await done.describe()).status is WorkflowExecutionStatus.COMPLETED
