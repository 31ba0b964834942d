"""Evidence is on by default: a worker built with defaults (SagacityPlugin as the README's
quick start builds it, or new_worker) signs checkpoints with the data home's log key, so
`sagacity verify --all` checks its sagas with no set-up and a cut tail is found. Turning
checkpoints off is a choice verify reports plainly; the default key is made once, owner
only, however many workers start together, and a broken key file stops the start.

Issue 36: the quick start's worker had no key, so its sagas verified red
(`not_checkpointed`) once any keyed worker had run on the data home, and a new_worker
with defaults left closed sagas whose cut tail nothing detected.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from sagacity._data_home import default_journal_url
from sagacity.examples.orders import Shop
from sagacity.stores import JournalStore, open_store
from sagacity.stores._sqlite import sqlite_path
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker._log_keys import (
    DATA_HOME_KEY,
    LogKeyChoice,
    LogKeyFileError,
    data_home_log_key,
)
from sagacity.worker._plugin import SagacityPlugin
from sagacity.workflows._models import SagaInput, SagaResult, ToolCall
from tests.support.cli import REPO_ROOT, Ran, invoke_sync
from tests.support.evidence import run_unguarded_sqlite

PLAN = SagaInput(plan=[ToolCall(tool="charge_card", args={"amount": 100, "currency": "EUR"})])


@asynccontextmanager
async def plugin_worker(
    env: WorkflowEnvironment, store: JournalStore, toolbox: Toolbox, queue: str, key: LogKeyChoice
) -> AsyncIterator[None]:
    """The README's worker.py: SagacityPlugin on the client, a plain Worker from it."""
    plugin = SagacityPlugin(store=store, toolbox=toolbox, register_attributes=False, log_key=key)
    config = env.client.config()
    config["plugins"] = [plugin]
    client = Client(**config)
    async with Worker(client, task_queue=queue):
        yield


@asynccontextmanager
async def app_worker(
    env: WorkflowEnvironment, store: JournalStore, toolbox: Toolbox, queue: str, key: LogKeyChoice
) -> AsyncIterator[None]:
    async with new_worker(env.client, store=store, toolbox=toolbox, task_queue=queue, log_key=key):
        yield


BUILDERS: dict[str, Callable[..., AbstractAsyncContextManager[None]]] = {
    "plugin": plugin_worker,
    "new_worker": app_worker,
}


async def run_sagas(
    env: WorkflowEnvironment,
    tmp_path: Path,
    builder: str,
    count: int,
    key: LogKeyChoice = DATA_HOME_KEY,
) -> list[str]:
    """`count` sagas on a worker built by `builder`, journaled where the quick start
    journals (the data home's default journal)."""
    store = open_store(default_journal_url())
    queue = f"key-{uuid.uuid4().hex[:8]}"
    ids = [f"{builder}-{uuid.uuid4().hex[:6]}-{i}" for i in range(count)]
    toolbox = Toolbox.build(Shop(tmp_path / "shop.db"))
    try:
        async with BUILDERS[builder](env, store, toolbox, queue, key):
            for saga_id in ids:
                handle = await env.client.start_workflow(
                    "AgentSaga", PLAN, id=saga_id, task_queue=queue, result_type=SagaResult
                )
                await handle.result()
    finally:
        store.close()
    return ids


async def cli(*args: str, **env: str) -> Ran:
    """`sagacity ARGS` with the defaults a user has: only the data home (the test's)."""
    return await asyncio.to_thread(invoke_sync, list(args), env)


def cut_tail(saga_id: str) -> None:
    """Delete the saga's last entry, as the database's owner can (guards dropped)."""
    run_unguarded_sqlite(
        sqlite_path(default_journal_url()),
        [
            (
                "DELETE FROM journal WHERE saga_id = ? AND seq = "
                "(SELECT MAX(seq) FROM journal WHERE saga_id = ?)",
                (saga_id, saga_id),
            )
        ],
    )


@pytest.mark.temporal
@pytest.mark.parametrize("builder", sorted(BUILDERS))
async def test_a_worker_built_with_defaults_signs_and_a_cut_tail_is_found(
    temporal_env: WorkflowEnvironment, tmp_path: Path, private_data_home: Path, builder: str
) -> None:
    ids = await run_sagas(temporal_env, tmp_path, builder, 3)

    key_file = private_data_home / "log-key.json"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    green = await cli("verify", "--all")
    assert green.code == 0, green.output
    assert "checkpoints of 3 saga(s) (signatures checked with" in green.output
    assert "not_checkpointed" not in green.output

    cut_tail(ids[1])
    one = await cli("verify", ids[1])
    assert one.code == 1, one.output
    assert "truncated" in one.output and "its tail was cut" in one.output
    every = await cli("verify", "--all")
    assert every.code == 1 and f"{ids[1]}: truncated" in every.output, every.output


