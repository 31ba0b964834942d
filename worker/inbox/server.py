"""Serving the inbox: uvicorn on a loopback address, inside the caller's event loop.

`serve_inbox` is what `sagacity inbox` runs, and `start_inbox` what `sagacity dev` (and
the tests) run beside their own work: the server runs as a task and stops when told, and
it never takes over the process's signals (the caller owns SIGINT and SIGTERM).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from sagacity.errors import SagacityError
from sagacity.stores import open_store
from sagacity.worker.client import connect
from sagacity.worker.inbox.app import InboxConfig, create_app
from sagacity.worker.inbox.enrollment import enrollment_hint
from sagacity.worker.inbox.security import LOOPBACK_HOSTS, check_bind
from sagacity.worker.inbox.source import InboxSource, SagaSource
from sagacity.worker.saga_client import SagaClient
from sagacity.worker.settings import Settings

__all__ = ["DEFAULT_PORT", "InboxOptions", "RunningInbox", "inbox_config", "start_inbox"]

DEFAULT_PORT = 8200


class InboxStartError(SagacityError):
    """The inbox could not start (its port taken, a bad option)."""


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
    _check_free(options.host, options.port)
    async with contextlib.AsyncExitStack() as stack:
        if source is None:
            if settings is None:
                raise InboxStartError("start_inbox needs settings or a source")
            opened, close = await saga_source_opener(settings, temporal_ui=options.temporal_ui)()
            stack.push_async_callback(close)
            source = opened
        server = _EmbeddedServer(
            uvicorn.Config(
                create_app(config, source=source),
                host=options.host,
                port=options.port,
                log_level="warning",
                access_log=False,
                lifespan="off",
                server_header=False,
            )
        )
        task = asyncio.create_task(server.serve(), name="sagacity-inbox")
        while not server.started:
            if task.done():
                raise InboxStartError(
                    f"the inbox could not listen on {options.host}:{options.port}"
                )
            await asyncio.sleep(0.02)
        running = RunningInbox(config.origin, config, server, task)
        try:
            yield running
        finally:
            await running.stop()


def _check_free(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        try:
            sock.bind((host.strip("[]"), port))
        except OSError as exc:
            raise InboxStartError(
                f"the inbox cannot listen on {host}:{port} ({exc.strerror}); pick another "
                "with --port"
            ) from None


async def serve_inbox(
    options: InboxOptions, settings: Settings, announce: Callable[[str], None]
) -> None:
    """`sagacity inbox`: serve until SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with start_inbox(options, settings=settings) as running:
        announce(f"sagacity inbox: {running.url} (press Ctrl-C to stop)")
        if options.registry is not None:
            announce(enrollment_hint(options.registry))
        await stop.wait()
        announce("stopping…")
