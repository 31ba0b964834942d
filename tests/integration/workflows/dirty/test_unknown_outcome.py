"""Unknown outcomes resolved by a person, through SagaClient, end to end.

A payment attempt that never answers (toolkit.py beside this file) leaves INTENT and no
outcome; the saga compensates what it knows, waits in NEEDS_HUMAN with that step
listed, and a person says what happened. Real dev server, in-process worker, SQLite
journal; the ledger is the witness of what money moved."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import WorkflowFailureError

from sagacity.audit._export import verify_store
from sagacity.journal._phases import Phase, SagaStatus, StepStatus
from sagacity.worker.client._client import saga_result
from sagacity.worker.client._resolutions import ResolutionRefusedError
from sagacity.worker.client._saga_client import SagaClient
from sagacity.workflows._models import (
    DirtyStep,
    ResolutionPolicy,
    SagaInput,
    SagaResult,
    SagaView,
    ToolCall,
)
from tests.integration.workflows.dirty.conftest import DirtyHarness
from tests.support.workflows import CHARGE, RESERVE, entries_of, eventually

pytestmark = pytest.mark.timeout(90)

TIMING: dict[str, Any] = {"tool_timeout_seconds": 2, "tool_heartbeat_timeout_seconds": 1}


def pay(effect: str) -> ToolCall:
    return ToolCall(tool="hanging_payment", args={"amount": 250, "effect": effect})


async def start(
    dirty: DirtyHarness, plan: list[ToolCall], **options: Any
) -> tuple[Any, SagaClient]:
    client = SagaClient(dirty.client, task_queue=dirty.task_queue)
    handle = await dirty.client.start_workflow(
        "AgentSaga", SagaInput(plan=plan, **TIMING, **options), id=f"dirty-{id(plan):x}-"
        + __import__("uuid").uuid4().hex[:8], task_queue=dirty.task_queue, result_type=SagaResult,
    )  # fmt: skip
    return handle, client


async def needs_human(client: SagaClient, saga_id: str) -> list[DirtyStep]:
    async def probe() -> list[DirtyStep] | None:
        view: SagaView = await client.status(saga_id)
        return view.dirty if view.status is SagaStatus.NEEDS_HUMAN else None

    return await eventually(probe, 40)


@pytest.mark.parametrize("effect", ["after", "before"])
async def test_unknown_payment_resolved(dirty: DirtyHarness, effect: str) -> None:
    handle, client = await start(dirty, [RESERVE, pay(effect), CHARGE])
    [step] = await needs_human(client, handle.id)
    assert (step.step, step.tool, step.kind) == (2, "hanging_payment", "UNKNOWN_OUTCOME")
    assert step.args == {"amount": 250, "effect": effect}
    assert "INTENT journaled" in step.known and step.since is not None
    assert step.actions == ["happened", "did_not_happen", "accept"]
    assert dirty.shop.stock("widget") == 10  # the reserve was released before the wait
    assert [e.phase for e in dirty.store.entries(handle.id)][-1] is Phase.NEEDS_HUMAN
    assert dirty.store.is_fenced(handle.id, 2)  # a late attempt could not pay now

    happened = effect == "after"
    answer = await client.resolve(
        handle.id, 2, happened=happened, actor="olivia", reason="checked the PSP dashboard",
        result={"psp_id": "pi_123"} if happened else None,
    )  # fmt: skip
    assert answer.outcome == ("compensated" if happened else "nothing to undo")
    assert answer.dirty == [] and answer.status is SagaStatus.COMPENSATED
    result: SagaResult = await saga_result(handle)
    assert result.status is SagaStatus.COMPENSATED and not result.needs_human
    [report] = [s for s in result.steps if s.step == 2]
    assert report.resolved_by == "olivia"
    assert report.status is (StepStatus.COMPENSATED if happened else StepStatus.DID_NOT_HAPPEN)
    assert [(r.action, r.actor) for r in result.resolutions] == [
        ("happened" if happened else "did_not_happen", "olivia")
    ]

    story = [(e.phase.value, e.step, e.actor) for e in dirty.store.entries(handle.id)]
    tail = [("RESOLVED", 2, "olivia")]
    tail += (
        [("EXECUTED", 2, "olivia"), ("COMPENSATED", 2, None)] if happened
        else [("FAILED", 2, "olivia")]
    )  # fmt: skip
    assert story[-len(tail) - 1 : -1] == tail and story[-1][0] == "SAGA_CLOSED"
    if happened:  # voided exactly once, with the result the person reported
        assert dirty.ledger.payments() == [{"key": f"{handle.id}:2", "amount": 250, "voided": True}]
        assert dirty.ledger.voids() == [(f"{handle.id}:2", "{'psp_id': 'pi_123'}")]
        [executed] = [e for e in entries_of(dirty.store, handle.id, "EXECUTED") if e.step == 2]
        assert executed.input == {"amount": 250, "effect": "after"}  # from its INTENT
    else:
        assert dirty.ledger.payments() == [] and dirty.ledger.voids() == []
    assert verify_store(dirty.store, handle.id).ok


async def test_refusals_second_resolution_and_acceptance(dirty: DirtyHarness) -> None:
    """Two dirty steps (a refund that fails, a payment whose outcome is unknown): one
    resolved, resolving it again refused and journaled, the other accepted."""
    dirty.shop.set_fault("refund")
    handle, client = await start(
        dirty, [CHARGE, pay("after")], compensation_attempts=1,
        resolution=ResolutionPolicy(resolvers=["olivia", "omar"]),
    )  # fmt: skip
    listed = await needs_human(client, handle.id)
    assert [(d.step, d.kind) for d in listed] == [
        (1, "COMPENSATION_FAILED"),
        (2, "UNKNOWN_OUTCOME"),
    ]

    async def refused(**kw: Any) -> str:
        with pytest.raises(ResolutionRefusedError) as caught:
            await client.resolve(handle.id, **kw)
        assert caught.value.journaled
        return caught.value.reason

    assert await refused(step=2, happened=True, actor="mallory") == "RESOLVER_NOT_ALLOWED"
    assert await refused(step=3, happened=True, actor="olivia") == "NOT_DIRTY"
    assert await refused(step=1, happened=False, actor="olivia") == "NOT_APPLICABLE"
    with pytest.raises(ResolutionRefusedError) as reserved:
        await client.resolve(handle.id, 2, happened=True, actor="sagacity:timeout")
    assert reserved.value.reason == "RESERVED_APPROVER"
    done = await client.resolve(handle.id, 2, happened=True, actor="olivia")
    assert done.outcome == "compensated" and done.dirty == [1]
    assert await refused(step=2, happened=False, actor="omar") == "ALREADY_RESOLVED"
    with pytest.raises(ResolutionRefusedError) as stale:  # omar looked before step 2 was fixed
        await client.accept(handle.id, reason="refund by hand", steps=[1, 2], actor="omar")
    assert stale.value.reason == "STALE_VIEW"

    accepted = await client.accept(handle.id, reason="refunded by hand, ticket 42", actor="omar")
    assert accepted.steps == [1] and accepted.status is SagaStatus.ACCEPTED
    result: SagaResult = await saga_result(handle)
    assert result.status is SagaStatus.ACCEPTED and not result.needs_human
    assert [d.step for d in result.dirty] == [1]
    assert [(r.action, r.step, r.actor) for r in result.resolutions] == [
        ("happened", 2, "olivia"), ("accept", None, "omar")
    ]  # fmt: skip
    refusals = [
        e.error.split(":")[0] for e in entries_of(dirty.store, handle.id, "RESOLUTION_REFUSED")
    ]
    assert refusals == [
        "RESOLVER_NOT_ALLOWED", "NOT_DIRTY", "NOT_APPLICABLE", "RESERVED_APPROVER",
        "ALREADY_RESOLVED", "STALE_VIEW",
    ]  # fmt: skip
    [acceptance] = [e for e in entries_of(dirty.store, handle.id, "RESOLVED") if e.step == 0]
    assert acceptance.actor == "omar" and acceptance.result["steps"] == [1]
    closed = entries_of(dirty.store, handle.id, "SAGA_CLOSED")[0].result
    assert closed["status"] == "ACCEPTED" and closed["dirty_steps"] == [1]
    assert dirty.ledger.payments()[0]["voided"] is True
    assert [c["refunded"] for c in dirty.shop.charges()] == [False]  # accepted as is
    assert verify_store(dirty.store, handle.id).ok


async def test_deadline_closes_unresolved(dirty: DirtyHarness) -> None:
    handle, client = await start(
        dirty, [RESERVE, pay("after")], resolution=ResolutionPolicy(deadline_seconds=2)
    )
    await needs_human(client, handle.id)
    result: SagaResult = await saga_result(handle)
    assert result.status is SagaStatus.UNRESOLVED and result.needs_human
    assert [d.step for d in result.dirty] == [2] and result.resolutions == []
    entries = list(dirty.store.entries(handle.id))
    assert [e.phase.value for e in entries][-2:] == ["NEEDS_HUMAN", "SAGA_CLOSED"]
    assert entries[-1].result["status"] == "UNRESOLVED" and entries[-1].result["needs_human"]
    assert verify_store(dirty.store, handle.id).ok
    assert dirty.ledger.payments()[0]["voided"] is False  # nobody said: nothing undone blindly


async def test_cancelled_mid_payment_then_resolved_as_happened(dirty: DirtyHarness) -> None:
    """A cancel interrupts the payment after it paid: no attempt reported back (so the
    saga never learnt the tool's kind or its validated arguments); the person sees the
    call's arguments, says it happened, and the payment is voided once."""
    handle, client = await start(dirty, [RESERVE, pay("after")])
    await eventually(lambda: _async(dirty.ledger.payments()), 20)
    await handle.cancel()
    [step] = await needs_human(client, handle.id)
    assert (step.step, step.args) == (2, {"amount": 250, "effect": "after"})
    assert "cancelled during the call" in step.known
    done = await client.resolve(handle.id, 2, happened=True, actor="olivia")
    assert done.outcome == "compensated"
    with pytest.raises(WorkflowFailureError):
        await saga_result(handle)  # it was cancelled: it ends cancelled, after cleaning up
    assert dirty.ledger.payments()[0]["voided"] is True and len(dirty.ledger.voids()) == 1
    closed = entries_of(dirty.store, handle.id, "SAGA_CLOSED")[0].result
    assert closed["status"] == "COMPENSATED" and closed["needs_human"] is False
    assert verify_store(dirty.store, handle.id).ok


async def _async(value: Any) -> Any:
    return value
