"""Where a `sagacity` command's words go: data on stdout (`say`, `print_json`, `console`),
everything else on stderr (`note`, `fail`, `err`), so `sagacity ... --json | jq` reads
the data alone.

Every line is escaped on its way out (sagacity.text): a saga id, a tool's text or a
reason cannot start a forged line or act on the terminal. Most commands need these and
the options and settings of worker.cli._common, which uses `fail` for its own errors.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from sagacity.text._terminal_safe import json_safe, printable
from sagacity.text._visible import visible

console = Console(width=None if sys.stdout.isatty() else 120)
err = Console(stderr=True)

EXIT_ERROR = 1


def fail(message: str, code: int = EXIT_ERROR) -> typer.Exit:
    """Print `message` as one line on stderr; return the Exit to raise."""
    text = visible(" ".join(message.split()))  # one line, whatever the message carried
    err.print(f"[bold red]error:[/] {escape(text)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def say(message: str) -> None:
    """A plain line on stdout: user data is never read as rich markup, and whatever a
    saga id, a tool, a client identity or a reason carried is escaped (worker.
    terminal_safe), so it cannot start a forged line or act on the terminal."""
    console.print(printable(message), markup=False, highlight=False, soft_wrap=True)


def note(message: str) -> None:
    """A plain line on stderr: hints and progress that must not mix with stdout's data
    (escaped as `say` is)."""
    err.print(printable(message), markup=False, highlight=False, soft_wrap=True)


def print_json(value: Any) -> None:
    """Data as JSON on stdout, alone: what every `--json` prints (dates as ISO text)."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=_json_default)
    sys.stdout.write(json_safe(text))  # a tool's text cannot act on the terminal
    sys.stdout.write("\n")
    sys.stdout.flush()


def _json_default(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return str(value)
