"""MCP tools as saga tools: the tools of an MCP server (the official `mcp` package) in a
sagacity Toolbox, so any saga calls them as journaled steps.

    from sagacity.contrib.mcp import (
        McpToolset, compensated_by, irreversible, plain, stdio_server,
    )

    shop = stdio_server("python", "-m", "shop_server")
    mapping = {
        "reserve_inventory": compensated_by("release_inventory"),
        "charge_card": compensated_by("refund_card"),
        "ship_order": plain,
        "send_wire_transfer": irreversible,
    }
    async with McpToolset(shop, tools=mapping) as toolset:
        worker = new_worker(client, store=store, toolbox=toolset.toolbox, task_queue="orders")
        await worker.run()

Each call runs in sagacity's tool runner (INTENT, the call, EXECUTED or FAILED) through
the worker's client session; the server's input schema judges the arguments before
anything is sent; a result with `isError: true` fails the step and the saga compensates;
an irreversible tool is sent only after a person approved its exact arguments; the
step's idempotency key travels in the call's `_meta` ("sagacity/idempotency-key").
Needs the `mcp` extra: `pip install 'sagacity[mcp]'`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from mcp import StdioServerParameters

from ._connection import McpConnection, same_definition
from ._errors import McpConnectionError, McpMappingError, McpToolChangedError, McpToolError
from ._input_schema import InputSchema, OutputSchema
from ._mapping import (
    CompensatedBy,
    Irreversible,
    MappingPlan,
    Plain,
    check_mapping,
    compensated_by,
    irreversible,
    plain,
)
from ._results import CONTENT
from ._spec import IDEMPOTENCY_KEY_META, SAGA_ID_META, STEP_META, McpToolSpec
from ._toolset import McpToolset, toolbox_of


def stdio_server(
    command: str,
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
) -> StdioServerParameters:
    """A stdio MCP server to start: `command` with `args`. The process gets only a safe
    part of the worker's environment (PATH, HOME...) plus `env`: pass what it needs."""
    return StdioServerParameters(
        command=command, args=list(args), env=dict(env) if env else None, cwd=cwd
    )


__all__ = [
    "CONTENT",
    "IDEMPOTENCY_KEY_META",
    "SAGA_ID_META",
    "STEP_META",
    "CompensatedBy",
    "InputSchema",
    "Irreversible",
    "MappingPlan",
    "McpConnection",
    "McpConnectionError",
    "McpMappingError",
    "McpToolChangedError",
    "McpToolError",
    "McpToolSpec",
    "McpToolset",
    "OutputSchema",
    "Plain",
    "StdioServerParameters",
    "check_mapping",
    "compensated_by",
    "irreversible",
    "plain",
    "same_definition",
    "stdio_server",
    "toolbox_of",
]
