"""`--json` on the commands that decide and clean up (approve, reject, dirty, resolve,
retry-compensation, close) against a real dev server and worker, and what a person sees
when the saga refuses: the refusal's code and sentence, from the CLI and from SagaClient
(never a bare WorkflowUpdateFailedError with the reason hidden in its cause)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from sagacity.journal._phases import Phase
from sagacity.worker.client._actions import send_update
from sagacity.worker.client._client import (
    ApprovalRefusedError,
    UpdateFailedError,
    saga_handle,
    saga_result,
)
from sagacity.worker.client._resolutions import ResolutionRefusedError
from sagacity.worker.client._saga_client import SagaClient
from sagacity.workflows._models import DecisionResult, SagaInput, ToolCall
from tests.support.cli import CliHarness, Ran

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(180)]

RESERVE = ToolCall(tool="reserve_inventory", args={"sku": "widget", "qty": 1})
CHARGE = ToolCall(tool="charge_card", args={"amount": 100, "currency": "EUR"})
SHIP = ToolCall(tool="ship_order", args={"address": "Main St 1"})
SHIP_FAILS = ToolCall(tool="ship_order", args={"address": "Main St 1", "fail": True})
WIRE = ToolCall(tool="send_wire_transfer", args={"iban": "DE89370400440532013000", "amount": 9})


def parsed(ran: Ran) -> Any:
    assert ran.code == 0, ran.output
    return json.loads(ran.stdout)


async def needs_human(cli: CliHarness, saga_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while (view := parsed(await cli("status", saga_id, "--json")))["status"] != "NEEDS_HUMAN":
        assert time.monotonic() < deadline, view
        await asyncio.sleep(0.2)
    return view  # type: ignore[no-any-return]


async def test_approve_and_reject_print_the_journaled_decision(cli: CliHarness) -> None:
    approved = await cli.start(SagaInput(plan=[WIRE]))
    rejected = await cli.start(SagaInput(plan=[RESERVE, WIRE]))
    pending = await cli.pending(approved.id)
    await cli.pending(rejected.id)

    yes = ["--approver", "ann", "--yes", "--json"]
    decision = parsed(await cli("approve", approved.id, *yes))
    assert (decision["step"], decision["approver"], decision["approve"]) == (1, "ann", True)
    entry = next(e for e in cli.store.entries(approved.id) if e.phase is Phase.APPROVED)
    assert (decision["seq"], decision["hash"]) == (entry.seq, entry.hash)
    assert entry.result["payload_sha256"] == pending.payload_sha256
    no = parsed(await cli("reject", rejected.id, "--reason", "wrong IBAN", *yes))
    assert (no["step"], no["approve"], no["accepted"]) == (2, False, True)
    assert (await saga_result(rejected)).status.value == "COMPENSATED"


async def test_a_refusal_says_its_code_and_sentence(cli: CliHarness) -> None:
    inp = SagaInput(plan=[WIRE], approvers=["alice"])
    handle = await cli.start(inp)
    await cli.pending(handle.id)

    ran = await cli("approve", handle.id, "--approver", "mallory", "--yes")
    assert ran.code == 1
    refused = [e for e in cli.store.entries(handle.id) if e.phase is Phase.APPROVAL_REFUSED]
    code = (refused[0].error or "").split(":")[0]
    assert code and ran.stderr.startswith(f"error: decision refused ({code}): ")
    assert "journaled as evidence" in ran.stderr

    client = SagaClient(cli.client, task_queue=cli.task_queue)
    with pytest.raises(ApprovalRefusedError) as caught:
        await client.approve(handle.id, approver="mallory")
    assert caught.value.reason == code and caught.value.journaled
    assert caught.value.detail and caught.value.detail in str(caught.value)

    # An update the saga does not take fails in Temporal as WorkflowUpdateFailedError with
    # the reason in its cause; the client raises a typed error that says it.
    with pytest.raises(UpdateFailedError) as failed:
        await send_update(
            saga_handle(cli.client, handle.id), "approve_all", {}, DecisionResult,
            refusal_type="ApprovalRefused", refused=ApprovalRefusedError, what="decision",
            recheck="",
        )  # fmt: skip
    assert failed.value.reason and failed.value.detail
    assert str(failed.value) == f"decision failed ({failed.value.reason}): {failed.value.detail}"
    assert "approve_all" in failed.value.detail


async def test_dirty_retry_and_close_print_json(cli: CliHarness) -> None:
    cli.shop.set_fault("refund")
    inp = SagaInput(plan=[RESERVE, CHARGE, SHIP_FAILS], compensation_attempts=2)
    retried, closed = await cli.start(inp), await cli.start(inp)
    for handle in (retried, closed):
        view = await needs_human(cli, handle.id)
        assert [d["step"] for d in view["dirty"]] == [2]

    listed = parsed(await cli("dirty", "--json"))
    assert {r["saga_id"] for r in listed} >= {retried.id, closed.id}
    row = next(r for r in listed if r["saga_id"] == retried.id)
    assert row["waiting"] and row["dirty"][0]["tool"] == "charge_card"

    who = ["--actor", "olivia", "--yes", "--json"]
    accepted = parsed(await cli("close", closed.id, "--accept", "refunded by hand", *who))
    assert accepted["action"] == "accept" and accepted["status"] == "ACCEPTED"

    refused = await cli("resolve", retried.id, "2", "--did-not-happen", *who)
    assert refused.code == 1 and refused.stdout == ""
    last = refused.stderr.strip().splitlines()[-1]  # after the dirty step it shows
    assert last.startswith("error: resolution refused (") and "retry-compensation" in last

    cli.shop.clear_fault("refund")
    again = parsed(await cli("retry-compensation", retried.id, "2", *who))
    assert (again["action"], again["step"], again["actor"]) == ("retry_compensation", 2, "olivia")
    assert again["status"] == "COMPENSATED" and again["seq"] > 0


async def test_resolve_prints_json(cli: CliHarness) -> None:
    cli.shop.set_fault("ship_delay", "60")  # the carrier hangs: the attempt times out
    timing = {"tool_timeout_seconds": 2, "tool_heartbeat_timeout_seconds": 1}
    handle = await cli.start(SagaInput(plan=[RESERVE, SHIP], **timing))
    view = await needs_human(cli, handle.id)
    cli.shop.clear_fault("ship_delay")
    assert [d["step"] for d in view["dirty"]] == [2]

    client = SagaClient(cli.client, task_queue=cli.task_queue)
    with pytest.raises(ResolutionRefusedError) as caught:  # step 1 is not dirty
        await client.resolve(handle.id, 1, happened=False, actor="olivia")
    assert caught.value.reason in str(caught.value)

    said = parsed(
        await cli("resolve", handle.id, "2", "--did-not-happen", "--actor", "olivia", "--yes",
                  "--json")
    )  # fmt: skip
    assert (said["action"], said["step"], said["status"]) == ("did_not_happen", 2, "COMPENSATED")
