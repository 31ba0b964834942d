"""A refund provider that is down for longer than the compensation's retries: the saga
waits in NEEDS_HUMAN; bring the provider back; `retry_compensation` cleans it; one refund.

Real dev server, in-process worker, SQLite journal, the durable shop read back."""

from __future__ import annotations

from typing import Any

import pytest
from markdown_it import MarkdownIt
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError

from sagacity.audit._export import verify_store
from sagacity.journal._phases import Phase, SagaStatus
from sagacity.worker.client._client import saga_result
from sagacity.workflows._inspection import SAGA_NEEDS_HUMAN, SAGA_STATUS
from sagacity.workflows._models import (
    DirtyStep,
    ResolutionPolicy,
    ResolutionResult,
    SagaInput,
    SagaResult,
    SagaView,
)
from tests.support.workflows import (
    WIRE,
    entries_of,
    eventually,
    refund_refused,
)

pytestmark = pytest.mark.timeout(90)


async def _dirty(handle: WorkflowHandle[Any, SagaResult]) -> list[DirtyStep]:
    async def probe() -> list[DirtyStep] | None:
        view = await handle.query("status", result_type=SagaView)
        if view.status is SagaStatus.NEEDS_HUMAN:
            return view.dirty
        return None

    return await eventually(probe)


async def _refusals(store: Any, saga_id: str, count: int) -> list[Any] | None:
    found = entries_of(store, saga_id, "RESOLUTION_REFUSED")
    return found if len(found) >= count else None


async def _resolve(handle: WorkflowHandle[Any, SagaResult], **body: Any) -> ResolutionResult:
    result: ResolutionResult = await handle.execute_update(
        "resolve", {"saga_id": handle.id, **body}, result_type=ResolutionResult
    )
    return result


async def _refused(handle: WorkflowHandle[Any, SagaResult], **body: Any) -> str:
    with pytest.raises(WorkflowUpdateFailedError) as caught:
        await _resolve(handle, **body)
    cause: Any = caught.value.cause
    assert cause.type == "ResolutionRefused"
    return str(cause.details[0])


async def test_refund_down_then_retried(saga) -> None:
    handle = await saga.start(
        refund_refused(saga.shop, resolution=ResolutionPolicy(resolvers=["olivia"]))
    )
    [dirty] = await _dirty(handle)
    assert (dirty.step, dirty.tool, dirty.kind) == (2, "charge_card", "COMPENSATION_FAILED")
    assert "payment provider refused the refund" in dirty.known
    assert dirty.since is not None and dirty.actions == ["retry_compensation", "accept"]
    attrs = (await handle.describe()).typed_search_attributes
    assert attrs.get(SAGA_STATUS) == "NEEDS_HUMAN" and attrs.get(SAGA_NEEDS_HUMAN) is True
    assert saga.shop.stock("widget") == 10  # what it could undo, it undid
    assert [c["refunded"] for c in saga.shop.charges()] == [False]

    # Refused and journaled: a step that is not dirty, an action that does not apply, an
    # actor not allowed to resolve.
    assert await _refused(handle, action="did_not_happen", step=1, actor="olivia") == "NOT_DIRTY"
    assert (
        await _refused(handle, action="did_not_happen", step=2, actor="olivia") == "NOT_APPLICABLE"
    )
    assert (
        await _refused(handle, action="retry_compensation", step=2, actor="mallory")
        == "RESOLVER_NOT_ALLOWED"
    )
    # A result JSON cannot carry exactly (it could not be signed, hashed or journaled as
    # one value), by update and by signal: refused and journaled, the saga unharmed.
    huge = {"action": "happened", "step": 2, "actor": "mallory", "result": {"n": 2**60}}
    assert await _refused(handle, **huge) == "MALFORMED"
    await handle.signal("resolve", {"saga_id": handle.id, **huge, "result": {"n": float("nan")}})
    refused = await eventually(lambda: _refusals(saga.store, handle.id, 5))
    assert [r.error.split(":")[0] for r in refused] == [
        "NOT_DIRTY", "NOT_APPLICABLE", "RESOLVER_NOT_ALLOWED", "MALFORMED", "MALFORMED"
    ]  # fmt: skip

    # Still down: the retry fails again, journaled as a second round; still dirty.
    again = await _resolve(handle, action="retry_compensation", step=2, actor="olivia")
    assert again.dirty == [2] and again.status is SagaStatus.NEEDS_HUMAN
    assert "compensation failed" in again.outcome
    failed = entries_of(saga.store, handle.id, "COMPENSATION_FAILED")
    assert [(f.step, f.attempt) for f in failed] == [(2, 1), (2, 2)]

    saga.shop.clear_fault("refund")
    done = await _resolve(handle, action="retry_compensation", step=2, actor="olivia")
    assert (done.outcome, done.dirty, done.status) == ("compensated", [], SagaStatus.COMPENSATED)
    result = await saga_result(handle)
    assert result.status is SagaStatus.COMPENSATED and not result.needs_human
    assert [(r.action, r.step, r.actor) for r in result.resolutions] == [
        ("retry_compensation", 2, "olivia"), ("retry_compensation", 2, "olivia")
    ]  # fmt: skip
    assert [c["refunded"] for c in saga.shop.charges()] == [True]
    # Two rounds of two failed attempts, then the one that refunded.
    assert len(saga.shop.calls("refund_card")) == 5
    resolved = entries_of(saga.store, handle.id, "RESOLVED")
    assert [(r.step, r.attempt, r.actor) for r in resolved] == [(2, 1, "olivia"), (2, 2, "olivia")]
    entries = list(saga.store.entries(handle.id))
    assert entries[-1].phase is Phase.SAGA_CLOSED
    assert [e.phase for e in entries if e.phase is Phase.NEEDS_HUMAN] == [Phase.NEEDS_HUMAN]
    assert verify_store(saga.store, handle.id).ok
    history = await handle.fetch_history()
    assert not any(e.HasField("workflow_task_failed_event_attributes") for e in history.events)


