"""Approvals bound to the exact payload, by signal and by update."""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError

from sagacity.approval._judge import approval_hash
from sagacity.journal._chain import verify_chain
from sagacity.journal._phases import SagaStatus
from sagacity.worker.client._client import saga_result
from sagacity.workflows._models import DecisionResult, PendingApproval, SagaInput, SagaResult
from tests.support.workflows import CHARGE, RESERVE, WIRE, entries_of, eventually

WIRE_ARGS = {"iban": "DE89370400440532013000", "amount": 5000, "currency": "EUR"}


async def pending(
    handle: WorkflowHandle[object, SagaResult], timeout: float = 20.0
) -> PendingApproval:
    async def probe() -> PendingApproval | None:
        return await handle.query("pending_approval", result_type=PendingApproval | None)  # type: ignore[arg-type]

    return await eventually(probe, timeout)


def decision(p: PendingApproval, **overrides: object) -> dict[str, object]:
    body: dict[str, object] = {
        "saga_id": p.saga_id,
        "step": p.step,
        "payload_sha256": p.payload_sha256,
        "approver": "alice",
    }
    body.update(overrides)
    return body


async def test_approval_runs_exactly_the_approved_payload(saga) -> None:
    handle = await saga.start(SagaInput(plan=[RESERVE, CHARGE, WIRE]))
    p = await pending(handle)

    assert saga.shop.calls("send_wire_transfer") == []  # not called while awaiting approval
    assert p.tool == "send_wire_transfer" and p.step == 3
    assert p.payload == WIRE_ARGS
    assert p.payload_sha256 == approval_hash("send_wire_transfer", WIRE_ARGS)
    view = await handle.query("status")
    assert view["status"] == "AWAITING_APPROVAL"

    await handle.signal("approve", decision(p))
    result = await saga_result(handle)

    assert result.status is SagaStatus.COMPLETED
    approved = entries_of(saga.store, result.saga_id, "APPROVED")
    assert [(e.step, e.actor, e.result["payload_sha256"]) for e in approved] == [
        (3, "alice", p.payload_sha256)
    ]
    assert [w["iban"] for w in saga.shop.wires()] == [WIRE_ARGS["iban"]]
    executed = [e for e in entries_of(saga.store, result.saga_id, "EXECUTED") if e.step == 3]
    assert executed[0].input == WIRE_ARGS
    assert verify_chain(result.saga_id, saga.store.entries(result.saga_id)).ok


async def test_stale_hash_is_refused_journaled_and_the_request_stays_pending(saga) -> None:
    handle = await saga.start(SagaInput(plan=[RESERVE, WIRE]))
    p = await pending(handle)
    stale = approval_hash("send_wire_transfer", {**WIRE_ARGS, "amount": 50})

    await handle.signal("approve", decision(p, payload_sha256=stale))
    refused = await eventually(
        lambda: _async(entries_of(saga.store, handle.id, "APPROVAL_REFUSED"))
    )
    assert "HASH_MISMATCH" in (refused[0].error or "")
    assert (await pending(handle)).payload_sha256 == p.payload_sha256  # still pending
    assert saga.shop.wires() == []

    await handle.signal("approve", decision(p))
    result = await saga_result(handle)
    assert result.status is SagaStatus.COMPLETED
    assert len(saga.shop.wires()) == 1


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"payload_sha256": ""}, "MISSING_HASH"),
        ({"approver": ""}, "EMPTY_APPROVER"),
        ({"step": 7}, "WRONG_STEP"),
        ({"approver": "mallory"}, "APPROVER_NOT_ALLOWED"),
    ],
)
async def test_update_refuses_at_once_with_the_reason(saga, overrides, reason) -> None:
    handle = await saga.start(SagaInput(plan=[RESERVE, WIRE], approvers=["alice", "bob"]))
    p = await pending(handle)

    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await handle.execute_update("decide", {**decision(p, **overrides), "approve": True})
    assert reason in str(refused.value.cause)

    # the same decision by signal is refused and journaled as evidence
    await handle.signal("approve", decision(p, **overrides))
    journaled = await eventually(
        lambda: _async(entries_of(saga.store, handle.id, "APPROVAL_REFUSED"))
    )
    assert reason in (journaled[0].error or "")
    assert saga.shop.wires() == []

    accepted = await handle.execute_update(
        "decide", {**decision(p, approver="bob"), "approve": True}, result_type=DecisionResult
    )
    assert accepted.accepted and accepted.step == p.step
    result = await saga_result(handle)
    assert result.status is SagaStatus.COMPLETED
    approved = entries_of(saga.store, handle.id, "APPROVED")[0]
    assert (approved.seq, approved.hash, approved.actor) == (accepted.seq, accepted.hash, "bob")


async def test_reject_compensates_and_a_later_approve_changes_nothing(saga) -> None:
    handle = await saga.start(SagaInput(plan=[RESERVE, CHARGE, WIRE]))
    p = await pending(handle)

    await handle.signal("reject", {**decision(p, approver="carol"), "reason": "wrong IBAN"})
    await handle.signal("approve", decision(p))  # late: must change nothing
    result = await saga_result(handle)

    assert result.status is SagaStatus.COMPENSATED
    rejected = entries_of(saga.store, result.saga_id, "REJECTED")
    assert [(e.step, e.actor) for e in rejected] == [(3, "carol")]
    assert entries_of(saga.store, result.saga_id, "APPROVED") == []
    assert saga.shop.wires() == []
    assert saga.shop.stock("widget") == 10
    assert [c["refunded"] for c in saga.shop.charges()] == [True]
    assert [c.step for c in result.compensations] == [2, 1]
    late = entries_of(saga.store, result.saga_id, "APPROVAL_REFUSED")
    assert [e.error.split(":")[0] for e in late if e.error] == ["ALREADY_DECIDED"]


async def _async(value):  # lets `eventually` poll a synchronous read
    return value
