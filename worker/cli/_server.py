"""Long-running commands: `dev` (embedded server, UI and worker), `worker`, `demo`."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

import typer

from sagacity._errors import SagacityError
from sagacity._extras import missing_extra
from sagacity.stores import open_store
from sagacity.worker._settings import Settings
from sagacity.worker.cli._common import (
    global_options,
    journal_option,
    located,
    run,
    settings_of,
    user_errors,
)
from sagacity.worker.cli._output import console, fail, say
from sagacity.worker.client._client import unreachable

ToolsOpt = Annotated[
    str | None, typer.Option("--tools", help="module:attr of the Toolbox to serve")
]


class PortInUseError(SagacityError):
    """The dev server's port (or its UI's) is taken."""


def _port_of(address: str, default: int = 7233) -> int:
    _, _, port = address.rpartition(":")
    return int(port) if port.isdigit() else default


def _check_free(port: int, what: str) -> None:
    # The dev server does not fail when its port is taken, and the client would then
    # silently talk to whatever already listens there: refuse up front instead.
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            raise PortInUseError(
                f"{what} port {port} is in use (another `sagacity dev` or Temporal?); "
                f"pick another with --{ {'UI': 'ui-', 'inbox': 'inbox-'}.get(what, '') }port"
            ) from None


async def run_dev(
    settings: Settings,
    *,
    port: int,
    ui_port: int,
    db_file: Path | None,
    inbox_port: int | None = None,
) -> None:
    """Start the dev server (UI, search attributes), a worker and the web inbox (unless
    `inbox_port` is None); stop them on SIGINT or SIGTERM. The journal and toolbox are
    opened first, so a bad one starts nothing."""
    from sagacity.worker._app import load_toolbox, new_worker
    from sagacity.worker._devserver import start_dev_server
    from sagacity.worker._log_keys import worker_log_key
    from sagacity.worker._quiet_failures import quiet_expected_failures
    from sagacity.worker._run import CHECKPOINTS_OFF, openai_model

    settings.prepare_home()
    store = open_store(settings.journal_url)
    quiet_expected_failures()
    model = None
    try:
        model = openai_model(settings)
        toolbox = load_toolbox(settings.tools)
        log_key = worker_log_key(settings, create=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        env = await start_dev_server(
            ui=True,
            port=port,
            ui_port=ui_port,
            db_file=str(db_file) if db_file else None,
            banner=False,
        )
        try:
            worker = new_worker(
                env.client,
                store=store,
                toolbox=toolbox,
                task_queue=settings.task_queue,
                max_concurrent_activities=settings.max_concurrent_activities,
                max_concurrent_workflow_tasks=settings.max_concurrent_workflow_tasks,
                models={"openai": model} if model is not None else None,
                approvers=settings.approvers,
                log_key=log_key,
                checkpoint_every=settings.checkpoint_every,
            )
            async with (
                worker,
                _dev_inbox(settings, env.client, store, inbox_port=inbox_port, ui_port=ui_port),
            ):
                address = f"127.0.0.1:{port}"
                say(f"Temporal dev server: {address} (namespace default)")
                say(f"Temporal UI: http://127.0.0.1:{ui_port}")
                say(
                    f"worker: task queue {settings.task_queue}, journal {located(store)}, "
                    f"tools {', '.join(toolbox.names())}"
                )
                if settings.approvers:
                    say(f"approver registry {settings.approvers}: only signed decisions count")
                else:
                    say(
                        "approvals are not signed; to bind them to people: `sagacity keys new "
                        "--approver YOU`, `sagacity keys enroll --registry approvers.json ...`, "
                        "then SAGACITY_APPROVERS=approvers.json sagacity dev"
                    )
                if log_key is not None:
                    say(f"checkpoints signed by log {log_key.name}: {log_key.verifier.encode()}")
                else:
                    say(CHECKPOINTS_OFF)
                if settings.temporal_address not in (address, f"localhost:{port}"):
                    say(f"point other commands here: export TEMPORAL_ADDRESS={address}")
                say("press Ctrl-C to stop")
                await stop.wait()
                say("stopping…")
        finally:
            await env.shutdown()
    finally:
        store.close()
        if model is not None:
            await model.aclose()


@contextlib.asynccontextmanager
async def _dev_inbox(
    settings: Settings, client: Any, store: Any, *, inbox_port: int | None, ui_port: int
) -> AsyncIterator[None]:
    """The web inbox beside the dev server, over the same client and journal."""
    if inbox_port is None:
        yield
        return
    from sagacity.worker.client._saga_client import SagaClient
    from sagacity.worker.inbox._enrollment import enrollment_hint
    from sagacity.worker.inbox._server import InboxOptions, listening_line, start_inbox
    from sagacity.worker.inbox._source import SagaSource

    registry = Path(settings.approvers) if settings.approvers else None
    source = SagaSource(
        SagaClient(client, task_queue=settings.task_queue, store=store),
        temporal_ui=f"http://127.0.0.1:{ui_port}",
    )
    options = InboxOptions(port=inbox_port, registry=registry)
    async with start_inbox(options, source=source) as running:
        say(f"approval inbox: {running.url} ({listening_line(running)})")
        for note in running.notes:
            say(f"note: {note}")
        if registry is not None:
            say(enrollment_hint(registry))
        yield


def _inbox_installed() -> None:
    """Fail in one line, before anything starts, if the inbox extra is not installed."""
    try:
        import sagacity.worker.inbox._server  # noqa: F401
    except ModuleNotFoundError as exc:
        hint = missing_extra(exc)
        if hint is None:
            raise
        raise fail(f"{hint}, or run `sagacity dev --no-inbox`") from None


@global_options
def dev(
    ctx: typer.Context,
    port: Annotated[
        int | None, typer.Option(help="frontend port \\[default: from TEMPORAL_ADDRESS]")
    ] = None,
    ui_port: Annotated[int | None, typer.Option(help="UI port \\[default: port + 1000]")] = None,
    db_file: Annotated[
        Path | None, typer.Option(help="persist the server's state in this SQLite file")
    ] = None,
    tools: ToolsOpt = None,
    inbox_port: Annotated[
        int, typer.Option(help="port of the web approval inbox (sagacity inbox)")
    ] = 8200,
    no_inbox: Annotated[bool, typer.Option("--no-inbox", help="do not serve the inbox")] = False,
) -> None:
    """Run a local Temporal dev server with its UI, a worker and the web approval inbox
    (http://localhost:8200), until Ctrl-C.

    The server has sagacity's search attributes registered; its state is in memory unless
    --db-file is given.
    """
    settings = settings_of(ctx, tools=tools)
    with user_errors():  # Temporal's environment configuration may be unusable
        namespace, address = settings.namespace, settings.temporal_address
    if namespace != "default":
        raise fail(
            f"the dev server serves namespace 'default', not {namespace!r}; "
            "unset TEMPORAL_NAMESPACE (or drop --namespace)"
        )
    port = port or _port_of(address)
    ui_port = ui_port or port + 1000
    if not no_inbox:
        _inbox_installed()

    async def main() -> None:
        _check_free(port, "server")
        _check_free(ui_port, "UI")
        if not no_inbox:
            # Both loopback addresses, as the inbox binds them (worker.inbox.listening).
            from sagacity.worker.inbox._listening import check_port

            check_port(inbox_port)
        await run_dev(
            settings,
            port=port,
            ui_port=ui_port,
            db_file=db_file,
            inbox_port=None if no_inbox else inbox_port,
        )

    run(main())


@global_options
def worker(
    ctx: typer.Context,
    tools: ToolsOpt = None,
    workflow: Annotated[
        list[str] | None,
        typer.Option(help="module:Class of a workflow on the saga API to run too (repeatable)"),
    ] = None,
    approvers: Annotated[
        str | None,
        typer.Option(
            help="approver registry file: only decisions signed by its keys count "
            "(overrides SAGACITY_APPROVERS)"
        ),
    ] = None,
) -> None:
    """Run a saga worker until interrupted."""
    from sagacity.worker._run import run_worker

    settings = settings_of(ctx, tools=tools)
    if workflow:
        settings = settings.model_copy(update={"workflows": [*settings.workflows, *workflow]})
    if approvers:
        settings = settings.model_copy(update={"approvers": approvers})

    async def main() -> None:
        try:
            await run_worker(settings)
        except RuntimeError as exc:  # temporalio raises RuntimeError when it cannot connect
            if "connect" not in str(exc).lower():
                raise
            raise fail(unreachable(settings.temporal_address, exc)) from None

    run(main())


@journal_option
def demo(
    ctx: typer.Context,
    keep: Annotated[
        bool,
        typer.Option(
            "--keep",
            "--keep-server",
            help="keep the dev server, its UI and the worker up until Ctrl-C, and print the "
            "UI's address",
        ),
    ] = False,
) -> None:
    """Run four example sagas on an embedded dev server and verify their journals.

    Its files are in sagacity's data home ($SAGACITY_HOME, else ~/.local/share/sagacity);
    the journal is the default one unless SAGACITY_JOURNAL_URL or --journal names another.
    """
    from sagacity.worker._demo import run_demo

    settings = settings_of(ctx)
    code = run(run_demo(settings, keep=keep, console=console))
    raise typer.Exit(code)
