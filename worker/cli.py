"""The `sagacity` command line: worker, dev server, demo.

User errors print one line and exit non-zero; no tracebacks for things a user can fix.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated

import typer
from rich.console import Console

from sagacity.errors import SagacityError
from worker.settings import Settings

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Safe real-world actions for AI agents."
)
console = Console(width=None if sys.stdout.isatty() else 120)
err = Console(stderr=True)


def fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


@app.command()
def worker(
    tools: Annotated[str | None, typer.Option(help="module:attr of the Toolbox to serve")] = None,
    journal: Annotated[
        str | None, typer.Option(help="journal URL (overrides SAGACITY_JOURNAL_URL)")
    ] = None,
    task_queue: Annotated[str | None, typer.Option(help="task queue")] = None,
) -> None:
    """Run a saga worker until interrupted."""
    from worker.run import run_worker

    overrides = {"tools": tools, "journal_url": journal, "task_queue": task_queue}
    settings = Settings().model_copy(update={k: v for k, v in overrides.items() if v})
    try:
        asyncio.run(run_worker(settings))
    except SagacityError as exc:
        raise fail(str(exc)) from None
    except RuntimeError as exc:  # temporalio raises RuntimeError when it cannot connect
        raise fail(f"cannot reach Temporal at {settings.temporal_address}: {exc}") from None


@app.command()
def demo(
    keep_server: Annotated[
        bool, typer.Option("--keep-server", help="keep the dev server and UI up")
    ] = False,
) -> None:
    """Run three example sagas on an embedded dev server and verify their journals."""
    from worker.demo import run_demo

    try:
        code = asyncio.run(run_demo(keep_server=keep_server, console=console))
    except SagacityError as exc:
        raise fail(str(exc)) from None
    raise typer.Exit(code)


def main() -> None:
    app(prog_name="sagacity")


if __name__ == "__main__":
    main()
