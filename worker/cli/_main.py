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
from collections.abc import Callable
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
from sagacity.worker.cli._common import global_options
from sagacity.worker.cli._output import err, fail

__all__ = ["app", "err", "fail", "main"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=False,
    help="Safe real-world actions for AI agents: durable sagas on Temporal.",
    pretty_exceptions_show_locals=False,  # locals would print settings, API keys included
)


@app.callback(invoke_without_command=True)
@global_options  # given here, before the command, they are where `settings_of` looks
def _global_options(
    ctx: typer.Context,
    tools: Annotated[
        str | None,
        typer.Option(help="with no command: run a worker serving this module:attr toolbox"),
    ] = None,
) -> None:
    """Run `sagacity --tools module:attr` to serve a toolbox, or a command below."""
    if ctx.invoked_subcommand is None:
        if tools is None:
            typer.echo(ctx.get_help())
            raise typer.Exit(0)
        cli_server.worker(ctx, tools=tools)


COMMANDS: tuple[Callable[..., None], ...] = (
    cli_server.dev, cli_server.worker, cli_start.start,
    cli_sagas.status, cli_sagas.list_cmd, cli_sagas.pending,
    cli_approvals.approve, cli_approvals.reject, cli_sagas.cancel,
    cli_resolutions.dirty, cli_resolutions.resolve, cli_resolutions.retry_compensation,
    cli_resolutions.close, cli_ended.compensate,
    cli_journal.journal, cli_verify.verify, cli_journal.export, cli_verify_file.verify_file,
    cli_server.demo, cli_inbox.inbox,
)  # fmt: skip
"""Every command, in the order `sagacity --help` lists them. Each is named after its
function (`retry_compensation` is `retry-compensation`), but for `list`, whose function
cannot take the builtin's name."""

for _command in COMMANDS:
    app.command("list" if _command is cli_sagas.list_cmd else None)(_command)
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
