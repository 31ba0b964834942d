"""`sagacity start --wait` shows a saga's progress live: run as a real subprocess whose
stdout is read line by line while the saga runs, against the dev server and a worker.

The approval test reads the printed AWAITING_APPROVAL block before the saga has gone on
(it cannot: it waits for the decision), decides with the very command printed, then reads
the rest: each step's INTENT and outcome, the decision, the failure, the compensations
newest first and the close, in journal order, every value escaped.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from sagacity.approval._judge import approval_hash
from sagacity.stores import open_store
from sagacity.tools._decorators import tool
from tests.support.cli import CliHarness, Ran, cli_env, cli_harness, spawn_cli

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(120)]

RESERVE = {"tool": "reserve_inventory", "args": {"sku": "widget", "qty": 2}}
WIRE = {"tool": "send_wire_transfer", "args": {"iban": "DE89370400440532013000", "amount": 5000}}
CHARGE = {"tool": "charge_card", "args": {"amount": 100, "currency": "EUR"}}
SHIP_FAILS = {"tool": "ship_order", "args": {"address": "Main St 1", "fail": True}}

EVENT = re.compile(r"^ *#(\d+|-) +([A-Z_]+)(?: +step (\d+) (\S+?)(?::|$))?")
"""An event line: seq, phase, and step and tool where the event is a step's."""
HOSTILE = "\x1b[2J\x1b[1;1H\rall good\x9b31m\u202eevil"


