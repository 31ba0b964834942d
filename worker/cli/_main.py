"""The `sagacity` command line (also `python -m sagacity.worker`).

Commands are grouped by concern: sagas (worker.cli_sagas), approvals
(worker.cli_approvals), the journal (worker.cli_journal), servers (worker.cli_server).
Configuration comes from SAGACITY_ environment variables (worker.settings), overridden by
the global options, which go before or after the command (worker.cli_common). User
errors print one line and exit non-zero; no tracebacks for things a user can fix.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from sagacity.worker.cli import _approvals as cli_approvals
from sagacity.worker.cli import _ended as cli_ended
from sagacity.worker.cli import _inbox as cli_inbox
from sagacity.worker.cli import _journal as cli_journal
from sagacity.worker.cli import _keys as cli_keys
from sagacity.worker.cli import _log as cli_log
from sagacity.worker.cli import _resolutions as cli_resolutions
from sagacity.worker.cli import _sagas as cli_sagas
from sagacity.worker.cli import _server as cli_server
from sagacity.worker.cli import _start as cli_start
from sagacity.worker.cli import _verify as cli_verify
from sagacity.worker.cli import _verify_file as cli_verify_file
from sagacity.worker.cli._common import (
    AddressOpt,
    CliState,
    JournalOpt,
    NamespaceOpt,
    TaskQueueOpt,
    err,
    fail,
)

__all__ = ["app", "err", "fail", "main"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=False,
    help="Safe real-world actions for AI agents: durable sagas on Temporal.",
    pretty_exceptions_show_locals=False,  # locals would print settings, API keys included
)


@app.callback(invoke_without_command=True)
def _global_options(
    ctx: typer.Context,
    address: AddressOpt = None,
    namespace: NamespaceOpt = None,
    task_queue: TaskQueueOpt = None,
    journal: JournalOpt = None,
    tools: Annotated[
        str | None,
        typer.Option(help="with no command: run a worker serving this module:attr toolbox"),
    ] = None,
) -> None:
    """Run `sagacity --tools module:attr` to serve a toolbox, or a command below."""
    ctx.obj = CliState()
    ctx.obj.take(
        {"address": address, "namespace": namespace, "task_queue": task_queue, "journal": journal}
    )
    if ctx.invoked_subcommand is None:
        if tools is None:
            typer.echo(ctx.get_help())
            raise typer.Exit(0)
        cli_server.worker(ctx, tools=tools)


app.command()(cli_server.dev)
app.command()(cli_server.worker)
app.command()(cli_start.start)
app.command()(cli_sagas.status)
app.command("list")(cli_sagas.list_cmd)
app.command()(cli_sagas.pending)
app.command()(cli_approvals.approve)
app.command()(cli_approvals.reject)
app.command()(cli_sagas.cancel)
app.command()(cli_resolutions.dirty)
app.command()(cli_resolutions.resolve)
app.command("retry-compensation")(cli_resolutions.retry_compensation)
app.command()(cli_resolutions.close)
app.command()(cli_ended.compensate)
app.command()(cli_journal.journal)
app.command()(cli_verify.verify)
app.command()(cli_journal.export)
app.command("verify-file")(cli_verify_file.verify_file)
app.command()(cli_server.demo)
app.command()(cli_inbox.inbox)
app.add_typer(cli_keys.keys, name="keys")
app.add_typer(cli_log.log, name="log")


def main() -> None:
    """Run the CLI and leave without interpreter finalization once Temporal was used.

    Processes that used the Temporal SDK can crash while the interpreter finalizes, after
    all their work is done (PyGILState_Release, sdk-python issue 300), printing a fatal
    error under a clean result. Everything the CLI starts is stopped before its command
    returns, so it flushes its output and exits with the command's code directly.
    """
    try:
        app(prog_name="sagacity")
        code = 0
    except SystemExit as exc:  # how click ends every run, success included
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    if "temporalio" not in sys.modules:
        sys.exit(code)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
