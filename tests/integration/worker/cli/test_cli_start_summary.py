"""What `sagacity start --wait` prints once the saga closed: the saga's own status, and
the same workflow facts `sagacity status` shows a moment later (its real execution
status, task queue and start time), not ones made up from the settings (issue 36). A
plan refused before its first step says why, not an empty table of steps."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest

from tests.support.cli import CliHarness, Ran

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(120)]

RESERVE = {"tool": "reserve_inventory", "args": {"sku": "widget", "qty": 2}}
SHIP_FAILS = {"tool": "ship_order", "args": {"address": "Main St 1", "fail": True}}


async def start_wait(cli: CliHarness, *calls: dict[str, Any]) -> tuple[str, Ran]:
    saga_id = f"sum-{uuid.uuid4().hex[:8]}"
    cli.started.append(saga_id)
    plan = cli.tmp / f"{saga_id}.json"
    plan.write_text(json.dumps(list(calls)))
    return saga_id, await cli("start", "--plan", str(plan), "--id", saga_id, "--wait")


def row(output: str, name: str) -> str:
    """The value of the overview's row `name` (the one row of that name)."""
    found = re.findall(rf"^{name}  +(.*?) *$", output, re.M)
    assert len(found) == 1, (name, output)
    return str(found[0])


async def test_a_compensated_saga_is_summed_up_as_status_shows_it(cli: CliHarness) -> None:
    saga_id, ran = await start_wait(cli, RESERVE, SHIP_FAILS)
    assert ran.code == 1, ran.output
    status = await cli("status", saga_id)
    assert status.code == 0, status.output

    assert row(ran.stdout, "status") == "COMPENSATED"
    workflow = row(ran.stdout, "workflow")
    assert workflow == row(status.stdout, "workflow")
    assert workflow == f"FAILED on task queue {cli.task_queue}"  # the workflow failed
    started = row(ran.stdout, "started")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", started), started
    assert started == row(status.stdout, "started")


async def test_a_refused_plan_says_why_instead_of_an_empty_table(cli: CliHarness) -> None:
    _, ran = await start_wait(cli, {"tool": "no_such_tool", "args": {}})
    assert ran.code == 1, ran.output
    assert row(ran.stdout, "status") == "REFUSED"
    assert "no_such_tool" in row(ran.stdout, "refused")
    assert "┃" not in ran.stdout and "│" not in ran.stdout, ran.stdout  # no table at all
