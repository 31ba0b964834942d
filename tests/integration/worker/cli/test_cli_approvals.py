"""`sagacity pending`, `approve` and `reject`, and worker.client.decide: a decision is bound
to the hash of the payload shown, and a refused one is journaled as evidence."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest

from sagacity.approval._judge import approval_hash
from sagacity.journal._entry import JournalEntry
from sagacity.journal._phases import SagaStatus
from sagacity.worker.client._actions import decide
from sagacity.worker.client._client import (
    ApprovalRefusedError,
    PendingHashMismatchError,
    check_pending,
    saga_handle,
    saga_result,
)
from sagacity.workflows._models import PendingApproval, SagaInput, ToolCall
from tests.support.cli import CliHarness

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(120)]

RESERVE = ToolCall(tool="reserve_inventory", args={"sku": "widget", "qty": 2})
CHARGE = ToolCall(tool="charge_card", args={"amount": 100, "currency": "EUR"})
WIRE = ToolCall(tool="send_wire_transfer", args={"iban": "DE89370400440532013000", "amount": 5000})
WIRE_ARGS = {"iban": "DE89370400440532013000", "amount": 5000, "currency": "EUR"}


def phases(cli: CliHarness, saga_id: str, phase: str) -> list[JournalEntry]:
    return [e for e in cli.store.entries(saga_id) if e.phase.value == phase]


async def journaled(cli: CliHarness, saga_id: str, phase: str) -> list[JournalEntry]:
    for _ in range(200):
        found = phases(cli, saga_id, phase)
        if found:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {phase} entry journaled for {saga_id}")


async def test_pending_lists_every_saga_awaiting_approval_with_payload_and_hash(
    cli: CliHarness,
) -> None:
    first = await cli.start(SagaInput(plan=[RESERVE, WIRE]))
    second = await cli.start(SagaInput(plan=[WIRE]))
    done = await cli.start(SagaInput(plan=[CHARGE]))
    await saga_result(done)
    expected = approval_hash("send_wire_transfer", WIRE_ARGS)
    for handle in (first, second):
        assert (await cli.pending(handle.id)).payload_sha256 == expected

    for _ in range(100):  # visibility catches up within a moment
        ran = await cli("pending", "--json")
        assert ran.code == 0, ran.output
        items = {i["saga_id"]: i for i in json.loads(ran.stdout)}
        if {first.id, second.id} <= items.keys():
            break
        await asyncio.sleep(0.2)
    assert done.id not in items
    got = items[first.id]["pending"]
    assert (got["step"], got["tool"], got["payload"]) == (2, "send_wire_transfer", WIRE_ARGS)
    assert got["payload_sha256"] == expected
    assert items[second.id]["pending"]["step"] == 1

    table = await cli("pending")
    assert table.code == 0
    assert first.id in table.stdout and expected in table.stdout
    assert "DE89370400440532013000" in table.stdout


async def test_approve_shows_the_payload_and_journals_the_approval(cli: CliHarness) -> None:
    handle = await cli.start(SagaInput(plan=[RESERVE, CHARGE, WIRE]))
    pending = await cli.pending(handle.id)

    ran = await cli("approve", handle.id, "--approver", "alice", "--yes")

    assert ran.code == 0, ran.output
    assert "DE89370400440532013000" in ran.stdout  # the payload was shown
    assert pending.payload_sha256 in ran.stdout
    result = await saga_result(handle)
    assert result.status is SagaStatus.COMPLETED
    [approved] = phases(cli, handle.id, "APPROVED")
    assert approved.actor == "alice"
    assert approved.result["payload_sha256"] == pending.payload_sha256
    assert f"journaled APPROVED at seq {approved.seq}, hash {approved.hash}" in ran.stdout
    assert [w["amount"] for w in cli.shop.wires()] == [5000]


async def test_approve_asks_for_confirmation_and_no_sends_nothing(cli: CliHarness) -> None:
    handle = await cli.start(SagaInput(plan=[WIRE]))
    await cli.pending(handle.id)

    declined = await cli("approve", handle.id, stdin="n\n", SAGACITY_APPROVER="bob")
    assert declined.code == 1
    assert "approve step 1 (send_wire_transfer)" in declined.stderr
    assert "not approved: nothing was sent" in declined.stderr
    no_answer = await cli("approve", handle.id, stdin="", SAGACITY_APPROVER="bob")
    assert no_answer.code == 1 and "nothing was sent" in no_answer.stderr
    assert (await cli.pending(handle.id)).step == 1  # still pending
    assert phases(cli, handle.id, "APPROVAL_REFUSED") == []
    assert cli.shop.wires() == []

    accepted = await cli("approve", handle.id, stdin="y\n", SAGACITY_APPROVER="bob")
    assert accepted.code == 0, accepted.output
    assert (await saga_result(handle)).status is SagaStatus.COMPLETED
    assert [e.actor for e in phases(cli, handle.id, "APPROVED")] == ["bob"]


async def test_a_wrong_hash_is_refused_journaled_and_leaves_the_request_pending(
    cli: CliHarness,
) -> None:
    handle = await cli.start(SagaInput(plan=[RESERVE, WIRE]))
    pending = await cli.pending(handle.id)
    stale = approval_hash("send_wire_transfer", {**WIRE_ARGS, "amount": 50})

    ran = await cli("approve", handle.id, "--approver", "alice", "--yes", "--hash", stale)

    assert ran.code == 1
    assert "the hash you gave" in ran.stderr  # warned before sending
    error = [line for line in ran.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1
    assert "HASH_MISMATCH" in error[0] and "journaled as evidence" in error[0]
    [refused] = await journaled(cli, handle.id, "APPROVAL_REFUSED")
    assert "HASH_MISMATCH" in (refused.error or "")
    # The name a refused decision claims is evidence in its input, not a proven actor.
    assert refused.actor is None and refused.input["approver"] == "alice"
    assert (await cli.pending(handle.id)).payload_sha256 == pending.payload_sha256
    assert phases(cli, handle.id, "APPROVED") == []
    assert cli.shop.wires() == []


async def test_a_malformed_hash_is_a_cli_mistake_and_sends_nothing(cli: CliHarness) -> None:
    handle = await cli.start(SagaInput(plan=[RESERVE, WIRE]))
    pending = await cli.pending(handle.id)

    ran = await cli("approve", handle.id, "--approver", "alice", "--yes", "--hash", "abc123")

    assert ran.code == 2
    said = " ".join(ran.stderr.replace("│", " ").split())  # rich wraps the message in a box
    assert "Invalid value for '--hash'" in said and "give the 64 hex digits" in said
    assert "Traceback" not in ran.stderr and "HASH_MISMATCH" not in ran.stderr
    assert phases(cli, handle.id, "APPROVAL_REFUSED") == []
    assert (await cli.pending(handle.id)).payload_sha256 == pending.payload_sha256


async def test_an_approver_not_on_the_list_is_refused(cli: CliHarness) -> None:
    handle = await cli.start(SagaInput(plan=[WIRE], approvers=["alice"]))
    await cli.pending(handle.id)
    ran = await cli("approve", handle.id, "--approver", "mallory", "-y")
    assert ran.code == 1
    assert "APPROVER_NOT_ALLOWED" in ran.stderr
    await journaled(cli, handle.id, "APPROVAL_REFUSED")


async def test_approving_a_saga_with_nothing_pending(cli: CliHarness) -> None:
    running = await cli.start(SagaInput(plan=[RESERVE, WIRE]))
    await cli.pending(running.id)
    done = await cli.start(SagaInput(plan=[CHARGE]))
    await saga_result(done)

    finished = await cli("approve", done.id, "--approver", "alice", "--yes")
    assert finished.code == 1
    assert finished.stderr.strip().splitlines() == [
        f"error: saga '{done.id}' has finished (COMPLETED); nothing to approve"
    ]

    await running.signal("reject", {"step": 2, "payload_sha256": "", "approver": "x"})
    await journaled(cli, running.id, "APPROVAL_REFUSED")  # refused: still pending
    unknown = await cli("approve", "no-such-saga", "--approver", "alice", "--yes")
    assert unknown.code == 1 and "no saga 'no-such-saga'" in unknown.stderr


async def test_approve_needs_an_approver(cli: CliHarness) -> None:
    ran = await cli("approve", "whatever", "--yes")
    assert ran.code == 1
    assert "approve needs --key KEY_FILE (signed) or --approver NAME" in ran.stderr


async def test_reject_journals_the_reason_and_the_saga_compensates(cli: CliHarness) -> None:
    handle = await cli.start(SagaInput(plan=[RESERVE, CHARGE, WIRE]))
    await cli.pending(handle.id)

    no_reason = await cli("reject", handle.id, "--approver", "carol", "--yes")
    assert no_reason.code == 2 and "--reason" in no_reason.stderr

    ran = await cli("reject", handle.id, "--reason", "wrong IBAN", "--approver", "carol", "--yes")
    assert ran.code == 0, ran.output
    result = await saga_result(handle)
    assert result.status is SagaStatus.COMPENSATED
    [rejected] = phases(cli, handle.id, "REJECTED")
    assert rejected.actor == "carol"
    assert rejected.result["reason"] == "wrong IBAN"
    assert f"journaled REJECTED at seq {rejected.seq}" in ran.stdout
    assert cli.shop.stock("widget") == 10 and cli.shop.wires() == []

    table = await cli("journal", handle.id)  # the old table showed the row with no detail
    assert table.code == 0, table.output
    [row] = [line for line in table.stdout.splitlines() if "REJECTED" in line]
    assert "reason: wrong IBAN" in row and "carol" in row


async def test_approve_warns_about_a_confusable_payload_before_asking(cli: CliHarness) -> None:
    # The IBAN's "DE" is written with a Cyrillic IE and carries a zero-width space: on a
    # terminal it prints exactly like the real one.
    forged = "D\u0415" + "89370400440532013000\u200b"
    handle = await cli.start(
        SagaInput(plan=[ToolCall(tool="send_wire_transfer", args={"iban": forged, "amount": 50})])
    )
    await cli.pending(handle.id)

    declined = await cli("approve", handle.id, stdin="n\n", SAGACITY_APPROVER="bob")

    assert declined.code == 1, declined.output
    stderr = declined.stderr
    question = stderr.index("approve step 1 (send_wire_transfer)")
    mixed = stderr.index(
        "warning: field iban: U+0415 CYRILLIC CAPITAL LETTER IE mixes Cyrillic + Latin in one "
        'word "D\\u0415'
    )
    invisible = stderr.index("warning: field iban: U+200B ZERO WIDTH SPACE is invisible")
    assert mixed < question and invisible < question  # warned before asking
    assert "may not be what they look like" in stderr
    assert cli.shop.wires() == []

    listed = await cli("pending")
    assert listed.code == 0, listed.output
    assert "U+0415 CYRILLIC CAPITAL LETTER IE" in listed.stdout

    plain = await cli.start(SagaInput(plan=[WIRE]))
    await cli.pending(plain.id)
    quiet = await cli("approve", plain.id, stdin="n\n", SAGACITY_APPROVER="bob")
    assert quiet.code == 1 and "warning:" not in quiet.stderr  # nothing to warn about


async def test_client_decide_resends_a_refused_decision_as_evidence(cli: CliHarness) -> None:
    handle = await cli.start(SagaInput(plan=[WIRE]))
    pending = await cli.pending(handle.id)
    saga = saga_handle(cli.client, handle.id)

    with pytest.raises(ApprovalRefusedError) as refused:
        await decide(
            saga, step=7, payload_sha256=pending.payload_sha256, approver="a", approve=True
        )
    assert refused.value.reason == "WRONG_STEP" and refused.value.journaled
    [entry] = await journaled(cli, handle.id, "APPROVAL_REFUSED")
    assert entry.input["step"] == 7

    accepted = await decide(
        saga, step=1, payload_sha256=pending.payload_sha256, approver="a", approve=True
    )
    assert accepted.accepted and accepted.approve
    [approved] = phases(cli, handle.id, "APPROVED")
    assert (approved.seq, approved.hash) == (accepted.seq, accepted.hash)


def test_check_pending_refuses_a_hash_it_cannot_reproduce() -> None:
    shown = {"iban": "DE89370400440532013000", "amount": 5}
    honest = PendingApproval(
        saga_id="s",
        step=1,
        tool="send_wire_transfer",
        payload=shown,
        canonical_payload="",
        payload_sha256=approval_hash("send_wire_transfer", shown),
        requested_at=datetime.now(UTC),
    )
    assert check_pending(honest) == honest.payload_sha256
    forged = honest.model_copy(
        update={"payload_sha256": approval_hash("send_wire_transfer", {**shown, "amount": 5000})}
    )
    with pytest.raises(PendingHashMismatchError, match="not deciding"):
        check_pending(forged)
    other_tool = honest.model_copy(update={"tool": "refund"})
    with pytest.raises(PendingHashMismatchError):
        check_pending(other_tool)
