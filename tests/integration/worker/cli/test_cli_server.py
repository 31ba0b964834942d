"""Long-running commands as real processes: `dev` (its own server, UI and worker), `worker`
(against the shared dev server) and `demo`; each stops cleanly and leaves nothing behind."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from sagacity.examples.orders import Shop
from sagacity.workflows._models import SagaInput, SagaResult, ToolCall
from tests.support.cli import Ran, cli_env, invoke_sync, run_subprocess

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(240)]

RESERVE = {"tool": "reserve_inventory", "args": {"sku": "widget", "qty": 1}}
WIRE = {"tool": "send_wire_transfer", "args": {"iban": "DE89370400440532013000", "amount": 7}}
CHARGE = {"tool": "charge_card", "args": {"amount": 5, "currency": "EUR"}}
FAILS = {"tool": "ship_order", "args": {"address": "Main St 1", "fail": True}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def nothing_listens(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def processes_mentioning(text: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{pid}: {cmdline}")
    return found


@asynccontextmanager
async def process(
    *args: str, env: dict[str, str], cwd: Path, ready: str
) -> AsyncIterator[tuple[asyncio.subprocess.Process, list[str]]]:
    """`python -m sagacity.worker ARGS`, yielded once it printed `ready`; stopped with SIGINT."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sagacity.worker", *args, env=env, cwd=cwd,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(90):
            while not any(ready in line for line in lines):
                line = (await proc.stdout.readline()).decode()
                if not line:
                    err = (await proc.stderr.read()).decode() if proc.stderr else ""
                    pytest.fail(f"{args} exited before {ready!r}: {lines} {err}")
                lines.append(line)
        yield proc, lines
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()
                raise


async def stop(proc: asyncio.subprocess.Process, sig: int = signal.SIGINT) -> Ran:
    proc.send_signal(sig)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return Ran(proc.returncode, out.decode(), err.decode())


async def cli(env: dict[str, str], *args: str) -> Ran:
    return await asyncio.to_thread(invoke_sync, list(args), env)


async def test_dev_serves_temporal_the_ui_and_a_worker_then_stops(tmp_path: Path) -> None:
    port, ui_port, inbox_port = free_port(), free_port(), free_port()
    journal_url = f"sqlite:///{tmp_path}/journal.db"
    env = cli_env(SAGACITY_JOURNAL_URL=journal_url, SAGACITY_SHOP_PATH=str(tmp_path / "shop.db"))
    args = ("dev", "--port", str(port), "--ui-port", str(ui_port), "--inbox-port", str(inbox_port))
    async with process(*args, env=env, cwd=tmp_path, ready="press Ctrl-C") as (proc, lines):
        text = "".join(lines)
        assert f"Temporal UI: http://127.0.0.1:{ui_port}" in text
        assert f"export TEMPORAL_ADDRESS=127.0.0.1:{port}" in text
        page = await asyncio.to_thread(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/", timeout=10).status
        )
        assert page == 200
        assert f"approval inbox: http://localhost:{inbox_port}" in text
        inbox = await asyncio.to_thread(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{inbox_port}/", timeout=10).read()
        )
        assert b"Waiting for approval" in inbox

        user = {
            "TEMPORAL_ADDRESS": f"127.0.0.1:{port}",
            "SAGACITY_JOURNAL_URL": journal_url,
        }
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps([RESERVE, WIRE]))
        started = await cli(user, "start", "--plan", str(plan), "--id", "dev-saga")
        assert started.code == 0, started.output
        deadline = time.monotonic() + 30
        while True:  # listed by SagaStatus: the search attributes are registered
            pending = await cli(user, "pending", "--json")
            assert pending.code == 0, pending.output
            if [i["saga_id"] for i in json.loads(pending.stdout)] == ["dev-saga"]:
                break
            assert time.monotonic() < deadline, pending.output
            await asyncio.sleep(0.3)
        listed = await asyncio.to_thread(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{inbox_port}/", timeout=10).read()
        )
        assert b'href="/sagas/dev-saga/approval"' in listed  # the inbox lists it too
        approved = await cli(user, "approve", "dev-saga", "--approver", "dev", "--yes")
        assert approved.code == 0, approved.output
        deadline = time.monotonic() + 30
        while "COMPLETED" not in (status := await cli(user, "status", "dev-saga")).stdout:
            assert time.monotonic() < deadline, status.output
            await asyncio.sleep(0.3)
        assert (await cli(user, "verify", "dev-saga")).code == 0
        assert len(Shop(tmp_path / "shop.db").wires()) == 1

        # Ordinary failures: a refund the provider refuses, a goal with no model provider.
        Shop(tmp_path / "shop.db").set_fault("refund")
        plan.write_text(json.dumps({"plan": [CHARGE, FAILS], "compensation_attempts": 2}))
        started = await cli(user, "start", "--plan", str(plan), "--id", "dev-refund")
        assert started.code == 0, started.output
        no_model = await cli(user, "start", "--goal", "sell", "--model", "m", "--wait")
        assert no_model.code == 1, no_model.output
        deadline = time.monotonic() + 60
        while "NEEDS_HUMAN" not in (status := await cli(user, "status", "dev-refund")).stdout:
            assert time.monotonic() < deadline, status.output
            await asyncio.sleep(0.3)

        ran = await stop(proc)
    assert ran.code == 0, ran
    assert "stopping" in ran.stdout
    assert "Traceback" not in ran.stderr  # each failure is one line, its reason on it
    assert "ShopError: payment provider refused the refund (fault injected)" in ran.stderr
    assert "UnknownModelProvider: no model provider 'openai' on this worker" in ran.stderr
    banner = [line for line in ran.stdout.splitlines() if "approval inbox:" not in line]
    assert "localhost:" not in "\n".join(banner)  # the server's own banner stays out
    assert nothing_listens(port) and nothing_listens(ui_port) and nothing_listens(inbox_port)
    assert processes_mentioning(f"--port {port} ") == []


