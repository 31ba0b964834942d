"""What `sagacity start` checks before it starts anything, against a real dev server: a
--wait on a task queue no worker polls, a --goal with no model provider, the approval
timeout of a plan file in object form; and the timeout errors naming their call."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from temporalio.service import RPCError, RPCStatusCode

from sagacity.worker.client._client import (
    QUERY_TIMEOUT,
    NoWorkerError,
    SagaNotFoundError,
    TemporalUnavailableError,
    describe_saga,
    saga_handle,
)
from sagacity.worker.client._errors import translate
from tests.support.cli import CliHarness

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(120)]

CHARGE = {"tool": "charge_card", "args": {"amount": 100, "currency": "EUR"}}
WIRE = {"tool": "send_wire_transfer", "args": {"iban": "DE89370400440532013000", "amount": 5000}}


async def _never_started(cli: CliHarness, saga_id: str) -> None:
    with pytest.raises(SagaNotFoundError):
        await describe_saga(saga_handle(cli.client, saga_id))


async def test_start_wait_with_no_worker_on_the_queue_says_so_and_starts_nothing(
    cli: CliHarness,
) -> None:
    queue = f"nobody-{uuid.uuid4().hex[:8]}"
    plan = cli.tmp / "plan.json"
    plan.write_text(json.dumps([CHARGE]))
    saga_id = f"cli-{uuid.uuid4().hex[:8]}"

    ran = await cli(
        "start", "--plan", str(plan), "--id", saga_id, "--wait", SAGACITY_TASK_QUEUE=queue
    )

    assert ran.code == 1, ran.output
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1, ran.stderr
    assert f"no worker polls task queue '{queue}'" in lines[0]
    assert "Not started: --wait would wait for ever" in lines[0]
    assert ran.stdout == ""
    await _never_started(cli, saga_id)
    assert cli.shop.charges() == []


async def test_start_without_wait_on_an_unpolled_queue_starts_and_warns(cli: CliHarness) -> None:
    queue = f"nobody-{uuid.uuid4().hex[:8]}"
    plan = cli.tmp / "plan.json"
    plan.write_text(json.dumps([CHARGE]))

    ran = await cli("start", "--plan", str(plan), SAGACITY_TASK_QUEUE=queue)

    assert ran.code == 0, ran.output
    saga_id = ran.stdout.strip()
    cli.started.append(saga_id)
    assert f"warning: no worker polls task queue {queue}; saga {saga_id} waits" in ran.stderr
    summary = await describe_saga(saga_handle(cli.client, saga_id))
    assert summary.running and summary.task_queue == queue


async def test_start_wait_with_a_worker_polling_does_not_warn(cli: CliHarness) -> None:
    plan = cli.tmp / "plan.json"
    plan.write_text(json.dumps([CHARGE]))
    ran = await cli("start", "--plan", str(plan), "--wait")
    cli.started.append(ran.stdout.splitlines()[0])
    assert ran.code == 0, ran.output
    assert "no worker polls" not in ran.stderr


async def test_start_goal_with_no_model_provider_is_refused_before_starting(
    cli: CliHarness,
) -> None:
    saga_id = f"cli-{uuid.uuid4().hex[:8]}"
    ran = await cli("start", "--goal", "sell a widget", "--id", saga_id)
    assert ran.code == 1, ran.output
    assert ran.stderr.strip().splitlines() == [
        "error: no model provider configured for --goal: the 'openai' provider needs a model "
        "name; give --model NAME or set SAGACITY_OPENAI_MODEL, and point the worker at the "
        "provider (SAGACITY_OPENAI_BASE_URL for a local server such as Ollama, "
        "SAGACITY_OPENAI_API_KEY for OpenAI). Nothing was started"
    ]
    await _never_started(cli, saga_id)

    scripted = await cli("start", "--goal", "sell", "--provider", "scripted", "--id", saga_id)
    assert scripted.code == 1 and "'scripted' provider plays turns" in scripted.stderr
    await _never_started(cli, saga_id)


async def test_start_goal_with_a_model_name_starts(cli: CliHarness) -> None:
    ran = await cli("start", "--goal", "sell a widget", SAGACITY_OPENAI_MODEL="llama3.1")
    assert ran.code == 0, ran.output
    saga_id = ran.stdout.strip()
    cli.started.append(saga_id)
    await describe_saga(saga_handle(cli.client, saga_id))  # it exists


async def test_a_plan_object_takes_the_approval_timeout_setting(cli: CliHarness) -> None:
    given = cli.tmp / "own.json"
    given.write_text(json.dumps({"plan": [WIRE], "approval_timeout_seconds": 900}))
    default = cli.tmp / "object.json"
    default.write_text(json.dumps({"plan": [WIRE]}))  # no timeout of its own
    listed = cli.tmp / "list.json"
    listed.write_text(json.dumps([WIRE]))

    seconds = {}
    for name, path in (("own", given), ("object", default), ("list", listed)):
        ran = await cli("start", "--plan", str(path), SAGACITY_APPROVAL_TIMEOUT_SECONDS="600")
        assert ran.code == 0, ran.output
        saga_id = ran.stdout.strip()
        cli.started.append(saga_id)
        pending = await cli.pending(saga_id)
        assert pending.deadline is not None
        seconds[name] = (pending.deadline - pending.requested_at).total_seconds()
    # The old CLI gave the object form SagaInput's own default (7 days), not the setting.
    assert seconds == {"own": 900, "object": 600, "list": 600}


async def test_a_query_with_no_worker_names_the_query_and_its_timeout(cli: CliHarness) -> None:
    saga_id = f"cli-{uuid.uuid4().hex[:8]}"
    await cli.client.start_workflow(
        "AgentSaga", {"plan": [CHARGE]}, id=saga_id, task_queue=f"nobody-{uuid.uuid4().hex[:8]}"
    )
    cli.started.append(saga_id)
    ran = await cli("status", saga_id)
    assert ran.code == 0, ran.output
    seconds = f"{QUERY_TIMEOUT.total_seconds():g}s"
    assert f"no worker answered the 'status' query for saga '{saga_id}' within {seconds}" in (
        ran.stderr
    )


async def test_a_timeout_of_a_call_no_worker_answers_does_not_blame_a_worker(
    cli: CliHarness,
) -> None:
    timed_out = RPCError("context deadline exceeded", RPCStatusCode.DEADLINE_EXCEEDED, b"")
    describe = translate(timed_out, cli.client, "s-1", call="describe")
    assert isinstance(describe, TemporalUnavailableError)
    assert "did not answer describe for saga 's-1' in time (DEADLINE_EXCEEDED)" in str(describe)
    assert "worker" not in str(describe)

    query = translate(
        timed_out, cli.client, "s-1", call="the 'steps' query", worker_timeout=timedelta(seconds=4)
    )
    assert isinstance(query, NoWorkerError)
    assert "no worker answered the 'steps' query for saga 's-1' within 4s" in str(query)
