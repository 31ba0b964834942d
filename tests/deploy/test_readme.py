"""The README cannot rot: its Python snippets are written to a folder as the files they
name (`# worker.py` on their first line) and run there against the session's dev server
— the worker in the background, then every script — and its shell snippets are parsed
by the real CLI (a misspelt command or option fails here) or checked against the
Makefile. (Shell lines start servers, so they are parsed, not run; the same commands run
for real in tests/cli.)"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment
from typer.testing import CliRunner

from sagacity.worker.cli import app
from tests.exit_crash import finished

from .compose_file import ROOT

README = ROOT / "README.md"
FENCE = re.compile(r"```(\w+)\n(.*?)```", re.S)


def blocks(language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(README.read_text()) if lang == language]


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
    lines = []
    for raw in body.splitlines():
        words = shlex.split(raw, comments=True)
        while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
            words = words[1:]  # VAR=value prefixes
        if words:
            lines.append(words)
    return lines


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
@pytest.mark.timeout(120)
async def test_the_python_snippets_run(temporal_env: WorkflowEnvironment, tmp_path: Path) -> None:
    for name, body in python_files().items():
        (tmp_path / name).write_text(body)
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host,
        "PYTHONUNBUFFERED": "1",
    }
    log_path = tmp_path / "worker.log"
    with log_path.open("w") as log:
        worker = subprocess.Popen(
            [sys.executable, "worker.py"], cwd=tmp_path, env=env, stdout=log, stderr=log
        )
    try:
        deadline = time.monotonic() + 60
        while "worker ready" not in log_path.read_text():
            assert worker.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, "the README's worker never got ready"
            time.sleep(0.1)
        outputs = {}
        for script in ("starter.py", "agent_starter.py"):
            ran = subprocess.run(
                [sys.executable, script],
                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert finished(ran), f"{script}:\n{ran.stderr[-3000:]}"
            outputs[script] = ran.stdout
    finally:
        worker.terminate()
        worker.wait(timeout=20)

    assert (
        "step 2: send_wire_transfer {'iban': 'DE89370400440532013000', 'amount': 5000}"
        in (outputs["starter.py"])
    )
    assert re.search(r"approved at seq \d+; result: paid", outputs["starter.py"])
    assert outputs["agent_starter.py"].strip() == "COMPLETED ['EXECUTED']"
    worked = log_path.read_text()
    assert "charging 5000" in worked and "wiring 5000 to DE89370400440532013000" in worked
    assert "charging 120" in worked and "refunding" not in worked
