"""The global options (`--address`, `--namespace`, `--task-queue`, `--journal`) work before
the command and after it, on every command that uses the settings; written after, an
option wins over the same one written before."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.main import get_command

from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import open_store
from sagacity.tlog._note_keys import NoteSigner
from sagacity.worker.cli._main import app
from tests.support.cli import invoke_sync

NO_TEMPORAL = "127.0.0.1:1"
ELSEWHERE = "127.0.0.1:2"
GLOBAL = ["--address", "--namespace", "--task-queue", "--journal"]
NO_SETTINGS = {
    ("keys", "new"),
    ("keys", "enroll"),
    ("keys", "revoke"),
    ("keys", "list"),
    ("keys", "enroll-code"),
}
"""Commands that read no setting: they take no global option."""


def _commands() -> Iterator[tuple[str, ...]]:
    root = get_command(app)
    assert isinstance(root, typer.core.TyperGroup)
    ctx = typer.Context(root)
    for name, command in root.commands.items():
        if isinstance(command, typer.core.TyperGroup):
            for sub in command.list_commands(ctx):
                yield name, sub
        else:
            yield (name,)


def _options(path: tuple[str, ...]) -> set[str]:
    command = get_command(app)
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    return {opt for p in command.params for opt in getattr(p, "opts", [])}


@pytest.mark.parametrize("path", list(_commands()), ids=" ".join)
def test_every_command_that_reads_settings_takes_the_global_options(
    path: tuple[str, ...],
) -> None:
    options = _options(path)
    if path in NO_SETTINGS or path == ("log", "keygen"):
        assert not options & set(GLOBAL), path
    elif path == ("demo",):
        assert options & set(GLOBAL) == {"--journal"}  # its own server, queue and namespace
    else:
        assert options >= set(GLOBAL), path


def test_address_after_the_command(tmp_path: Path) -> None:
    env = {"TEMPORAL_ADDRESS": ELSEWHERE}
    for args in (
        ["status", "s1", "--address", NO_TEMPORAL],
        ["--address", NO_TEMPORAL, "status", "s1"],
        ["--address", ELSEWHERE, "status", "s1", "--address", NO_TEMPORAL],  # after wins
        ["list", "--json", "--address", NO_TEMPORAL],
    ):
        ran = invoke_sync(args, env)
        assert ran.code == 1, args
        assert f"cannot reach Temporal at {NO_TEMPORAL}" in ran.stderr, (args, ran.stderr)


@pytest.fixture
def journal_file(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/other.db"
    with open_store(url) as store:
        store.append(EntryDraft.new("s-after", Phase.SAGA_OPENED, input={"plan": []}))
    return url


def test_journal_after_the_command(journal_file: str, tmp_path: Path) -> None:
    missing = f"sqlite:///{tmp_path}/missing.db"
    verifier = NoteSigner.generate("acme/log").verifier.encode()
    for args in (
        ["journal", "s-after", "--journal", journal_file],
        ["--journal", journal_file, "journal", "s-after"],
        ["--journal", missing, "journal", "s-after", "--journal", journal_file],
        ["verify", "s-after", "--journal", journal_file],
        ["log", "prove", "s-after", "--journal", journal_file, "--log-key", verifier],
    ):
        ran = invoke_sync(args, {})
        assert f"{tmp_path}/other.db" in ran.output, (args, ran.output)
        assert "missing.db" not in ran.output
    shown = invoke_sync(["journal", "s-after", "--journal", journal_file, "--json"], {})
    assert shown.code == 0 and '"SAGA_OPENED"' in shown.stdout


def test_task_queue_and_namespace_after_the_command() -> None:
    ran = invoke_sync(
        ["start", "--goal", "g", "--task-queue", "q1", "--namespace", "nowhere"],
        {"TEMPORAL_ADDRESS": NO_TEMPORAL},
    )
    # refused before connecting (no model), but the options parsed after the command
    assert ran.code == 1 and "no model provider configured" in ran.stderr
    unknown = invoke_sync(["status", "s1", "--no-such-option"], {})
    assert unknown.code == 2  # still a usage error
