"""McpToolset: the tools of one MCP server as a sagacity Toolbox, for a worker's lifetime.

    async with McpToolset(shop_server, tools={...}) as shop:
        worker = new_worker(client, store=store, toolbox=shop.toolbox, task_queue="orders")
        await worker.run()

Entering opens the client session (for a stdio server: starts its process), lists the
tools and checks the mapping against them, so a name that does not resolve fails before
the worker polls a task; leaving closes the session (and stops the process). The toolbox
is a plain Toolbox: combine it with others as `Toolbox([*mine, *shop.toolbox])`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from sagacity.tools._toolbox import Toolbox

from ._connection import McpConnection, describe
from ._errors import McpMappingError
from ._mapping import MappingPlan, Unmapped, check_mapping, python_compensations
from ._spec import McpToolSpec, compensation_spec

log = logging.getLogger("sagacity.contrib.mcp")


def toolbox_of(plan: MappingPlan, connection: McpConnection) -> Toolbox:
    """The saga tools of a checked mapping, calling through `connection`."""
    specs = []
    for remote in plan.tools:
        undo = None
        if remote.compensation is not None:
            undo = compensation_spec(remote.name, remote.compensation, connection)
        specs.append(McpToolSpec.of(remote, connection, undo))
    return Toolbox(specs)


class McpToolset:
    """One MCP server's tools, mapped, as a Toolbox; an async context manager.

    `server` is a `StdioServerParameters` (a command sagacity starts and stops), the URL
    of a streamable HTTP server, or an in-process `mcp` Server/MCPServer (for tests).
    `tools` maps tool names to `plain`, `irreversible` (or `irreversible(policy=...)`) or
    `compensated_by(name, args=...)`; `compensations` holds Python `@compensation`
    functions (or objects with them) that the mapping may name. `unmapped="refuse"` (the
    default) leaves out the tools the mapping does not name; `"plain"` serves them as
    plain journaled tools.
    """

    def __init__(
        self,
        server: Any,
        tools: Mapping[str, object],
        *,
        compensations: Sequence[object] = (),
        unmapped: Unmapped = "refuse",
        name: str | None = None,
        connect_timeout: float = 30.0,
    ) -> None:
        if isinstance(compensations, str | bytes) or not isinstance(compensations, Sequence):
            raise McpMappingError(
                "compensations= takes a list of functions or objects with @compensation "
                f"functions, got {compensations!r}"
            )
        self._mapping = tools
        self._python = python_compensations(compensations)
        self._unmapped: Unmapped = unmapped
        self.connection = McpConnection(server, name=name, connect_timeout=connect_timeout)
        self._toolbox: Toolbox | None = None
        self.left_out: dict[str, str] = {}
        """Tools the server lists that are not saga tools, with why."""

    @property
    def name(self) -> str:
        return self.connection.name

    @property
    def toolbox(self) -> Toolbox:
        """The saga tools (only while the toolset is open)."""
        if self._toolbox is None:
            raise RuntimeError(
                f"the toolset of MCP server {self.name!r} is not open; use "
                "`async with McpToolset(...) as toolset:` and build the worker inside"
            )
        return self._toolbox

    async def open(self) -> Toolbox:
        await self.connection.open()
        try:
            listed = await self.connection.list_tools()
            plan = check_mapping(
                self.name,
                listed,
                self._mapping,
                compensations=self._python,
                unmapped=self._unmapped,
            )
            toolbox = toolbox_of(plan, self.connection)
        except BaseException:  # a mapping or policy that does not fit: stop the server too
            await self.connection.close()
            raise
        self.left_out = plan.left_out
        for tool, why in plan.left_out.items():
            log.info("MCP server %s: tool %r is not a saga tool: %s", self.name, tool, why)
        self._toolbox = toolbox
        return self._toolbox

    async def close(self) -> None:
        self._toolbox = None
        await self.connection.close()

    async def __aenter__(self) -> McpToolset:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = repr(self._toolbox) if self._toolbox is not None else "closed"
        return f"McpToolset({describe(self.connection.server)}: {state})"


__all__ = ["McpToolset", "toolbox_of"]
