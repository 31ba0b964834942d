"""The worker's MCP client session: opened at start, reopened when lost, closed at stop.

One session per server, shared by every activity of the worker (JSON-RPC requests are
multiplexed). The session lives in a task of its own: anyio's transports (a stdio
server's process, an HTTP stream) must be entered and left by one task, and a reconnect
asked for by an activity must not tie the new server process to that activity's task.

A call is classified by what is known about its effect:

- the server cannot be reached before the request is written: McpConnectionError
  (nothing was sent; the step fails and the saga compensates);
- the tool is no longer listed as it was at start: McpToolChangedError (nothing sent);
- the server answers with `isError` or a protocol error: the step FAILED (McpToolError);
- the connection is lost, or the answer is not a tool result, after the request went
  out: ToolOutcomeUnknownError — the step is UNKNOWN and a person settles it, because
  the effect may have happened and must not go uncompensated.

Every call re-reads the tool's definition first (one tools/list round trip): that works
with every protocol version, needs no notifications, and means a call approved hours
ago is sent only if the tool is still the one that was approved.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    CallToolRequest,
    CallToolRequestParams,
    CallToolResult,
    InputRequiredResult,
    Tool,
)
from pydantic import TypeAdapter

from sagacity._errors import ToolOutcomeUnknownError

from ._errors import McpConnectionError, McpToolChangedError, McpToolError

log = logging.getLogger("sagacity.contrib.mcp")

ServerAddress = StdioServerParameters | str
"""A stdio server to start (its command), or the URL of a streamable HTTP server."""
RELEASE_TIMEOUT = 15.0
"""Seconds a session has to close (the stdio transport's own shutdown takes at most ~6)."""
MAX_LIST_PAGES = 100
"""tools/list pages read at most: a paginator that never ends cannot hang a worker."""
_ANSWER: TypeAdapter[CallToolResult | InputRequiredResult] = TypeAdapter(
    CallToolResult | InputRequiredResult
)


def describe(server: object) -> str:
    """A short name for a server in messages, before it has said its own."""
    if isinstance(server, StdioServerParameters):
        return " ".join([server.command, *server.args])[:120]
    return str(server)[:120]


def same_definition(a: Tool, b: Tool) -> bool:
    """Whether two listings of a tool take and give the same thing."""
    return (a.name, a.input_schema, a.output_schema) == (b.name, b.input_schema, b.output_schema)


@dataclass
class _Held:
    """One open session and the task that holds it open."""

    client: Client
    task: asyncio.Task[None]
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    lost: bool = False


class McpConnection:
    """A reconnecting client session to one MCP server."""

    def __init__(
        self, server: Any, *, name: str | None = None, connect_timeout: float = 30.0
    ) -> None:
        self.server = server
        self.name = name or describe(server)
        self.connect_timeout = connect_timeout
        self._held: _Held | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self.connects = 0
        """How many sessions were opened (1 + reconnects), for logs and tests."""

    # ---- lifecycle ---------------------------------------------------------------------

    async def open(self) -> None:
        """Open the first session; the server's own name replaces the default one."""
        held = await self._connect()
        info = held.client.server_info
        if info is not None and info.name and self.name == describe(self.server):
            self.name = info.name

    async def close(self) -> None:
        """Close the session (a stdio server's process is stopped and reaped)."""
        self._closed = True
        async with self._lock:
            held, self._held = self._held, None
            if held is not None:
                await self._release(held)

    async def _connect(self) -> _Held:
        client = Client(self.server, cache=None)
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        stop = asyncio.Event()

        async def hold() -> None:
            try:
                async with client:
                    ready.set_result(None)
                    await stop.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)
                    return
                raise

        task = asyncio.create_task(hold(), name=f"mcp session {self.name}")
        held = _Held(client, task, stop)
        try:
            async with asyncio.timeout(self.connect_timeout):
                await asyncio.shield(ready)
        except BaseException as exc:
            await self._release(held)
            if isinstance(exc, Exception):
                raise McpConnectionError(
                    f"cannot connect to MCP server {self.name!r}: {type(exc).__name__}: {exc}"
                ) from exc
            raise
        self._held = held
        self.connects += 1
        return held

    async def _release(self, held: _Held) -> None:
        # The holder leaves `async with client` itself, so the transport's shutdown (close
        # stdin, wait, then kill the process tree) runs in the task that entered it.
        held.stop.set()
        done, _ = await asyncio.wait({held.task}, timeout=RELEASE_TIMEOUT)
        if not done:
            held.task.cancel()
            await asyncio.wait({held.task})
        if not held.task.cancelled() and held.task.exception() is not None:
            # A session that died with its server is closed all the same.
            log.debug("MCP session %s ended with %r", self.name, held.task.exception())

    async def _session(self, *, fresh: bool = False) -> Client:
        """The open session; a new one when the last was lost (or `fresh` is asked)."""
        async with self._lock:
            if self._closed:
                raise McpConnectionError(f"the connection to MCP server {self.name!r} is closed")
            held = self._held
            if held is None or held.lost or held.task.done() or fresh:
                if held is not None:
                    self._held = None
                    await self._release(held)
                log.warning("reconnecting to MCP server %s", self.name)
                held = await self._connect()
            return held.client

    def _lost(self, client: Client) -> None:
        if self._held is not None and self._held.client is client:
            self._held.lost = True

    # ---- requests ----------------------------------------------------------------------

    async def list_tools(self) -> list[Tool]:
        """Every tool the server lists now (all pages). A session found lost is reopened
        once; McpConnectionError if the server still cannot be reached."""
        client = await self._session()
        try:
            return await self._list(client)
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise McpConnectionError(
                    f"MCP server {self.name!r} refused tools/list: {exc.message}"
                ) from exc
            self._lost(client)
        client = await self._session()
        try:
            return await self._list(client)
        except MCPError as exc:
            self._lost(client)
            raise McpConnectionError(
                f"MCP server {self.name!r} cannot list its tools: {exc.message}"
            ) from exc

    async def _list(self, client: Client) -> list[Tool]:
        tools: list[Tool] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                return tools
        raise McpConnectionError(
            f"MCP server {self.name!r} lists tools over more than {MAX_LIST_PAGES} pages"
        )

    async def call(
        self, taken: Tool, arguments: dict[str, Any], meta: Mapping[str, Any]
    ) -> CallToolResult:
        """Send one tools/call for `taken` (the definition taken at start) if the server
        still lists it so, and return the server's result (success or isError)."""
        current = {tool.name: tool for tool in await self.list_tools()}.get(taken.name)
        if current is None or not same_definition(current, taken):
            change = "no longer lists it" if current is None else "changed its schema"
            raise McpToolChangedError(
                f"MCP server {self.name!r} {change} since the worker started (tool "
                f"{taken.name!r}); nothing was sent. Restart the worker to serve the new "
                "definition"
            )
        client = await self._session()
        request = CallToolRequest(
            params=CallToolRequestParams(name=taken.name, arguments=arguments, _meta=dict(meta))
        )
        try:
            answer = await client.session.send_request(request, _ANSWER)
        except MCPError as exc:
            if exc.code in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
                self._lost(client)
                raise ToolOutcomeUnknownError(
                    f"the call to MCP tool {taken.name!r} was sent to server {self.name!r} "
                    f"and no answer came back ({exc.message}); whether it took effect is "
                    "unknown"
                ) from exc
            raise McpToolError(
                f"MCP server {self.name!r} refused the call to {taken.name!r}: "
                f"{exc.message} (JSON-RPC error {exc.code})"
            ) from exc
        except Exception as exc:  # after the request went out: nothing can be assumed
            raise ToolOutcomeUnknownError(
                f"the call to MCP tool {taken.name!r} was sent to server {self.name!r} and "
                f"its answer could not be read ({type(exc).__name__}: {exc}); whether it took "
                "effect is unknown"
            ) from exc
        if isinstance(answer, InputRequiredResult):
            raise McpToolError(
                f"MCP tool {taken.name!r} asked for input (elicitation or sampling), which a "
                "saga step cannot give; the call did not complete"
            )
        return answer


__all__ = ["McpConnection", "ServerAddress", "describe", "same_definition"]
