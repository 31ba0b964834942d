"""What a user sees when Temporal or the journal database cannot be reached: one line on
stderr, a non-zero exit code, never a traceback.

Every command is checked in-process (an exception escaping the CLI fails the test), and a
representative few on real subprocesses, exactly as a terminal shows them.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.support.cli import Ran, cli_env, invoke_sync, run_subprocess

pytestmark = pytest.mark.timeout(120)

NO_TEMPORAL = "127.0.0.1:1"
NO_DATABASE = "postgresql://postgres@127.0.0.1:1/x"


def assert_one_line_error(ran: Ran, *expected: str) -> None:
    assert ran.code not in (0, 139), ran  # 139: a crash is not an error message
    assert "Traceback" not in ran.output, ran.output
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1, ran.stderr
    assert lines[0].startswith("error: "), lines[0]
    for text in expected:
        assert text in lines[0], lines[0]


async def _all(cwd: Path, env: dict[str, str], commands: list[list[str]]) -> list[Ran]:
    return list(await asyncio.gather(*(run_subprocess(*cmd, env=env, cwd=cwd) for cmd in commands)))


TEMPORAL_COMMANDS = [
    ["status", "s1"],
    ["list"],
    ["list", "--status", "COMPLETED"],
    ["pending"],
    ["approve", "s1", "--approver", "alice", "--yes"],
    ["reject", "s1", "--reason", "no", "--approver", "alice", "--yes"],
    ["cancel", "s1", "--reason", "customer called", "--actor", "olivia"],
    ["dirty"],
    ["resolve", "s1", "2", "--happened", "--actor", "olivia", "--yes"],
    ["retry-compensation", "s1", "2", "--actor", "olivia", "--yes"],
    ["close", "s1", "--accept", "by hand", "--actor", "olivia", "--yes"],
    ["start", "--plan", "PLAN"],
    ["start", "--goal", "sell a widget", "--model", "m"],  # no model at all: refused earlier
    ["worker"],
]


def _plan(tmp_path: Path) -> str:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([{"tool": "charge_card", "args": {"amount": 1}}]))
    return str(plan)


@pytest.mark.parametrize("command", TEMPORAL_COMMANDS, ids=" ".join)
def test_unreachable_temporal_is_one_line(tmp_path: Path, command: list[str]) -> None:
    env = {
        "TEMPORAL_ADDRESS": NO_TEMPORAL,
        "SAGACITY_JOURNAL_URL": f"sqlite:///{tmp_path}/journal.db",
    }
    args = [_plan(tmp_path) if a == "PLAN" else a for a in command]
    ran = invoke_sync(args, env)
    assert_one_line_error(ran, f"cannot reach Temporal at {NO_TEMPORAL}", "refused")


async def test_unreachable_temporal_in_a_terminal(tmp_path: Path) -> None:
    env = cli_env(
        TEMPORAL_ADDRESS=NO_TEMPORAL,
        SAGACITY_JOURNAL_URL=f"sqlite:///{tmp_path}/journal.db",
    )
    commands = [["status", "s1"], ["start", "--plan", _plan(tmp_path)], ["worker"]]
    for ran in await _all(tmp_path, env, commands):
        assert_one_line_error(ran, f"cannot reach Temporal at {NO_TEMPORAL}", "refused")


def test_the_global_address_option_overrides_the_environment() -> None:
    ran = invoke_sync(["--address", NO_TEMPORAL, "list"], {"TEMPORAL_ADDRESS": "x:7"})
    assert_one_line_error(ran, f"cannot reach Temporal at {NO_TEMPORAL}")


DATABASE_COMMANDS = [
    ["journal", "s1"],
    ["verify", "s1"],
    ["verify", "--all"],
    ["export", "s1"],
    ["export", "--all", "--out", "OUT"],
    ["worker"],  # opens the journal before connecting: no half-started worker
    ["dev", "--port", "1"],  # likewise, before starting any server
]


@pytest.mark.parametrize("command", DATABASE_COMMANDS, ids=" ".join)
def test_unreachable_database_is_one_line(tmp_path: Path, command: list[str]) -> None:
    env = {"SAGACITY_JOURNAL_URL": NO_DATABASE, "TEMPORAL_ADDRESS": NO_TEMPORAL}
    out = tmp_path / "out.jsonl"
    ran = invoke_sync([str(out) if a == "OUT" else a for a in command], env)
    assert_one_line_error(ran, "cannot reach the sagacity journal", "127.0.0.1", "port 1")
    assert not out.exists()


async def test_unreachable_database_in_a_terminal(tmp_path: Path) -> None:
    env = cli_env(SAGACITY_JOURNAL_URL=NO_DATABASE, TEMPORAL_ADDRESS=NO_TEMPORAL)
    commands = [["journal", "s1"], ["verify", "--all"], ["dev", "--port", "1"]]
    for ran in await _all(tmp_path, env, commands):
        assert_one_line_error(ran, "cannot reach the sagacity journal", "port 1")


def test_invalid_settings_are_one_line() -> None:
    ran = invoke_sync(["list"], {"SAGACITY_MAX_CONCURRENT_ACTIVITIES": "lots"})
    assert_one_line_error(ran, "invalid settings", "SAGACITY_MAX_CONCURRENT_ACTIVITIES")


def test_an_unsupported_journal_url_is_one_line() -> None:
    ran = invoke_sync(["verify", "--all"], {"SAGACITY_JOURNAL_URL": "mysql://db/x"})
    assert_one_line_error(ran, "unsupported journal URL 'mysql://db/x'")


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["resolve", "s1", "2", "--actor", "olivia"], "--happened or --did-not-happen"),
        (
            ["resolve", "s1", "2", "--did-not-happen", "--result", "{}", "--actor", "o"],
            "--result goes with --happened",
        ),
        (
            ["resolve", "s1", "2", "--happened", "--result", "{nope", "--actor", "o"],
            "--result is not JSON",
        ),
        (["resolve", "s1", "2", "--happened"], "--key KEY_FILE (signed) or --actor NAME"),
        (
            [
                "resolve",
                "s1",
                "2",
                "--happened",
                "--result",
                '{"n": 12345678901234567890}',
                "--actor",
                "o",
            ],
            "write such numbers as strings",
        ),
        (
            ["resolve", "s1", "2", "--happened", "--result", "NaN", "--actor", "o"],
            "write such numbers as strings",
        ),
        (["close", "s1", "--accept", "  ", "--actor", "o"], "--accept needs a reason"),
        (["retry-compensation", "s1", "2", "--key", "/nonexistent.key"], "nonexistent.key"),
    ],
)
def test_resolution_commands_refuse_bad_input_before_sending(
    command: list[str], expected: str
) -> None:
    ran = invoke_sync(command, {"TEMPORAL_ADDRESS": NO_TEMPORAL})
    assert_one_line_error(ran, expected)
    assert "cannot reach Temporal" not in ran.stderr  # refused before connecting