async def test_dev_refuses_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = cli_env(SAGACITY_JOURNAL_URL=f"sqlite:///{tmp_path}/journal.db")
        ran = await asyncio.to_thread(
            invoke_sync, ["dev", "--port", str(port)], {k: env[k] for k in env if "SAGACITY" in k}
        )
    assert ran.code == 1
    assert ran.stderr.strip().splitlines() == [
        f"error: server port {port} is in use (another `sagacity dev` or Temporal?); pick "
        "another with --port"
    ]


async def test_worker_runs_sagas_until_sigterm(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    task_queue = f"cli-worker-{uuid.uuid4().hex[:8]}"
    journal_url = f"sqlite:///{tmp_path}/journal.db"
    env = cli_env(
        TEMPORAL_ADDRESS=temporal_env.client.service_client.config.target_host,
        SAGACITY_TASK_QUEUE=task_queue,
        SAGACITY_JOURNAL_URL=journal_url,
        SAGACITY_SHOP_PATH=str(tmp_path / "shop.db"),
    )
    async with process("worker", env=env, cwd=tmp_path, ready="sagacity worker:") as (proc, _):
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps([RESERVE]))
        user = {k: v for k, v in env.items() if k.startswith(("SAGACITY_", "TEMPORAL_"))}
        ran = await cli(user, "start", "--plan", str(plan), "--wait")
        assert ran.code == 0, ran.output
        assert "COMPLETED" in ran.stdout
        assert Shop(tmp_path / "shop.db").stock("widget") == 9
        stopped = await stop(proc, signal.SIGTERM)
    assert stopped.code == 0, stopped
    assert "Traceback" not in stopped.stderr


