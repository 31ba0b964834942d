"""Approval attacks, end to end, against a real worker and dev server.

Every attack must be refused (fail closed), journaled as APPROVAL_REFUSED with its reason
(refusals are evidence), leave the request pending, never fail a workflow task (a failed
task retries forever: one bad signal would wedge the saga), and leave the worker healthy:
each test ends by running a fresh saga on the same worker.

Decisions are sent the ways an attacker can: as the `approve`/`reject` signals (which
cannot answer, so the workflow journals the refusal) and as the `decide` update (whose
validator refuses synchronously; `worker.client.decide` then re-sends it as a signal so
it is journaled too).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload, Payloads, WorkflowExecution
from temporalio.api.workflowservice.v1 import SignalWorkflowExecutionRequest
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError

from sagacity.approval._judge import approval_hash
from sagacity.journal._phases import Phase, SagaStatus
from sagacity.worker.client._actions import decide
from sagacity.worker.client._client import ApprovalRefusedError, saga_result
from sagacity.workflows._models import DecisionResult, PendingApproval, SagaInput, SagaResult
from tests.support.workers import (
    CHARGE,
    RESERVE,
    WIRE,
    WIRE_2,
    WIRE_ARGS,
    assert_chain_closed,
    entries_of,
    eventually,
    failed_workflow_tasks,
)

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(60)]

Handle = WorkflowHandle[Any, SagaResult]


async def pending(handle: Handle, step: int | None = None) -> PendingApproval:
    async def probe() -> PendingApproval | None:
        p: PendingApproval | None = await handle.query(
            "pending_approval",
            result_type=PendingApproval | None,  # type: ignore[arg-type]
        )
        return p if p is not None and (step is None or p.step == step) else None

    return await eventually(probe, 20, f"pending approval (step {step})")


def body(p: PendingApproval, **overrides: Any) -> dict[str, Any]:
    decision: dict[str, Any] = {
        "saga_id": p.saga_id,
        "step": p.step,
        "payload_sha256": p.payload_sha256,
        "approver": "alice",
    }
    decision.update(overrides)
    return {k: v for k, v in decision.items() if v is not _DROP}


_DROP = object()


async def refusals(saga: Any, handle: Handle, count: int, timeout: float = 20) -> list[Any]:
    """Wait until `count` refusals are journaled, and return them."""
    return await eventually(
        lambda: (r if len(r := entries_of(saga.store, handle.id, Phase.APPROVAL_REFUSED)) >= count
                 else None),
        timeout,
        f"{count} APPROVAL_REFUSED entries",
    )  # fmt: skip


async def refused_by_update(handle: Handle, decision: Any) -> str:
    """Send `decision` as the validated update; return the refusal text."""
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await handle.execute_update("decide", decision, result_type=DecisionResult)
    return str(refused.value.cause)


def reasons(entries: list[Any]) -> list[str]:
    return [(e.error or "").split(":")[0] for e in entries]


async def assert_unharmed(saga: Any, *handles: Handle) -> None:
    """No workflow task of the attacked sagas failed, their chains verify, and the same
    worker still runs a fresh saga to completion."""
    for handle in handles:
        assert await failed_workflow_tasks(handle) == [], handle.id
    fresh = await asyncio.wait_for(saga.run(SagaInput(plan=[RESERVE])), 20)
    assert fresh.status is SagaStatus.COMPLETED
    for handle in handles:
        if (await handle.describe()).close_time is not None:
            assert_chain_closed(saga.store, handle.id)


async def test_stale_hash_is_refused(saga: Any) -> None:
    """The hash of the payload as it was before someone changed the amount."""
    handle = await saga.start(SagaInput(plan=[RESERVE, WIRE]))
    p = await pending(handle)
    stale = approval_hash("send_wire_transfer", {**WIRE_ARGS, "amount": 50})

    assert "HASH_MISMATCH" in await refused_by_update(handle, {**body(p, payload_sha256=stale),
                                                              "approve": True})  # fmt: skip
    with pytest.raises(ApprovalRefusedError) as by_client:
        await decide(handle, step=p.step, payload_sha256=stale, approver="alice", approve=True)
    assert by_client.value.reason == "HASH_MISMATCH" and by_client.value.journaled
    await handle.signal("approve", body(p, payload_sha256=stale))
    # A rejection must carry the right hash too: nobody cancels a step they did not see.
    await handle.signal("reject", body(p, payload_sha256=stale))

    # Four doors, four pieces of evidence: the raw update is journaled by the saga itself.
    refused = await refusals(saga, handle, 4)
    assert reasons(refused) == ["HASH_MISMATCH"] * 4
    assert p.payload_sha256 not in " ".join(e.error or "" for e in refused)  # never echoed
    assert (await pending(handle)).payload_sha256 == p.payload_sha256
    assert saga.shop.wires() == []

    await handle.signal("approve", body(p))
    assert (await saga_result(handle)).status is SagaStatus.COMPLETED
    assert len(saga.shop.wires()) == 1
    await assert_unharmed(saga, handle)


async def test_old_approval_replayed_on_a_reproposed_identical_step(saga: Any) -> None:
    """Step 1 and step 3 propose the very same wire (same payload, same hash). The
    approval of step 1, replayed when step 3 is pending, names step 1: refused."""
    handle = await saga.start(SagaInput(plan=[WIRE, RESERVE, WIRE]))
    first = await pending(handle, 1)
    old = body(first)
    await handle.signal("approve", old)
    second = await pending(handle, 3)
    assert second.payload_sha256 == first.payload_sha256  # identical action, identical hash

    assert "ALREADY_DECIDED" in await refused_by_update(handle, {**old, "approve": True})
    await handle.signal("approve", old)
    # The same bytes with only the step number edited is a new decision someone must
    # make for step 3; the replay itself does not count.
    # Both doors leave evidence. A decision about a step that is not pending goes to the
    # shared bucket (journal step 0); the step it claimed is kept in the entry's input.
    refused = await refusals(saga, handle, 2)
    assert reasons(refused) == ["ALREADY_DECIDED"] * 2
    assert [(e.step, e.input["step"]) for e in refused] == [(0, 1), (0, 1)]
    assert [w["key"] for w in saga.shop.wires()] == [f"{handle.id}:1"]  # step 3 not sent
    assert (await pending(handle)).step == 3

    await handle.signal("approve", body(second, approver="bob"))
    result = await saga_result(handle)
    assert result.status is SagaStatus.COMPLETED
    approved = entries_of(saga.store, handle.id, Phase.APPROVED)
    assert [(e.step, e.actor) for e in approved] == [(1, "alice"), (3, "bob")]
    assert sorted(w["key"] for w in saga.shop.wires()) == [f"{handle.id}:1", f"{handle.id}:3"]
    await assert_unharmed(saga, handle)


async def test_approval_meant_for_another_saga_is_refused(saga: Any) -> None:
    """Two sagas wait for the same wire at the same step. A decision naming saga B, sent
    to saga A, is refused by A; B's own request is untouched."""
    a = await saga.start(SagaInput(plan=[RESERVE, WIRE]))
    b = await saga.start(SagaInput(plan=[RESERVE, WIRE]))
    pa, pb = await pending(a), await pending(b)
    assert (pa.step, pa.payload_sha256) == (pb.step, pb.payload_sha256)

    for_b = body(pb)
    assert "WRONG_SAGA" in await refused_by_update(a, {**for_b, "approve": True})
    await a.signal("approve", for_b)
    await a.signal("reject", for_b)
    refused = await refusals(saga, a, 3)  # the raw update is journaled too
    assert reasons(refused) == ["WRONG_SAGA"] * 3
    assert entries_of(saga.store, b.id, Phase.APPROVAL_REFUSED) == []
    assert (await pending(a)).step == pa.step and saga.shop.wires() == []

    await a.signal("reject", {**body(pa), "reason": "not ours"})
    await b.signal("approve", for_b)
    ra, rb = await saga_result(a), await saga_result(b)
    assert (ra.status, rb.status) == (SagaStatus.COMPENSATED, SagaStatus.COMPLETED)
    assert [w["key"] for w in saga.shop.wires()] == [f"{b.id}:2"]
    await assert_unharmed(saga, a, b)