@pytest.mark.temporal
@pytest.mark.parametrize("builder", sorted(BUILDERS))
async def test_checkpoints_off_by_choice_are_reported_plainly(
    temporal_env: WorkflowEnvironment, tmp_path: Path, private_data_home: Path, builder: str
) -> None:
    ids = await run_sagas(temporal_env, tmp_path, builder, 2, None)
    assert not (private_data_home / "log-key.json").exists()  # no key was made for nothing

    chosen = await cli("verify", "--all", SAGACITY_CHECKPOINTS="off")
    assert chosen.code == 0, chosen.output
    said = " ".join(chosen.output.split())
    assert "NO checkpoints, by choice: the journal was written without them" in said
    assert "a cut tail, a deleted saga or a chain rewritten" in said
    assert "truncated" not in said and "not_checkpointed" not in said
    in_json = await cli("verify", "--all", "--json", SAGACITY_CHECKPOINTS="off")
    as_json = json.loads(in_json.stdout)
    assert as_json["ok"] and as_json["evidence"]["checkpoints_off_by_choice"] is True

    # Once a keyed worker has run on the data home, an auditor who was not told of the
    # choice is told how to say it, not only that the closes are unsigned (once they are
    # older than the window in which a checkpoint may still be on its way).
    data_home_log_key()
    unsaid = await cli("verify", ids[0], SAGACITY_CHECKPOINT_PENDING_SECONDS="0")
    assert unsaid.code == 1
    assert "not_checkpointed" in unsaid.output
    assert "SAGACITY_CHECKPOINTS=off" in " ".join(unsaid.output.split())


def test_the_cli_refuses_a_key_and_no_checkpoints_at_once() -> None:
    ran = invoke_sync(
        ["verify", "--all"], {"SAGACITY_CHECKPOINTS": "off", "SAGACITY_LOG_KEY": "/k.json"}
    )
    assert ran.code != 0
    assert "SAGACITY_CHECKPOINTS is off" in " ".join(ran.output.split())


STARTER = """
import sys, time
from pathlib import Path
go = Path(sys.argv[1])
while not go.exists():
    time.sleep(0.001)
from sagacity.worker._log_keys import worker_log_key
from sagacity.worker._settings import Settings
print(worker_log_key(Settings(), create=True).verifier.encode())
"""


@pytest.mark.parametrize("round_", range(3))
def test_workers_starting_together_share_one_key(tmp_path: Path, round_: int) -> None:
    """Eight first starts at once on one data home: one key, whole, that all of them use."""
    home = tmp_path / "home"
    go = tmp_path / "go"
    env = {**os.environ, "SAGACITY_HOME": str(home), "PYTHONPATH": str(REPO_ROOT)}
    command = [sys.executable, "-c", STARTER, str(go)]
    out = subprocess.PIPE
    starts = [
        subprocess.Popen(command, env=env, stdout=out, stderr=out, text=True) for _ in range(8)
    ]
    go.touch()
    said = [start.communicate(timeout=60) for start in starts]
    assert all(start.returncode == 0 for start in starts), [err for _, err in said]
    assert len({out for out, _ in said}) == 1
    assert [p.name for p in home.iterdir() if "key" in p.name] == ["log-key.json"]
    assert stat.S_IMODE((home / "log-key.json").stat().st_mode) == 0o600
    assert stat.S_IMODE(home.stat().st_mode) == 0o700


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(lambda p: p.write_text("{not json"), id="corrupt"),
        pytest.param(lambda p: p.chmod(0o644), id="readable-by-others"),
        pytest.param(lambda p: p.write_text(json.dumps({"type": "other"})), id="not-a-log-key"),
    ],
)
def test_a_broken_default_key_stops_the_start(
    tmp_path: Path, private_data_home: Path, spoil: Callable[[Path], None]
) -> None:
    """Never a quiet run without checkpoints: the plugin refuses to be built, naming the
    file and how to turn checkpoints off if that is what is meant."""
    data_home_log_key()
    spoil(private_data_home / "log-key.json")
    store = open_store("memory://")
    with pytest.raises(LogKeyFileError, match=r"log-key\.json.*log_key=None"):
        SagacityPlugin(store=store, toolbox=Toolbox.build(Shop(tmp_path / "shop.db")))
    ran = invoke_sync(["verify", "--all"], {})
    assert ran.code != 0 and "log-key.json" in ran.output
