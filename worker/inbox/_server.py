"""Serving the inbox: uvicorn on loopback addresses, inside the caller's event loop.

`serve_inbox` is what `sagacity inbox` runs, and `start_inbox` what `sagacity dev` (and
the tests) run beside their own work: the server runs as a task and stops when told, and
it never takes over the process's signals (the caller owns SIGINT and SIGTERM). Its
sockets are bound first (worker.inbox.listening: both loopback addresses of the port when
the passkey origin is http://localhost:PORT), and only then is the address announced.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from sagacity.stores import open_store
from sagacity.worker._settings import Settings
from sagacity.worker.client._client import connect
from sagacity.worker.client._saga_client import SagaClient
from sagacity.worker.inbox._app import InboxConfig, create_app
from sagacity.worker.inbox._enrollment import enrollment_hint
from sagacity.worker.inbox._listening import InboxStartError, bind_listeners
from sagacity.worker.inbox._security import LOOPBACK_HOSTS, check_bind
from sagacity.worker.inbox._source import InboxSource, SagaSource

__all__ = [
    "DEFAULT_PORT",
    "InboxOptions",
    "InboxStartError",
    "RunningInbox",
    "inbox_config",
    "start_inbox",
]

DEFAULT_PORT = 8200
log = logging.getLogger("sagacity.inbox")


@dataclass(frozen=True)
class InboxOptions:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    allow_remote: bool = False
    origin: str | None = None
    """The address people open, for WebAuthn (default http://localhost:PORT)."""
    temporal_ui: str | None = None
    registry: Path | None = None


class _EmbeddedServer(uvicorn.Server):
    """uvicorn without its signal handlers: the host process decides when it stops."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def inbox_config(options: InboxOptions) -> InboxConfig:
    """The app's configuration for `options`: loopback checked, WebAuthn's relying party
    and origin derived from the address people open."""
    check_bind(options.host, allow_remote=options.allow_remote)
    origin = (options.origin or f"http://localhost:{options.port}").rstrip("/")
    scheme, _, rest = origin.partition("://")
    rp_id = rest.split("/")[0].rsplit(":", 1)[0] if ":" in rest else rest.split("/")[0]
    if scheme not in ("http", "https") or not rp_id:
        raise InboxStartError(f"--origin {origin!r} is not http(s)://HOST[:PORT]")
    if scheme == "http" and rp_id != "localhost":
        raise InboxStartError(
            f"--origin {origin!r}: browsers allow passkeys over http on localhost only; "
            "serve the inbox over https (a reverse proxy) and give that origin"
        )
    return InboxConfig(
        rp_id=rp_id,
        origin=origin,
        hosts=LOOPBACK_HOSTS | {rp_id},
        registry=options.registry,
        https=scheme == "https",
    )


def saga_source_opener(
    settings: Settings, *, temporal_ui: str | None
) -> Callable[[], Awaitable[tuple[InboxSource, Callable[[], Awaitable[None]]]]]:
    """Opens the SagaClient the CLI uses (settings' Temporal and journal) at start-up."""

    async def open_source() -> tuple[InboxSource, Callable[[], Awaitable[None]]]:
        store = open_store(settings.journal_url)
        try:
            temporal = await connect(settings)
        except BaseException:
            store.close()
            raise
        client = SagaClient(temporal, task_queue=settings.task_queue, store=store)

        async def close() -> None:
            store.close()

        return SagaSource(client, temporal_ui=temporal_ui), close

    return open_source


@dataclass
class RunningInbox:
    url: str
    config: InboxConfig
    server: uvicorn.Server
    task: asyncio.Task[None]
    addresses: list[str]
    """Where it listens (127.0.0.1:PORT and [::1]:PORT by default)."""
    notes: list[str]
    """What a person should know about it (no IPv6 loopback on this machine)."""

    async def stop(self) -> None:
        self.server.should_exit = True
        await self.task


@contextlib.asynccontextmanager
async def start_inbox(
    options: InboxOptions,
    *,
    settings: Settings | None = None,
    source: InboxSource | None = None,
) -> AsyncIterator[RunningInbox]:
    """Serve the inbox in this event loop until the block ends: over `source`, or the
    SagaClient and journal `settings` name (opened first, so a Temporal that cannot be
    reached is a clear error before anything listens)."""
    config = inbox_config(options)
    localhost_origin = not config.https and config.origin == f"http://localhost:{options.port}"
    listeners = bind_listeners(options.host, options.port, localhost_origin=localhost_origin)
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(listeners.close)
        if source is None:
            if settings is None:
                raise InboxStartError("start_inbox needs settings or a source")
            opened, close = await saga_source_opener(settings, temporal_ui=options.temporal_ui)()
            stack.push_async_callback(close)
            source = opened
        server = _EmbeddedServer(
            uvicorn.Config(
                create_app(config, source=source),
                log_level="warning",
                access_log=False,
                lifespan="off",
                server_header=False,
            )
        )
        task = asyncio.create_task(server.serve(sockets=listeners.sockets), name="sagacity-inbox")
        while not server.started:
            if task.done():
                raise InboxStartError(f"the inbox could not listen on {listeners.addresses}")
            await asyncio.sleep(0.02)
        for note in listeners.notes:
            log.warning("inbox: %s", note)
        running = RunningInbox(
            config.origin, config, server, task, list(listeners.addresses), list(listeners.notes)
        )
        try:
            yield running
        finally:
            await running.stop()


def listening_line(running: RunningInbox) -> str:
    """Where the inbox listens, for its start-up lines."""
    return "listening on " + " and ".join(running.addresses)


async def serve_inbox(
    options: InboxOptions, settings: Settings, announce: Callable[[str], None]
) -> None:
    """`sagacity inbox`: serve until SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with start_inbox(options, settings=settings) as running:
        announce(f"sagacity inbox: {running.url} ({listening_line(running)}; press Ctrl-C to stop)")
        for note in running.notes:
            announce(f"note: {note}")
        if options.registry is not None:
            announce(enrollment_hint(options.registry))
        await stop.wait()
        announce("stopping…")
