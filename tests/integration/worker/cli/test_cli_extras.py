"""A plain `pip install sagacity` has none of the extras: a command that needs one says
which to install, in one line, instead of a traceback about a module the user never
heard of (issue 36).

Each run is a real `sagacity` subprocess in which the extra's module cannot be
imported: a meta-path finder, installed before the CLI starts, refuses it as a missing
module would be refused. Nothing in the CLI is mocked.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.worker.cli.test_cli_errors import assert_one_line_error
from tests.support.cli import Ran, cli_env

pytestmark = pytest.mark.timeout(120)

WITHOUT = """
import importlib.abc, sys

class Uninstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == {blocked!r} or name.startswith({blocked!r} + "."):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Uninstalled())
sys.argv = ["sagacity", *{args!r}]
from sagacity.worker.cli import main
main()
"""


def sagacity_without(blocked: str, *args: str, cwd: Path) -> Ran:
    """`sagacity ARGS` with the module `blocked` (and its submodules) not installed."""
    proc = subprocess.run(
        [sys.executable, "-c", WITHOUT.format(blocked=blocked, args=list(args))],
        env=cli_env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return Ran(proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.parametrize("blocked", ["jinja2", "starlette", "uvicorn"])
def test_inbox_without_the_inbox_extra_names_it(blocked: str, tmp_path: Path) -> None:
    ran = sagacity_without(blocked, "inbox", cwd=tmp_path)
    assert_one_line_error(ran, "pip install 'sagacity[inbox]'", repr(blocked))


def test_dev_without_the_inbox_extra_names_it_before_starting_anything(tmp_path: Path) -> None:
    ran = sagacity_without("jinja2", "dev", "--port", "1", cwd=tmp_path)
    assert_one_line_error(ran, "pip install 'sagacity[inbox]'", "--no-inbox")


AGENTS_PLUGIN = "sagacity.contrib.openai_agents:SagaAgentsPlugin"


@pytest.mark.parametrize(
    ("blocked", "spec", "extra"),
    [
        ("mcp", "sagacity.contrib.mcp:McpToolset", "mcp"),
        ("pydantic_ai", "sagacity.contrib.pydantic_ai:SagaToolset", "pydantic-ai"),
        ("temporalio.openai_agents", AGENTS_PLUGIN, "openai-agents"),
    ],
)
def test_a_toolbox_of_an_extra_not_installed_names_the_extra(
    blocked: str, spec: str, extra: str, tmp_path: Path
) -> None:
    ran = sagacity_without(blocked, "worker", "--tools", spec, cwd=tmp_path)
    assert_one_line_error(ran, f"pip install 'sagacity[{extra}]'")