async def test_approver_outside_the_allow_list_is_refused(saga: Any) -> None:
    handle = await saga.start(SagaInput(plan=[RESERVE, WIRE], approvers=["alice"]))
    p = await pending(handle)
    attempts = {
        "mallory": "APPROVER_NOT_ALLOWED",
        "Alice": "APPROVER_NOT_ALLOWED",  # no case folding
        "alice ": "APPROVER_NOT_ALLOWED",  # no trimming
        "alice\u200b": "APPROVER_NOT_ALLOWED",  # zero-width space
        "\uff41\uff4c\uff49\uff43\uff45": "APPROVER_NOT_ALLOWED",  # fullwidth look-alike
        "": "EMPTY_APPROVER",
        "   ": "EMPTY_APPROVER",
        "alice\n": "MALFORMED",  # control characters are never an identity
    }
    for sent, (approver, reason) in enumerate(attempts.items(), start=1):
        assert reason in await refused_by_update(handle, {**body(p, approver=approver),
                                                          "approve": True})  # fmt: skip
        await handle.signal("approve", body(p, approver=approver))
        # A signal's refusal is journaled by an activity the next update can overtake.
        await refusals(saga, handle, 2 * sent)
    refused = await refusals(saga, handle, 2 * len(attempts))  # update, then signal
    assert reasons(refused) == [reason for reason in attempts.values() for _ in range(2)]
    assert saga.shop.wires() == [] and (await pending(handle)).step == p.step

    accepted = await decide(
        handle, step=p.step, payload_sha256=p.payload_sha256, approver="alice", approve=True
    )
    assert accepted.accepted
    assert (await saga_result(handle)).status is SagaStatus.COMPLETED
    assert [e.actor for e in entries_of(saga.store, handle.id, Phase.APPROVED)] == ["alice"]
    await assert_unharmed(saga, handle)


