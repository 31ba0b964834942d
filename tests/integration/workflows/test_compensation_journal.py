"""Compensation undoes only what the journal says was EXECUTED, end to end.

Real dev server, worker and SQLite journal, the durable shop read back. An EXECUTED row
deleted from the journal (the append-only trigger dropped by someone with database
access) is never undone from the workflow's own record: the compensation fails, the
saga needs a human (nobody comes here: it closes UNRESOLVED), and the refund never
runs. COMPENSATION_FAILED journals the EXECUTED entry's input even after
continue-as-new, and the workflow
compensates exactly the plan `plan_compensation` reads from the journal.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from pathlib import Path

from temporalio.client import WorkflowHandle

from sagacity.activities._compensation_runner import NOT_EXECUTED_IN_JOURNAL
from sagacity.journal._phases import Phase, SagaStatus
from sagacity.tools._compensation import compensable_in, plan_compensation
from sagacity.tools._decorators import CompensationContext, compensable, compensation, tool
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker.client._client import saga_result
from sagacity.workflows._models import (
    PendingApproval,
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
    WIRE,
    entries_of,
    eventually,
    refund_refused,
)

UNATTENDED = ResolutionPolicy(deadline_seconds=1)
"""Nobody resolves these sagas' failed compensations: they close UNRESOLVED at once."""


async def _pending(handle: WorkflowHandle[object, SagaResult]) -> PendingApproval:
    async def probe() -> PendingApproval | None:
        return await handle.query("pending_approval", result_type=PendingApproval | None)  # type: ignore[arg-type]

    return await eventually(probe)


async def _rejected(
    handle: WorkflowHandle[object, SagaResult], pending: PendingApproval
) -> SagaResult:
    """Reject the pending request (by signal, as carol) and wait for the saga's result."""
    decision = {
        "saga_id": handle.id,
        "step": pending.step,
        "payload_sha256": pending.payload_sha256,
    }
    await handle.signal("reject", {**decision, "approver": "carol", "reason": "no"})
    return await saga_result(handle)


def _delete_entry(db: Path, saga_id: str, step: int, phase: str) -> int:
    """What an attacker with write access to the journal database does: drop the
    append-only trigger and delete one row. Returns the number of rows deleted."""
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TRIGGER journal_no_delete")
        deleted = conn.execute(
            "DELETE FROM journal WHERE saga_id=? AND step=? AND phase=?", (saga_id, step, phase)
        ).rowcount
    return deleted


async def test_an_executed_row_missing_from_the_journal_fails_closed(saga, tmp_path) -> None:
    handle = await saga.start(SagaInput(plan=[RESERVE, CHARGE, WIRE], resolution=UNATTENDED))
    pending = await _pending(handle)  # parked: step 1 reserved, step 2 charged
    assert [c["refunded"] for c in saga.shop.charges()] == [False]
    assert len(entries_of(saga.store, handle.id, "EXECUTED")) == 2

    assert _delete_entry(tmp_path / "journal.db", handle.id, 2, "EXECUTED") == 1
    assert [e.step for e in entries_of(saga.store, handle.id, "EXECUTED")] == [1]

    result = await _rejected(handle, pending)

    assert result.status is SagaStatus.UNRESOLVED
    assert result.needs_human is True
    assert [(c.step, c.ok) for c in result.compensations] == [(2, False), (1, True)]
    [failed] = entries_of(saga.store, handle.id, "COMPENSATION_FAILED")
    assert (failed.step, failed.tool, failed.input) == (2, "charge_card", None)
    assert "no EXECUTED entry" in (failed.error or "") and "human" in (failed.error or "")
    assert handle.id in (failed.error or "")
    # The workflow held the charge's args and result; nothing was refunded from them.
    assert saga.shop.calls("refund_card") == []
    assert [c["refunded"] for c in saga.shop.charges()] == [False]
    assert saga.shop.stock("widget") == 10  # step 1's EXECUTED entry was intact: undone
    closed = entries_of(saga.store, handle.id, "SAGA_CLOSED")[0].result
    assert isinstance(closed, dict) and closed["needs_human"] is True


