"""`sagacity start`, `status`, `list` and `cancel` against a real dev server and worker."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping

import pytest
from temporalio.client import WorkflowFailureError
from typer.testing import CliRunner

from sagacity.approval._judge import approval_hash
from sagacity.journal._chain import verify_chain
from sagacity.journal._phases import Phase, SagaStatus
from sagacity.worker.cli._main import app
from sagacity.worker.client._client import saga_result
from sagacity.workflows._models import SagaInput, ToolCall
from tests.support.cli import CliHarness

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(120)]

RESERVE = {"tool": "reserve_inventory", "args": {"sku": "widget", "qty": 2}}
CHARGE = {"tool": "charge_card", "args": {"amount": 100, "currency": "EUR"}}
SHIP_FAILS = {"tool": "ship_order", "args": {"address": "Main St 1", "fail": True}}
WIRE = {"tool": "send_wire_transfer", "args": {"iban": "DE89370400440532013000", "amount": 5000}}


def _plan(*calls: Mapping[str, object]) -> SagaInput:
    return SagaInput(plan=[ToolCall.model_validate(c) for c in calls])


async def test_start_from_a_plan_list_waits_and_prints_the_result(cli: CliHarness) -> None:
    plan = cli.tmp / "plan.json"
    plan.write_text(json.dumps([RESERVE, CHARGE]))

    ran = await cli("start", "--plan", str(plan), "--id", "cli-start-ok", "--wait")
    cli.started.append("cli-start-ok")

    assert ran.code == 0, ran.output
    assert ran.stdout.splitlines()[0] == "cli-start-ok"  # the id first, alone: scriptable
    assert "COMPLETED" in ran.stdout
    assert "reserve_inventory" in ran.stdout and "charge_card" in ran.stdout
    assert cli.shop.stock("widget") == 8  # the tools really ran
    assert [c["amount"] for c in cli.shop.charges()] == [100]
    assert verify_chain("cli-start-ok", cli.store.entries("cli-start-ok")).ok


async def test_start_wait_exits_non_zero_when_the_saga_compensated(cli: CliHarness) -> None:
    plan = cli.tmp / "plan.json"
    plan.write_text(json.dumps([RESERVE, CHARGE, SHIP_FAILS]))

    ran = await cli("start", "--plan", str(plan), "--wait", "--json")

    assert ran.code == 1, ran.output
    lines = [json.loads(line) for line in ran.stdout.splitlines()]  # JSON Lines
    assert lines[0]["event"] == "started"
    cli.started.append(lines[0]["saga_id"])
    assert lines[-1]["event"] == "result"
    result = lines[-1]["result"]
    assert result["status"] == "COMPENSATED"
    assert [c["step"] for c in result["compensations"]] == [2, 1]
    assert cli.shop.stock("widget") == 10


async def test_start_from_a_full_saga_input_file_and_stdin(cli: CliHarness) -> None:
    full = {"plan": [WIRE], "approvers": ["alice"], "approval_timeout_seconds": 600}
    path = cli.tmp / "saga.json"
    path.write_text(json.dumps(full))

    ran = await cli("start", "--plan", str(path))
    assert ran.code == 0, ran.output
    saga_id = ran.stdout.strip()
    cli.started.append(saga_id)
    pending = await cli.pending(saga_id)
    assert pending.payload_sha256 == approval_hash("send_wire_transfer", pending.payload)

    piped = await cli("start", "--plan", "-", stdin=json.dumps([CHARGE]))
    assert piped.code == 0, piped.output
    cli.started.append(piped.stdout.strip())


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "is not JSON"),
        (json.dumps([{"tool": "charge_card", "args": [1]}]), "not a valid saga input"),
        (json.dumps({"plan": [CHARGE], "max_steps": 0}), "max_steps"),
        (json.dumps({"plan": [CHARGE], "max_steps": "7"}), "max_steps"),  # not coerced
        (json.dumps([{"tool": "charge_card", "args": {}, "max_steps": 1}]), "max_steps"),
        (json.dumps(7), "list of tool calls or a saga input object"),
    ],
)
async def test_start_refuses_a_bad_plan_file_in_one_line(
    cli: CliHarness, content: str, expected: str
) -> None:
    path = cli.tmp / "bad.json"
    path.write_text(content)
    ran = await cli("start", "--plan", str(path))
    assert ran.code == 1
    assert expected in ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1


async def test_start_needs_exactly_one_of_plan_and_goal(cli: CliHarness) -> None:
    neither = await cli("start")
    both = await cli("start", "--plan", "x.json", "--goal", "sell")
    assert neither.code == both.code == 1
    assert "exactly one of --plan FILE or --goal TEXT" in neither.stderr
    assert "exactly one of" in both.stderr


async def test_start_never_reuses_a_saga_id(cli: CliHarness) -> None:
    running = await cli.start(_plan(WIRE))
    closed = await cli.start(_plan(CHARGE))
    await saga_result(closed)  # its journal chain is closed: a second run could not append
    path = cli.tmp / "plan.json"
    path.write_text(json.dumps([CHARGE]))
    for handle in (running, closed):
        ran = await cli("start", "--plan", str(path), "--id", handle.id)
        assert ran.code == 1
        assert f"a saga with id '{handle.id}' already exists" in ran.stderr
    assert len(cli.shop.charges()) == 1


async def test_status_of_a_saga_awaiting_approval_then_completed(cli: CliHarness) -> None:
    handle = await cli.start(_plan(RESERVE, WIRE))
    pending = await cli.pending(handle.id)

    waiting = await cli("status", handle.id, "--json")
    assert waiting.code == 0, waiting.output
    view = json.loads(waiting.stdout)
    assert view["status"] == "AWAITING_APPROVAL"
    assert view["execution_status"] == "RUNNING"
    assert view["pending_approval"]["payload_sha256"] == pending.payload_sha256
    assert [s["status"] for s in view["steps"]] == ["EXECUTED", "AWAITING_APPROVAL"]

    table = await cli("status", handle.id)
    assert "AWAITING_APPROVAL" in table.stdout and pending.payload_sha256 in table.stdout

    await handle.signal(
        "approve",
        {
            "saga_id": handle.id,
            "step": pending.step,
            "payload_sha256": pending.payload_sha256,
            "approver": "ann",
        },
    )
    await saga_result(handle)
    done = json.loads((await cli("status", handle.id, "--json")).stdout)
    assert done["status"] == "COMPLETED" and done["execution_status"] == "COMPLETED"
    assert [s["approver"] for s in done["steps"]] == [None, "ann"]


async def test_status_of_an_unknown_saga_is_one_line(cli: CliHarness) -> None:
    ran = await cli("status", "no-such-saga")
    assert ran.code == 1
    assert ran.stderr.strip().splitlines() == [
        f"error: no saga 'no-such-saga' in namespace 'default' at {cli.env['TEMPORAL_ADDRESS']}"
    ]


async def _listed(cli: CliHarness, *args: str, want: str) -> list[dict[str, object]]:
    """Visibility is eventually consistent: poll until `want` is listed (bounded)."""
    deadline = time.monotonic() + 20
    while True:
        ran = await cli("list", "--json", *args)
        assert ran.code == 0, ran.output
        rows: list[dict[str, object]] = json.loads(ran.stdout)
        if any(r["saga_id"] == want for r in rows):
            return rows
        assert time.monotonic() < deadline, f"{want} not listed by list {args}"
        await asyncio.sleep(0.2)


async def test_list_filters_by_saga_status(cli: CliHarness) -> None:
    waiting = await cli.start(_plan(RESERVE, WIRE))
    done = await cli.start(_plan(CHARGE))
    await saga_result(done)
    await cli.pending(waiting.id)

    awaiting = await _listed(cli, "--status", "awaiting_approval", want=waiting.id)
    assert done.id not in {r["saga_id"] for r in awaiting}
    assert all(r["status"] == "AWAITING_APPROVAL" for r in awaiting)

    completed = await _listed(cli, "--status", "COMPLETED", want=done.id)
    assert waiting.id not in {r["saga_id"] for r in completed}
    row = next(r for r in completed if r["saga_id"] == done.id)
    assert row["needs_human"] is False and row["closed"] is not None

    table = await cli("list")
    assert table.code == 0 and waiting.id in table.stdout and "waits for" in table.stdout
    row_text = next(line for line in table.stdout.splitlines() if waiting.id in line)
    assert "a decision" in row_text and "needs human" not in table.stdout

    bad = await cli("list", "--status", "FINISHED")
    assert bad.code == 2 and "FINISHED" in bad.stderr  # usage error, lists the choices


async def test_cancel_compensates_and_a_second_cancel_is_refused(cli: CliHarness) -> None:
    handle = await cli.start(_plan(RESERVE, CHARGE, WIRE))
    await cli.pending(handle.id)
    assert cli.shop.stock("widget") == 8

    why = ["--reason", "customer called back"]
    ran = await cli("cancel", handle.id, "--wait", *why, SAGACITY_ACTOR="olivia")
    assert ran.code == 0, ran.output
    assert f"saga {handle.id} closed: COMPENSATED" in ran.stdout
    assert cli.shop.stock("widget") == 10
    assert [c["refunded"] for c in cli.shop.charges()] == [True]
    assert cli.shop.wires() == []

    # Who asked and why are journaled by the saga and shown by `status`.
    closing = [e for e in cli.store.entries(handle.id) if e.phase is Phase.SAGA_CLOSED]
    assert closing[0].result["first_failure"] == (
        "saga cancelled (by olivia: customer called back)"
    )
    status = await cli("status", handle.id)
    assert status.code == 0 and "COMPENSATED" in status.stdout
    assert "cancel requested by olivia: customer called back" in status.stderr
    assert f"sagacity journal {handle.id}" in status.stderr  # cancelled: no result to show
    shown = json.loads((await cli("status", handle.id, "--json")).stdout)
    assert "by olivia: customer called back" in shown["remark"]

    again = await cli("cancel", handle.id, *why, "--actor", "olivia")
    assert again.code == 1
    assert "has already finished (COMPENSATED); nothing to cancel" in again.stderr

    unknown = await cli("cancel", "no-such-saga", *why, "--actor", "olivia")
    assert unknown.code == 1 and "no saga 'no-such-saga'" in unknown.stderr


async def test_cancel_names_who_and_why_before_sending(cli: CliHarness) -> None:
    handle = await cli.start(_plan(RESERVE, WIRE))
    await cli.pending(handle.id)
    no_reason = await cli("cancel", handle.id, "--actor", "olivia")
    assert no_reason.code == 2 and "--reason" in no_reason.stderr  # a CLI mistake: usage
    blank = await cli("cancel", handle.id, "--actor", "olivia", "--reason", " ")
    assert blank.stderr.strip() == "error: cancel needs a non-empty --reason: it is journaled"
    nobody = await cli("cancel", handle.id, "--reason", "r")
    assert nobody.code == 1 and "cancel needs --actor NAME" in nobody.stderr
    assert (await cli.client.get_workflow_handle(handle.id).describe()).close_time is None

    sent = await cli("cancel", handle.id, "--reason", "r", "--actor", "olivia", "--json")
    assert sent.code == 0, sent.output
    answer = json.loads(sent.stdout)
    assert answer["sent"] == "by olivia: r" and answer["closed"] is None


async def test_status_without_a_worker_says_so(cli: CliHarness) -> None:
    await cli.client.start_workflow(
        "AgentSaga", _plan(CHARGE), id="cli-orphan", task_queue="nobody-polls-this"
    )
    cli.started.append("cli-orphan")
    ran = await cli("status", "cli-orphan")
    assert ran.code == 0, ran.output
    assert "no worker answered" in ran.stderr
    assert "cli-orphan" in ran.stdout


def test_every_saga_status_is_a_list_filter() -> None:
    help_text = CliRunner().invoke(app, ["list", "--help"], env={"COLUMNS": "250"}).stdout
    for status in SagaStatus:
        assert status.value.lower() in help_text


async def test_status_shows_the_saga_not_a_rerun_refused_for_its_id(cli: CliHarness) -> None:
    """Temporal lets anyone start another run under a saga's id (its own client, its UI);
    the saga refuses it and that run fails at once, as the id's latest run. `status` still
    shows the saga, and says what it skipped."""
    handle = await cli.start(_plan(CHARGE))
    first = await handle.result()
    rerun = await cli.client.start_workflow(
        "AgentSaga", _plan(CHARGE), id=handle.id, task_queue=cli.task_queue
    )  # Temporal's default id policy, not sagacity's
    with pytest.raises(WorkflowFailureError):
        await rerun.result()
    assert rerun.result_run_id != handle.result_run_id

    ran = await cli("status", handle.id)
    assert ran.code == 0, ran.output
    assert "COMPLETED" in ran.stdout and "FAILED" not in ran.stdout
    assert f"(run {rerun.result_run_id}) were started under the saga's id" in ran.stderr
    shown = json.loads((await cli("status", handle.id, "--json")).stdout)
    assert (shown["run_id"], shown["status"]) == (handle.result_run_id, "COMPLETED")
    assert shown["head_hash"] == first.head_hash
    assert len(cli.shop.charges()) == 1  # the refused run ran nothing
