"""The README (and the reference pages its snippets moved to) cannot rot: their Python
snippets are written to a folder as the files they name (`# worker.py` on their first line)
and run there against the session's dev server — the worker in the background, then every
script — and their shell snippets are parsed by the real CLI (a misspelt command or option
fails here), checked against the Makefile, install an extra pyproject declares, or run a
snippet's file. (Shell lines start servers, so they are parsed, not run; the same commands
run for real in tests/integration/worker/cli. The quick start's `pending` and `approve`
lines run here.)"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment
from typer.testing import CliRunner, Result

from sagacity.worker.cli._main import app
from tests.support.evidence import run_unguarded_sqlite
from tests.support.exit_crash import finished
from tests.system.deploy.compose_file import ROOT

README = ROOT / "README.md"
PYPROJECT = (ROOT / "pyproject.toml").read_text()
PAGES = [README] + [
    ROOT / "docs" / f"{name}.md"
    for name in ("cli", "approvals", "needs-human", "evidence", "configuration")
]
"""The README and the pages its reference moved to, in reading order (the jq lines'
order, README first, is the order test_the_python_snippets_run reads their outputs in)."""
FENCE = re.compile(r"```(\w+)\n(.*?)```", re.S)


def blocks(language: str) -> list[str]:
    return [
        body for page in PAGES for lang, body in FENCE.findall(page.read_text()) if lang == language
    ]


def python_files() -> dict[str, str]:
    files: dict[str, str] = {}
    for body in blocks("python"):
        first = body.splitlines()[0]
        assert re.fullmatch(r"# [\w/]+\.py", first), f"a Python snippet names no file: {first!r}"
        files[first[2:]] = body
    return files


def test_every_python_snippet_is_a_named_file() -> None:
    assert set(python_files()) >= {"tools.py", "workflows.py", "worker.py", "starter.py"}


def _commands(body: str) -> list[list[str]]:
    """Each line's command words; of a pipeline into jq, the command before the pipe
    (the jq part runs for real in test_the_python_snippets_run)."""
    lines = []
    for raw in body.splitlines():
        words = shlex.split(raw, comments=True)
        while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
            words = words[1:]  # VAR=value prefixes
        if "|" in words:
            assert words[words.index("|") + 1] == "jq", f"an unchecked pipeline: {raw}"
            words = words[: words.index("|")]
        if words:
            lines.append(words)
    return lines


def jq_pipelines() -> list[str]:
    return [line for body in blocks("sh") for line in body.splitlines() if "| jq " in line]


def _parse(args: list[str]) -> None:
    """Parse a `sagacity ...` command line as the CLI would, without running it: with
    `--help` appended, the CLI checks the command and every option before it, then
    prints the help instead of running (a misspelt one exits 2)."""
    ran = CliRunner().invoke(app, [*args, "--help"])
    assert ran.exit_code == 0, f"sagacity {shlex.join(args)}: {ran.output[-2000:]}"


@pytest.mark.parametrize(
    "words", [w for body in blocks("sh") for w in _commands(body)], ids=lambda w: " ".join(w)
)
def test_shell_lines_parse(words: list[str]) -> None:
    if words[0] == "make":
        assert re.search(rf"^{words[1]}:", (ROOT / "Makefile").read_text(), re.M), words
        return
    if words[:2] == ["pip", "install"]:  # the quick start's install: extras pyproject has
        spec = re.fullmatch(r"(.+)\[([\w,-]+)\]", words[2])
        assert spec and len(words) == 3, words
        extras = re.search(r"^\[project\.optional-dependencies\]\n(.*?)^\[", PYPROJECT, re.M | re.S)
        assert extras, "pyproject.toml declares no extras"
        for extra in spec[2].split(","):
            assert re.search(rf"^{extra} = \[", extras[1], re.M), f"no extra {extra!r}"
        return
    if words[0] == "python" and words[1].endswith(".py"):  # a snippet's file, run below
        assert words[1] in python_files(), words
        return
    if words[:3] == ["python", "-m", "sagacity.worker"]:
        words = ["sagacity", *words[3:]]
    assert words[0] == "sagacity", f"an unchecked shell line: {words}"
    _parse(words[1:])


def test_the_parser_refuses_a_misspelt_option() -> None:
    with pytest.raises(AssertionError, match="No such option"):
        _parse(["worker", "--tool", "x:y"])
    with pytest.raises(AssertionError, match="No such command"):
        _parse(["wrker"])


@pytest.mark.temporal
@pytest.mark.timeout(180)
async def test_the_python_snippets_run(
    temporal_env: WorkflowEnvironment, tmp_path: Path, private_data_home: Path
) -> None:
    """Every script, then each again as a person would re-run it: a re-run finds its saga
    (never a second run under its id), a refused approver leaves the payout waiting, and
    `sagacity status` and `journal` show the sagas from another folder."""
    for name, body in python_files().items():
        (tmp_path / name).write_text(body)
    address = temporal_env.client.service_client.config.target_host
    env = {**os.environ, "TEMPORAL_ADDRESS": address, "PYTHONUNBUFFERED": "1"}
    log_path = tmp_path / "worker.log"
    with log_path.open("w") as log:
        worker = subprocess.Popen(
            [sys.executable, "worker.py"], cwd=tmp_path, env=env, stdout=log, stderr=log
        )

    def script(*args: str) -> str:
        ran = subprocess.run(
            [sys.executable, *args],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert finished(ran), f"{args}:\n{ran.stderr[-3000:]}"
        return ran.stdout

    try:
        deadline = time.monotonic() + 60
        while "worker ready" not in log_path.read_text():
            assert worker.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, "the README's worker never got ready"
            time.sleep(0.1)
        first = script("starter.py")
        again = script("starter.py")
        refused = script("starter.py", "payout-7", "bob@example.com")
        # The quick start's step 5 as written: the payout bob could not approve is listed
        # pending, and alice approves it from the CLI (answering its question).
        cli_env = {"TEMPORAL_ADDRESS": address}
        pending = await _cli(_readme_line("sagacity pending "), cli_env)
        approved = await _cli(_readme_line("sagacity approve payout-7 "), cli_env, "y\n")
        then = script("starter.py", "payout-7")
        agent = script("agent_starter.py")
        agent_again = script("agent_starter.py")
    finally:
        worker.terminate()
        worker.wait(timeout=20)

    assert "step 2: send_wire_transfer {'iban': 'DE89370400440532013000', 'amount': 5000}" in first
    assert re.search(r"approved at seq \d+\nresult: paid", first)
    assert again.splitlines() == [
        "payout-1042 was started before",
        "saga 'payout-1042' has finished (COMPLETED); nothing is pending",
        "result: paid",
    ]
    assert re.search(r"^refused \(\w+\): .*bob@example\.com", refused.splitlines()[-1])
    assert pending.exit_code == 0 and "payout-7" in pending.stdout, pending.output
    assert "send_wire_transfer" in pending.stdout and "payout-1042" not in pending.stdout
    assert (
        approved.exit_code == 0 and "as alice@example.com: journaled APPROVED" in approved.output
    ), approved.output
    assert then.splitlines() == [
        "payout-7 was started before",
        "saga 'payout-7' has finished (COMPLETED); nothing is pending",
        "result: paid",
    ]
    assert agent.strip() == "COMPLETED ['EXECUTED']"
    assert agent_again.splitlines() == ["agent-1 was started before", "COMPLETED ['EXECUTED']"]
    worked = log_path.read_text()
    assert worked.count("charging 5000") == 2 and worked.count("wiring 5000") == 2
    assert worked.count("charging 120") == 1 and "refunding" not in worked

    # The worker journaled into the data home, where the CLI looks from any folder.
    cli = {"TEMPORAL_ADDRESS": address}
    status = await asyncio.to_thread(
        CliRunner().invoke, app, ["status", "payout-1042", "--json"], env=cli
    )
    assert status.exit_code == 0, status.output
    shown = json.loads(status.stdout)
    assert shown["execution_status"] == "COMPLETED" and shown["status"] == "COMPLETED"
    assert "completed with a result of its own" in shown["remark"]  # not an AgentSaga's
    journal = await asyncio.to_thread(CliRunner().invoke, app, ["journal", "payout-1042"], env=cli)
    assert journal.exit_code == 0 and "SAGA_CLOSED" in journal.stdout, journal.output
    assert f"journal: {private_data_home}/journal.db" in journal.stderr
    assert not (tmp_path / "journal.db").exists()

    # The README's jq lines, run as written on the export of these sagas.
    bin_dir = str(Path(sys.executable).parent)
    shell = {**env, "PATH": f"{bin_dir}:{os.environ['PATH']}", **cli}
    outputs = []
    for line in jq_pipelines():
        ran = await asyncio.to_thread(
            subprocess.run,
            ["bash", "-o", "pipefail", "-c", line],
            cwd=tmp_path, env=shell, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert ran.returncode == 0, f"{line}:\n{ran.stderr[-2000:]}"
        outputs.append(ran.stdout)
    values, closes = outputs
    rows = [json.loads(row) for row in values.splitlines()]
    assert [r[2] for r in rows if r[1] == "EXECUTED"] == [5000, 5000]  # charge, wire
    assert {r[3] for r in rows if r[1] == "APPROVED"} == {"alice@example.com"}
    assert "payout-1042 COMPLETED" in closes.splitlines()
    assert "agent-1 COMPLETED" in closes.splitlines()

    # Evidence is on by default (issue 36): the worker signed checkpoints with the data
    # home's key (never printing its private half), so its sagas verify green, an export
    # verifies offline, and a cut tail is found.
    key = json.loads((private_data_home / "log-key.json").read_text())
    assert key["private_key"] not in worked
    verified = await _cli(["verify", "--all"], cli)
    assert verified.exit_code == 0, verified.output
    assert "checkpoints of 3 saga(s) (signatures checked with" in verified.output
    export = tmp_path / "payout-7.jsonl"
    exported = await _cli(["export", "payout-7", "--out", str(export)], cli)
    assert exported.exit_code == 0, exported.output
    offline = await _cli(["verify-file", str(export)], cli)
    assert offline.exit_code == 0, offline.output
    run_unguarded_sqlite(
        private_data_home / "journal.db",
        [
            (
                "DELETE FROM journal WHERE saga_id = ? AND seq = "
                "(SELECT MAX(seq) FROM journal WHERE saga_id = ?)",
                ("payout-7", "payout-7"),
            )
        ],
    )
    cut = await _cli(["verify", "payout-7"], cli)
    assert cut.exit_code == 1 and "payout-7: truncated" in cut.output, cut.output


async def _cli(args: list[str], env: dict[str, str], answer: str | None = None) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, app, args, input=answer, env=env)


def _readme_line(start: str) -> list[str]:
    """The arguments of the first shell line of the pages that starts so (the README's, read
    first), without `sagacity`."""
    found = [w for body in blocks("sh") for w in _commands(body) if shlex.join(w).startswith(start)]
    assert found, start
    return found[0][1:]