async def test_double_approve_runs_the_step_once(saga: Any) -> None:
    """The same approval sent twice (by signal and by update) while the saga is still
    open: the second changes nothing and is journaled as ALREADY_DECIDED."""
    handle = await saga.start(SagaInput(plan=[WIRE, WIRE_2]))
    p = await pending(handle, 1)
    await handle.signal("approve", body(p))
    await handle.signal("approve", body(p))  # may arrive in the same workflow task
    await pending(handle, 2)
    assert "ALREADY_DECIDED" in await refused_by_update(handle, {**body(p), "approve": True})
    with pytest.raises(ApprovalRefusedError):
        await decide(handle, step=1, payload_sha256=p.payload_sha256, approver="bob",
                     approve=True)  # fmt: skip

    refused = await refusals(saga, handle, 3)  # second signal, raw update, client
    assert reasons(refused) == ["ALREADY_DECIDED"] * 3
    assert len(entries_of(saga.store, handle.id, Phase.APPROVED)) == 1
    assert len(saga.shop.calls("send_wire_transfer")) == 1

    p2 = await pending(handle, 2)
    await handle.signal("reject", {**body(p2), "reason": "one is enough"})
    result = await saga_result(handle)
    assert result.status is SagaStatus.COMPENSATED
    assert [w["amount"] for w in saga.shop.wires()] == [5000]
    await assert_unharmed(saga, handle)


async def test_approve_after_reject_changes_nothing(saga: Any) -> None:
    """Rejected, and approved a moment later while the compensation still runs (a slow
    refund keeps the saga open): refused, journaled, the wire never sent."""
    saga.shop.set_fault("refund_delay", "2")
    handle = await saga.start(SagaInput(plan=[CHARGE, WIRE]))
    p = await pending(handle)
    await handle.signal("reject", {**body(p, approver="carol"), "reason": "wrong IBAN"})
    await eventually(lambda: entries_of(saga.store, handle.id, Phase.REJECTED), 10, "REJECTED")

    assert "ALREADY_DECIDED" in await refused_by_update(handle, {**body(p), "approve": True})
    await handle.signal("approve", body(p))
    refused = await refusals(saga, handle, 1)
    assert reasons(refused) == ["ALREADY_DECIDED"]
    result = await saga_result(handle)
    saga.shop.set_fault("refund_delay", "0")

    assert result.status is SagaStatus.COMPENSATED
    assert entries_of(saga.store, handle.id, Phase.APPROVED) == []
    assert saga.shop.wires() == [] and saga.shop.calls("send_wire_transfer") == []
    assert [c["refunded"] for c in saga.shop.charges()] == [True]
    await assert_unharmed(saga, handle)


async def test_reject_after_approve_changes_nothing(saga: Any) -> None:
    handle = await saga.start(SagaInput(plan=[WIRE, WIRE_2]))
    p = await pending(handle, 1)
    await handle.signal("approve", body(p))
    await pending(handle, 2)  # step 1 ran; the saga waits on step 2
    await handle.signal("reject", {**body(p, approver="mallory"), "reason": "too late"})
    assert "ALREADY_DECIDED" in await refused_by_update(handle, {**body(p), "approve": False})

    refused = await refusals(saga, handle, 2)
    assert reasons(refused) == ["ALREADY_DECIDED"] * 2
    assert refused[0].actor is None and refused[0].input["approver"] == "mallory"  # unproven
    assert entries_of(saga.store, handle.id, Phase.REJECTED) == []
    p2 = await pending(handle, 2)
    await handle.signal("approve", body(p2))
    assert (await saga_result(handle)).status is SagaStatus.COMPLETED
    assert len(saga.shop.wires()) == 2
    await assert_unharmed(saga, handle)