class LiveRun:
    """A `sagacity` subprocess whose stdout is read line by line as it is printed."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[str] = []

    @classmethod
    async def start(cls, *args: str, env: Mapping[str, str], cwd: Path) -> LiveRun:
        return cls(await spawn_cli(*args, env=env, cwd=cwd))

    async def until(self, pattern: str, timeout: float = 30) -> list[str]:
        """Read lines until one matches `pattern` (it is printed, or the test fails);
        return every line read so far."""
        assert self.proc.stdout is not None
        while not self.lines or not re.search(pattern, self.lines[-1]):
            raw = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
            assert raw, f"stdout ended before a line matching {pattern!r}: {self.lines}"
            self.lines.append(raw.decode().rstrip("\n"))
        return list(self.lines)

    async def finish(self, timeout: float = 60) -> Ran:
        out, err = await asyncio.wait_for(self.proc.communicate(), timeout)
        assert self.proc.returncode is not None
        self.lines += out.decode().splitlines()
        return Ran(self.proc.returncode, "\n".join(self.lines), err.decode())


def events(lines: list[str]) -> list[tuple[str, int | None, str | None]]:
    """(phase, step, tool) of each event line, in the order printed."""
    found = []
    for line in lines:
        match = EVENT.match(line)
        if match:
            step = int(match.group(3)) if match.group(3) else None
            found.append((match.group(2), step, match.group(4)))
    return found


def field_of(lines: list[str], name: str) -> str:
    return next(line.split(None, 1)[1] for line in lines if line.split(None, 1)[0] == name)


async def start_wait(cli: CliHarness, *calls: Mapping[str, Any], **env: str) -> LiveRun:
    saga_id = f"live-{uuid.uuid4().hex[:8]}"
    cli.started.append(saga_id)
    plan = cli.tmp / f"{saga_id}.json"
    plan.write_text(json.dumps(list(calls)))
    args = ("start", "--plan", str(plan), "--id", saga_id, "--wait")
    return await LiveRun.start(*args, env=cli_env(**{**cli.env, **env}), cwd=cli.tmp)


AFTER_APPROVAL = [
    ("APPROVED", 2, "send_wire_transfer"),
    ("INTENT", 2, "send_wire_transfer"),
    ("EXECUTED", 2, "send_wire_transfer"),
    ("INTENT", 3, "charge_card"),
    ("EXECUTED", 3, "charge_card"),
    ("INTENT", 4, "ship_order"),
    ("FAILED", 4, "ship_order"),
    ("COMPENSATING", None, None),
    ("COMPENSATED", 3, "charge_card"),
    ("COMPENSATED", 1, "reserve_inventory"),
    ("SAGA_CLOSED", None, None),
]


async def test_start_wait_shows_each_entry_live_and_the_approval_it_waits_for(
    cli: CliHarness,
) -> None:
    run = await start_wait(cli, RESERVE, WIRE, CHARGE, SHIP_FAILS)

    waiting = await run.until(r"^ +reject ")  # the saga waits: nothing after this yet
    saga_id = waiting[0]
    assert events(waiting) == [
        ("SAGA_OPENED", None, None),
        ("INTENT", 1, "reserve_inventory"),
        ("EXECUTED", 1, "reserve_inventory"),
        ("AWAITING_APPROVAL", 2, "send_wire_transfer"),
    ]
    pending = await cli.pending(saga_id)
    digest = field_of(waiting, "sha256")
    assert digest == pending.payload_sha256 == approval_hash(pending.tool, pending.payload)
    assert field_of(waiting, "payload") == pending.canonical_payload
    approve = field_of(waiting, "approve")
    assert approve == f"sagacity approve {saga_id} --hash {digest}"
    reject = f"sagacity reject {saga_id} --hash {digest} --reason 'WHY'"
    assert field_of(waiting, "reject") == reject

    decided = await cli(*approve.split()[1:], "--approver", "ann", "--yes")  # as printed
    assert decided.code == 0, decided.output
    ran = await run.finish()

    lines = ran.stdout.splitlines()
    assert ran.code == 1, ran.output  # compensated: not COMPLETED
    assert events(lines)[4:] == AFTER_APPROVAL
    assert next(line for line in lines if "APPROVED" in line).endswith(": by ann")
    assert [line.split()[0] for line in lines if EVENT.match(line)] == [
        f"#{seq}" for seq in range(1, 16)
    ]  # every journal entry once, in seq order
    closed = next(line for line in lines if "SAGA_CLOSED" in line)
    assert "COMPENSATED: step 4 (ship_order) failed" in closed
    assert re.search(r"^status +COMPENSATED", ran.stdout, re.M)  # then the result, as before
    assert "\x1b" not in ran.stdout  # not a terminal: no colour, no spinner
    assert cli.shop.stock("widget") == 10 and len(cli.shop.wires()) == 1


async def test_start_wait_follows_the_workflow_when_the_journal_cannot_be_read(
    cli: CliHarness,
) -> None:
    elsewhere = f"sqlite:///{cli.tmp}/not-the-workers.db"
    run = await start_wait(cli, RESERVE, WIRE, CHARGE, SHIP_FAILS, SAGACITY_JOURNAL_URL=elsewhere)

    waiting = await run.until(r"^ +reject ")
    saga_id = waiting[0]
    assert events(waiting) == [
        ("INTENT", 1, "reserve_inventory"),
        ("EXECUTED", 1, "reserve_inventory"),
        ("AWAITING_APPROVAL", 2, "send_wire_transfer"),
    ]
    pending = await cli.pending(saga_id)
    assert field_of(waiting, "sha256") == pending.payload_sha256
    reject = field_of(waiting, "reject").replace("'WHY'", "no-wire").split()[1:]
    decided = await cli(*reject, "--approver", "ann", "--yes")
    assert decided.code == 0, decided.output
    ran = await run.finish()

    assert ran.code == 1, ran.output
    assert "cannot read the journal here (no journal at" in ran.stderr
    assert "through its workflow's queries" in ran.stderr
    assert events(ran.stdout.splitlines())[3:] == [
        ("REJECTED", 2, "send_wire_transfer"),
        ("COMPENSATED", 1, "reserve_inventory"),
        ("SAGA_CLOSED", None, None),
    ]
    rejected = next(line for line in ran.stdout.splitlines() if "REJECTED" in line)
    assert rejected.endswith("by ann, reason: no-wire")


async def test_a_journal_without_the_saga_is_not_taken_for_the_workers(cli: CliHarness) -> None:
    other = f"sqlite:///{cli.tmp}/another.db"
    open_store(other).close()  # a journal that opens, and knows nothing of this saga
    plan = cli.tmp / "plan.json"
    plan.write_text(json.dumps([RESERVE, CHARGE]))

    ran = await cli("start", "--plan", str(plan), "--wait", SAGACITY_JOURNAL_URL=other)

    cli.started.append(ran.stdout.splitlines()[0])
    assert ran.code == 0, ran.output
    assert "has no entry for saga" in ran.stderr and "not the journal" in ran.stderr
    assert events(ran.stdout.splitlines()) == [
        ("INTENT", 1, "reserve_inventory"),
        ("EXECUTED", 1, "reserve_inventory"),
        ("INTENT", 2, "charge_card"),
        ("EXECUTED", 2, "charge_card"),
        ("SAGA_CLOSED", None, None),
    ]


async def test_start_wait_json_prints_json_lines_then_the_result(cli: CliHarness) -> None:
    saga_id = f"json-{uuid.uuid4().hex[:8]}"
    cli.started.append(saga_id)
    plan = cli.tmp / "plan.json"
    plan.write_text(json.dumps([RESERVE, CHARGE, SHIP_FAILS]))

    ran = await cli("start", "--plan", str(plan), "--id", saga_id, "--wait", "--json")

    assert ran.code == 1, ran.output
    lines = [json.loads(line) for line in ran.stdout.splitlines()]
    assert lines[0] == {"event": "started", "saga_id": saga_id, "task_queue": cli.task_queue}
    progress = [line for line in lines if line["event"] == "progress"]
    assert [(p["phase"], p["step"]) for p in progress] == [
        ("SAGA_OPENED", 0),
        ("INTENT", 1),
        ("EXECUTED", 1),
        ("INTENT", 2),
        ("EXECUTED", 2),
        ("INTENT", 3),
        ("FAILED", 3),
        ("COMPENSATING", 0),
        ("COMPENSATED", 2),
        ("COMPENSATED", 1),
        ("SAGA_CLOSED", 0),
    ]
    assert [p["seq"] for p in progress] == list(range(1, 12))
    assert progress[2]["result"]["reservation"] == f"{saga_id}:1"  # values whole, as JSON
    assert lines[-1]["event"] == "result" and lines[-1]["result"]["status"] == "COMPENSATED"
    assert len(lines) == len(progress) + 2


@tool
def echo_back(text: str) -> str:
    """Returns what it is given: a result a caller controls."""
    return text


@tool
def fail_loudly(text: str) -> dict[str, str]:
    """Fails with what it is given: an error a caller controls."""
    raise RuntimeError(text)


@pytest.fixture
async def hostile(temporal_env: WorkflowEnvironment, tmp_path: Path) -> AsyncIterator[CliHarness]:
    """The CLI harness with two more tools, whose result and error a caller writes."""
    async with cli_harness(temporal_env.client, tmp_path, echo_back, fail_loudly) as harness:
        yield harness


@pytest.mark.parametrize("as_json", [False, True], ids=["lines", "json"])
async def test_a_hostile_result_and_error_are_shown_escaped(
    hostile: CliHarness, as_json: bool
) -> None:
    calls = [
        {"tool": "echo_back", "args": {"text": HOSTILE}},
        {"tool": "fail_loudly", "args": {"text": HOSTILE}},
    ]
    if as_json:
        plan = hostile.tmp / "hostile.json"
        plan.write_text(json.dumps(calls))
        ran = await hostile("start", "--plan", str(plan), "--wait", "--json")
        lines = [json.loads(line) for line in ran.stdout.splitlines()]
        hostile.started.append(lines[0]["saga_id"])
        shown = {(e["phase"], e["step"]): e for e in lines if e["event"] == "progress"}
        assert shown[("EXECUTED", 1)]["result"] == HOSTILE  # the exact value, parsed back
        assert shown[("FAILED", 2)]["error"] == f"RuntimeError: {HOSTILE}"
    else:
        ran = await (await start_wait(hostile, *calls)).finish()
        printed = ran.stdout.splitlines()
        executed = next(line for line in printed if " EXECUTED " in line)
        assert executed.endswith(r'→ "\u001b[2J\u001b[1;1H\rall good\x9b31m\u202eevil"')
        failed = next(line for line in printed if " FAILED " in line)
        assert failed.endswith(r"RuntimeError: \x1b[2J\x1b[1;1H\rall good\x9b31m\u202eevil")
        assert r"\x1b[2J" in ran.stdout.split("SAGA_CLOSED", 1)[1]  # the result table too
    assert ran.code == 1, ran.output
    for raw in ("\x1b", "\r", "\x9b", "\u202e"):
        assert raw not in ran.stdout