async def test_the_failure_type_names_the_missing_entry(saga, tmp_path) -> None:
    """The error the workflow journals is the activity's own: typed, non-retryable, so
    the compensation's attempts are not spent on a fact no retry can change."""
    handle = await saga.start(
        SagaInput(plan=[RESERVE, CHARGE, WIRE], compensation_attempts=5, resolution=UNATTENDED)
    )
    pending = await _pending(handle)
    assert _delete_entry(tmp_path / "journal.db", handle.id, 1, "EXECUTED") == 1

    result = await _rejected(handle, pending)

    assert [(c.step, c.ok) for c in result.compensations] == [(2, True), (1, False)]
    assert saga.shop.calls("release_inventory") == []
    assert saga.shop.stock("widget") == 8  # the reservation stays: a human decides
    history = [e async for e in handle.fetch_history_events()]
    failures = [
        e.activity_task_failed_event_attributes.failure
        for e in history
        if e.HasField("activity_task_failed_event_attributes")
    ]
    [failure] = failures
    info = failure.cause.application_failure_info if failure.HasField("cause") else None
    info = info or failure.application_failure_info
    assert info.type == NOT_EXECUTED_IN_JOURNAL and info.non_retryable


async def test_compensation_failed_journals_the_executed_input_after_continue_as_new(
    saga,
) -> None:
    inp = refund_refused(saga.shop, continue_as_new_after_steps=1, resolution=UNATTENDED)
    result = await saga.run(inp)

    assert result.status is SagaStatus.UNRESOLVED
    [failed] = entries_of(saga.store, result.saga_id, "COMPENSATION_FAILED")
    [executed] = [e for e in entries_of(saga.store, result.saga_id, "EXECUTED") if e.step == 2]
    assert failed.step == 2 and failed.input == executed.input
    assert isinstance(failed.input, dict) and failed.input["amount"] == CHARGE.args["amount"]
    assert len(saga.shop.calls("refund_card")) == 2


async def test_the_workflow_compensates_exactly_the_journals_plan(saga) -> None:
    inp = SagaInput(plan=[RESERVE, CHARGE, SHIP, SHIP_FAILS], continue_as_new_after_steps=2)
    result = await saga.run(inp)

    assert result.status is SagaStatus.COMPENSATED
    entries = list(saga.store.entries(result.saga_id))
    first_undo = next(i for i, e in enumerate(entries) if e.phase is Phase.COMPENSATED)
    plan = plan_compensation(entries[:first_undo], compensable_in(Toolbox.build(saga.shop)))
    assert [c.step for c in result.compensations] == [s.step for s in plan.to_compensate]
    assert [s.step for s in plan.to_compensate] == [2, 1]
    assert [s.step for s in plan.not_compensable] == [3]  # ship_order is plain: stays live
    assert plan_compensation(entries, compensable_in(Toolbox.build(saga.shop))).to_compensate == []
    assert saga.shop.stock("widget") == 10 and len(saga.shop.shipments()) == 1


class Hanging:
    """A compensable hold whose release never returns (a provider that hangs), and a plain
    step that fails the saga."""

    def __init__(self) -> None:
        self.releases = 0

    @compensable("release")
    def hold(self, amount: int) -> dict[str, int]:
        return {"held": amount}

    @compensation
    async def release(self, ctx: CompensationContext) -> None:
        self.releases += 1
        await asyncio.Event().wait()  # cancelled when its attempt times out

    @tool
    def explode(self) -> None:
        raise RuntimeError("boom")


async def test_a_compensation_that_timed_out_still_journals_the_executed_input(
    temporal_env, journal
) -> None:
    """No failure of the activity carries the input here: it comes from the timeout's
    last heartbeat details, sent as soon as the EXECUTED entry was read."""
    shop = Hanging()
    queue = f"tq-{uuid.uuid4().hex[:8]}"
    worker = new_worker(
        temporal_env.client, store=journal, toolbox=Toolbox.build(shop), task_queue=queue
    )
    inp = SagaInput(
        plan=[ToolCall(tool="hold", args={"amount": 42}), ToolCall(tool="explode")],
        tool_timeout_seconds=3,
        compensation_attempts=1,
        resolution=UNATTENDED,
    )
    async with worker:
        handle = await temporal_env.client.start_workflow(
            "AgentSaga", inp, id=f"saga-{uuid.uuid4().hex[:12]}", task_queue=queue,
            result_type=SagaResult,
        )  # fmt: skip
        result = await saga_result(handle)

    assert result.status is SagaStatus.UNRESOLVED and shop.releases == 1
    [failed] = entries_of(journal, result.saga_id, "COMPENSATION_FAILED")
    [executed] = [e for e in entries_of(journal, result.saga_id, "EXECUTED") if e.step == 1]
    assert failed.input == executed.input == {"amount": 42}
    assert failed.error == "activity StartToClose timeout"  # the attempt timed out