HUGE = "x" * 1_500_000  # under Temporal's 2 MB payload limit, so it reaches the workflow

MALFORMED: list[tuple[str, Any, str]] = [
    ("not an object", "approve!", "MALFORMED"),
    ("null body", None, "MALFORMED"),
    ("a list", [1, "ab" * 32, "alice"], "MALFORMED"),
    ("a number", 42, "MALFORMED"),
    ("no step", {"step": _DROP}, "MALFORMED"),
    ("wrong hash, no step", {"step": _DROP, "payload_sha256": "ab" * 32}, "MALFORMED"),
    ("step as text", {"step": "2"}, "MALFORMED"),
    ("step as bool", {"step": True}, "MALFORMED"),
    ("step as float", {"step": 2.0}, "MALFORMED"),
    ("step zero", {"step": 0}, "MALFORMED"),
    ("step negative", {"step": -2}, "MALFORMED"),
    ("step beyond 2**53", {"step": 2**64}, "WRONG_STEP"),
    ("hash as number", {"payload_sha256": 42}, "MALFORMED"),
    ("hash uppercase", {"payload_sha256": "AB" * 32}, "MALFORMED"),
    ("hash too long", {"payload_sha256": "ab" * 33}, "MALFORMED"),
    ("no hash", {"payload_sha256": _DROP}, "MISSING_HASH"),
    ("no approver", {"approver": _DROP}, "EMPTY_APPROVER"),
    ("approver as list", {"approver": ["alice"]}, "MALFORMED"),
    ("approver with NUL", {"approver": "alice\x00admin"}, "MALFORMED"),
    ("approve as text", {"approve": "yes"}, "MALFORMED"),
    ("approve contradicts signal", {"approve": False}, "MALFORMED"),
    ("unknown field", {"admin": True}, "MALFORMED"),
    ("saga id as number", {"saga_id": 7}, "MALFORMED"),
    ("huge approver", {"approver": HUGE}, "MALFORMED"),
    ("huge reason", {"reason": HUGE}, "MALFORMED"),
    ("huge hash", {"payload_sha256": HUGE}, "MALFORMED"),
    ("huge unknown field", {"note": HUGE}, "MALFORMED"),
    ("huge approve", {"approve": HUGE}, "MALFORMED"),
]


async def test_malformed_decisions_are_refused_and_journaled(saga: Any) -> None:
    handle = await saga.start(SagaInput(plan=[RESERVE, WIRE]))
    p = await pending(handle)
    sent = []
    for _, change, reason in MALFORMED:
        decision = body(p, **change) if isinstance(change, dict) else change
        await handle.signal("approve", decision)
        sent.append(reason)
    await handle.signal("approve")  # no body at all
    sent.append("MALFORMED")
    # NaN is not JSON, but Temporal's converter decodes it: it must not get further.
    nan = f'{{"step": NaN, "payload_sha256": "{p.payload_sha256}", "approver": "alice"}}'
    await _raw_signal(saga, handle, [_json_payload(nan.encode())])
    sent.append("MALFORMED")

    refused = await refusals(saga, handle, len(sent))
    assert sorted(reasons(refused)) == sorted(sent), list(zip(reasons(refused), sent, strict=False))
    huge = [e for e in refused if isinstance(e.input, dict) and "prefix" in e.input]
    assert len(huge) == 5
    assert all(e.input["bytes"] > 1_500_000 and len(e.input["prefix"]) <= 4_096 for e in huge)
    assert all(len(e.input_json) < 10_000 for e in refused)  # evidence bounded, not copied
    assert all(len(e.error or "") <= 2_200 for e in refused)  # and the sentence too

    for _, change, reason in MALFORMED[:12]:  # the update refuses the same things
        decision = body(p, **change) if isinstance(change, dict) else change
        if isinstance(decision, dict) and "approve" not in decision:
            decision = {**decision, "approve": True}
        assert reason in await refused_by_update(handle, decision)

    assert (await pending(handle)).payload_sha256 == p.payload_sha256
    assert saga.shop.wires() == []
    await handle.signal("approve", body(p))
    assert (await saga_result(handle)).status is SagaStatus.COMPLETED
    await assert_unharmed(saga, handle)


