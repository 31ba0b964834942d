"""The embedded journal lives in sagacity's per-user data home, not in the working
directory: a saga journaled by a worker started in one folder is found by `sagacity
journal ID` run from another, and every command that uses the journal names it by its
absolute path. (tests/conftest.py points the data home at a fresh folder per test: no
test touches the real one.)"""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from sagacity._data_home import data_home, embedded_journal_url, ensure_private
from sagacity.worker._settings import Settings
from tests.integration.worker.cli.test_cli_server import process
from tests.support.cli import cli_env, invoke_sync, run_subprocess

RESERVE = {"tool": "reserve_inventory", "args": {"sku": "widget", "qty": 1}}


def test_the_data_home_is_chosen_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/rita")
    assert data_home({}) == Path("/home/rita/.local/share/sagacity")
    assert data_home({"XDG_DATA_HOME": "/data"}) == Path("/data/sagacity")
    # The XDG spec ignores a relative XDG_DATA_HOME.
    assert data_home({"XDG_DATA_HOME": "rel"}) == Path("/home/rita/.local/share/sagacity")
    assert data_home({"SAGACITY_HOME": "/srv/s", "XDG_DATA_HOME": "/data"}) == Path("/srv/s")
    assert data_home({"SAGACITY_HOME": "~/s"}) == Path("/home/rita/s")
    assert data_home({"SAGACITY_HOME": "rel"}) == Path.cwd() / "rel"  # made absolute


def test_the_default_journal_is_in_the_data_home(private_data_home: Path) -> None:
    settings = Settings()
    assert settings.home == private_data_home
    assert settings.journal_url == f"sqlite:///{private_data_home}/journal.db"
    assert settings.journal_url == embedded_journal_url(private_data_home)
    assert settings.embedded_home() == private_data_home
    elsewhere = settings.model_copy(update={"journal_url": "sqlite:///journal.db"})
    assert elsewhere.embedded_home() is None  # an explicit journal is used as given


def test_an_empty_sagacity_home_is_unset(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SAGACITY_HOME", " ")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert Settings().home == tmp_path / "sagacity" == data_home()


def test_the_data_home_is_made_private(tmp_path: Path) -> None:
    home = ensure_private(tmp_path / "a" / "sagacity")
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    home.chmod(0o750)
    ensure_private(home)  # an existing folder is its owner's business
    assert stat.S_IMODE(home.stat().st_mode) == 0o750


def test_the_tests_never_use_the_real_data_home(private_data_home: Path) -> None:
    real = Path.home() / ".local" / "share" / "sagacity"
    assert Settings().home != real and data_home() == private_data_home
    assert cli_env()["SAGACITY_HOME"] == str(private_data_home)


def test_a_missing_default_journal_says_where_it_looked(private_data_home: Path) -> None:
    ran = invoke_sync(["journal", "s1"], {})
    assert ran.code == 1
    assert ran.stderr.strip() == (
        f"error: no journal at {private_data_home}/journal.db (the default, in sagacity's "
        "data home): no worker of this user has written one yet; run `sagacity dev`, or set "
        "SAGACITY_JOURNAL_URL or --journal to the journal the worker writes"
    )
    assert not private_data_home.joinpath("journal.db").exists()  # a reader creates nothing


@pytest.mark.temporal
@pytest.mark.timeout(120)
async def test_a_saga_is_found_from_another_folder(
    temporal_env: WorkflowEnvironment, tmp_path: Path, private_data_home: Path
) -> None:
    """A worker started in one folder with no journal configured; `sagacity journal`,
    `verify` and `export` run from another find the saga and print the journal's path."""
    home = private_data_home / "fresh"  # not there yet: the worker makes it, private
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    env = cli_env(
        SAGACITY_HOME=str(home),
        TEMPORAL_ADDRESS=temporal_env.client.service_client.config.target_host,
        SAGACITY_TASK_QUEUE=f"home-{os.getpid()}-{id(tmp_path):x}",
    )
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([RESERVE]))
    async with process("worker", env=env, cwd=here, ready="sagacity worker:") as (_, lines):
        assert f"journal {home}/journal.db" in "".join(lines)
        started = await run_subprocess("start", "--plan", str(plan), "--wait", env=env, cwd=here)
        assert started.code == 0, started.output
    saga_id = started.stdout.splitlines()[0]
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert (home / "journal.db").exists() and (home / "log-key.json").exists()
    assert (home / "shop.db").exists()  # the example shop too
    assert list(here.iterdir()) == []  # nothing written where the worker was started

    found, verified, exported = await asyncio.gather(  # three readers, side by side
        *(
            run_subprocess(cmd, saga_id, env=env, cwd=there)
            for cmd in ("journal", "verify", "export")
        )
    )
    assert found.code == 0, found.output
    assert "SAGA_CLOSED" in found.stdout
    assert found.stderr.strip() == f"journal: {home}/journal.db"
    assert verified.code == 0, verified.output
    assert f"journal: {home}/journal.db" in verified.stdout
    assert exported.code == 0 and f"(journal: {home}/journal.db)" in exported.stderr
    assert list(there.iterdir()) == []