async def test_demo_runs_four_sagas_and_leaves_nothing_running(
    tmp_path: Path, private_data_home: Path
) -> None:
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    ran = await run_subprocess("demo", env=cli_env(), cwd=here, timeout=180)
    assert ran.code == 0, ran.output
    assert ran.stdout.count("verified demo-") == 4
    for status in ("COMPLETED", "COMPENSATED"):
        assert f"final status: {status}" in ran.stdout
    # The fourth: a refund fails, the saga waits for a person, a signed retry cleans it.
    assert "needs a human: step 2 charge_card: COMPENSATION_FAILED" in ran.stdout
    assert "compensated (signed, journaled RESOLVED" in ran.stdout
    assert "Traceback" not in ran.output  # the injected fault is not shown as a crash
    warned = [line for line in ran.output.splitlines() if "WARN" in line.upper()]
    assert warned == [], warned  # the dev server's start-up notices stay out of the demo
    assert "demo finished" in ran.stdout
    # The closing hints name the CLI as the person can type it where they ran the demo
    # (after `make demo`, .venv/bin is not on their PATH), and point onwards.
    cli = re.findall(r"^next: (.+) demo --keep runs it again", ran.stdout, re.M)[0]
    typed = await asyncio.to_thread(
        subprocess.run, [*shlex.split(cli), "demo", "--help"], cwd=here, env=cli_env(),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert typed.returncode == 0 and "--keep" in typed.stdout, typed.stderr
    assert "quick start at the top of README.md" in ran.stdout
    assert f"{cli} dev starts a dev server, a worker and the approval inbox" in ran.stdout
    assert processes_mentioning(str(tmp_path)) == []
    # No link to the UI of a server that has stopped.
    assert "Temporal UI" not in ran.output and "http://127.0.0.1" not in ran.output
    assert "localhost:" not in ran.output.replace("localhost:11434", "")  # the server's banner
    # Its files are in the data home, and its sagas are found from any folder.
    assert f"journal: {private_data_home}/journal.db" in ran.stdout
    assert list(here.iterdir()) == []
    assert (private_data_home / "demo" / "demo-keys" / "approvers.json").exists()
    saga_id = re.findall(r"verified (demo-\w+-1):", ran.stdout)[0]
    found = await run_subprocess("journal", saga_id, env=cli_env(), cwd=there)
    assert found.code == 0 and "SAGA_CLOSED" in found.stdout, found.output


async def test_demo_keep_serves_the_ui_until_ctrl_c(tmp_path: Path) -> None:
    args = ("demo", "--keep")
    async with process(*args, env=cli_env(), cwd=tmp_path, ready="Temporal UI:") as (proc, lines):
        text = "".join(lines)
        assert "demo finished" in text  # the sagas ran first; the link comes last
        url = re.findall(r"Temporal UI: (http://127\.0\.0\.1:\d+)", text)[0]
        page = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=10).status)
        assert page == 200  # a live link
        ran = await stop(proc)
    assert ran.code == 0, ran
    assert "stopping" in ran.stdout and "Traceback" not in ran.stderr
    assert nothing_listens(int(url.rsplit(":", 1)[1]))


async def test_python_m_worker_with_tools_runs_a_worker(tmp_path: Path, temporal_env) -> None:
    """`python -m sagacity.worker --tools module:attr` (no command) serves that toolbox: a saga
    started on its queue completes, then SIGTERM stops it cleanly."""
    queue = f"m-{uuid.uuid4().hex[:8]}"
    env = cli_env(
        TEMPORAL_ADDRESS=temporal_env.client.service_client.config.target_host,
        SAGACITY_TASK_QUEUE=queue,
        SAGACITY_JOURNAL_URL=f"sqlite:///{tmp_path}/journal.db",
        SAGACITY_SHOP_PATH=str(tmp_path / "shop.db"),
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sagacity.worker", "--tools", "sagacity.examples.orders:toolbox",
        env=env, cwd=tmp_path,
    )  # fmt: skip
    try:
        result = await temporal_env.client.execute_workflow(
            "AgentSaga",
            SagaInput(plan=[ToolCall(tool="catalog_export", args={"size_bytes": 5})]),
            id=f"m-{uuid.uuid4().hex[:8]}",
            task_queue=queue,
            result_type=SagaResult,
            execution_timeout=timedelta(seconds=60),
        )
        assert result.status.value == "COMPLETED"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0


async def test_python_m_worker_with_bad_tools_says_so(tmp_path: Path) -> None:
    ran = await run_subprocess("--tools", "no_such_module:toolbox", env=cli_env(), cwd=tmp_path)
    assert ran.code != 0
    assert "no_such_module" in ran.stderr and "Traceback" not in ran.output