async def test_decision_over_the_payload_limit_never_reaches_the_saga(saga: Any) -> None:
    """3 MB: Temporal refuses the signal itself (its 2 MB blob limit); the sender gets an
    error and the saga sees nothing."""
    handle = await saga.start(SagaInput(plan=[RESERVE, WIRE]))
    p = await pending(handle)
    with pytest.raises(RPCError, match=r"(?i)size"):
        await handle.signal("approve", body(p, reason="x" * 3_000_000))
    await barrier(saga, handle)  # every earlier signal has been handled
    assert [e.input for e in entries_of(saga.store, handle.id, Phase.APPROVAL_REFUSED)] == [BARRIER]
    await handle.signal("approve", body(p))
    assert (await saga_result(handle)).status is SagaStatus.COMPLETED
    await assert_unharmed(saga, handle)


async def _raw_signal(saga: Any, handle: Handle, payloads: list[Payload]) -> None:
    """A signal as any gRPC client can send it, bypassing the SDK's converter."""
    await saga.client.workflow_service.signal_workflow_execution(
        SignalWorkflowExecutionRequest(
            namespace=saga.client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=handle.id),
            signal_name="approve",
            input=Payloads(payloads=payloads),
            identity="attacker",
            request_id=str(uuid.uuid4()),
        )
    )


BARRIER = "barrier: every signal sent before this one has been handled"


async def barrier(saga: Any, handle: Handle) -> None:
    """Signals are handled in the order they were sent: once this malformed decision is
    journaled, every earlier signal has been handled (an event, not a sleep)."""
    await handle.signal("approve", BARRIER)

    async def seen() -> bool:
        return any(
            e.input == BARRIER for e in entries_of(saga.store, handle.id, Phase.APPROVAL_REFUSED)
        )

    await eventually(seen, 20, "the barrier's refusal")


def _json_payload(data: bytes) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=data)


async def test_undecodable_decisions_do_not_break_the_saga(saga: Any) -> None:
    """Bytes that are not JSON, an unknown encoding, JSON nested too deep to decode:
    the saga shrugs them off and still takes the real approval."""
    handle = await saga.start(SagaInput(plan=[RESERVE, WIRE]))
    p = await pending(handle)
    await _raw_signal(saga, handle, [_json_payload(b"{not json")])
    await _raw_signal(saga, handle, [Payload(metadata={"encoding": b"binary/x"}, data=b"\0")])
    await _raw_signal(saga, handle, [_json_payload(b"[" * 100_000 + b"]" * 100_000)])
    await _raw_signal(saga, handle, [_json_payload(b'{"step": 2, "approver": "\\ud800"}')])
    await barrier(saga, handle)
    assert await failed_workflow_tasks(handle) == []
    assert (await pending(handle)).payload_sha256 == p.payload_sha256

    await handle.signal("approve", body(p))
    assert (await saga_result(handle)).status is SagaStatus.COMPLETED
    assert len(saga.shop.wires()) == 1
    await assert_unharmed(saga, handle)


async def test_undecodable_decisions_are_journaled(saga: Any) -> None:
    handle = await saga.start(SagaInput(plan=[RESERVE, WIRE]))
    await pending(handle)
    await _raw_signal(saga, handle, [_json_payload(b"{not json")])
    await _raw_signal(saga, handle, [Payload(metadata={"encoding": b"binary/x"}, data=b"\0")])
    refused = await refusals(saga, handle, 2, timeout=5)
    assert reasons(refused) == ["MALFORMED", "MALFORMED"]


async def test_decision_with_extra_arguments_is_refused_not_fatal(saga: Any) -> None:
    """Anyone who may signal the saga sends `approve` with two arguments."""
    handle = await saga.start(SagaInput(plan=[RESERVE, WIRE]))
    p = await pending(handle)
    try:
        await handle.signal("approve", args=[body(p), {"also": "this"}])
        await barrier(saga, handle)
        assert await failed_workflow_tasks(handle) == []
        refused = await refusals(saga, handle, 2, timeout=5)
        assert reasons(refused) == ["MALFORMED", "MALFORMED"]  # the two-argument one, the barrier
        await handle.signal("approve", body(p))
        assert (await asyncio.wait_for(saga_result(handle), 15)).status is SagaStatus.COMPLETED
    finally:
        if (await handle.describe()).close_time is None:
            await handle.terminate("wedged by the attack under test")
    await assert_unharmed(saga)