async def test_current_details_say_what_is_dirty_and_how_to_resolve(saga) -> None:
    """What the Temporal UI shows of a waiting saga: its current details (the workflow's
    metadata query, as the UI reads it)."""
    handle = await saga.start(refund_refused(saga.shop, compensation_attempts=1))
    await _dirty(handle)
    metadata: Any = await handle.query("__temporal_workflow_metadata")
    details = metadata.current_details if hasattr(metadata, "current_details") else str(metadata)
    html = MarkdownIt("commonmark").enable("table").render(details)  # as the UI renders it
    assert "<h2>NEEDS_HUMAN</h2>" in html and "<strong>Needs a human:</strong>" in html
    assert (
        "<li>step <strong>2</strong> <code>charge_card</code>: <strong>COMPENSATION_FAILED" in html
    )
    assert "payment provider refused the refund" in html
    assert f"<code>sagacity resolve {handle.id} STEP --happened</code>" in html
    saga.shop.clear_fault("refund")
    await _resolve(handle, action="retry_compensation", step=2, actor="olivia")
    assert (await saga_result(handle)).status is SagaStatus.COMPENSATED


async def test_refusals_are_numbered_across_continue_as_new(saga) -> None:
    """A junk resolution in each run of a saga that continues as new after every step:
    each refusal is journaled, numbered after the earlier runs' (none lost to a conflict)."""
    handle = await saga.start(
        SagaInput(plan=[WIRE, WIRE, WIRE], continue_as_new_after_steps=1, approvers=["ann"])
    )
    for n in range(1, 4):
        pending = await _pending_step(handle, n)
        await handle.signal("resolve", {"saga_id": handle.id, "action": "accept", "steps": []})
        await eventually(lambda n=n: _refusals(saga.store, handle.id, n))
        decision = {"saga_id": handle.id, "step": n, "payload_sha256": pending, "approver": "ann"}
        await handle.signal("approve", decision)
    assert (await saga_result(handle)).status is SagaStatus.COMPLETED
    refused = entries_of(saga.store, handle.id, "RESOLUTION_REFUSED")
    assert [(r.step, r.attempt) for r in refused] == [(0, 1), (0, 2), (0, 3)]
    assert all(r.error.startswith("MALFORMED") for r in refused)  # accept without a reason


async def _pending_step(handle: WorkflowHandle[Any, SagaResult], step: int) -> str:
    async def probe() -> str | None:
        view = await handle.query("status", result_type=SagaView)
        pending = view.pending_approval
        return pending.payload_sha256 if pending is not None and pending.step == step else None

    return await eventually(probe)


async def test_actions_are_bounded_but_an_acceptance_is_always_taken(saga, monkeypatch) -> None:
    """Each accepted action adds to the result and the history; past the cap only an
    acceptance is taken (the cap lowered to 2 here: the worker runs in this process)."""
    from sagacity.workflows import _human_desk as human_desk

    monkeypatch.setattr(human_desk, "MAX_ACTIONS", 2)
    handle = await saga.start(refund_refused(saga.shop, compensation_attempts=1))
    await _dirty(handle)
    for _ in range(2):
        again = await _resolve(handle, action="retry_compensation", step=2, actor="olivia")
        assert again.dirty == [2]
    assert (
        await _refused(handle, action="retry_compensation", step=2, actor="olivia")
        == "TOO_MANY_ACTIONS"
    )
    done = await _resolve(handle, action="accept", steps=[2], actor="olivia", reason="by hand")
    assert done.status is SagaStatus.ACCEPTED
    result = await saga_result(handle)
    assert [r.action for r in result.resolutions] == [
        "retry_compensation", "retry_compensation", "accept"
    ]  # fmt: skip
