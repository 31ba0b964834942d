"""Fixtures of the MCP adapter's end-to-end tests: the example shop served by a real stdio
MCP server process (examples/mcp_shop_server.py) that the toolset starts, a worker whose
toolbox is that server's tools, the session's dev server and a PostgreSQL journal in a
fresh schema. Every test ends by checking that no server process it started is alive."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from sagacity.contrib.mcp import McpToolset, StdioServerParameters, stdio_server
from sagacity.examples.mcp_order import SHOP_TOOLS
from sagacity.examples.mcp_shop_server import received_calls, server_pids
from sagacity.examples.order_workflow import OrderWorkflow
from sagacity.examples.orders import Shop
from sagacity.stores import JournalStore
from tests.support.pg_fixtures import pg_journal_url, pg_schema, pg_store
from tests.support.rigs import SagaRig, serving

__all__ = ["pg_journal_url", "pg_schema", "pg_store"]

SHOP_MAPPING = SHOP_TOOLS


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def assert_stopped(pids: Iterable[int]) -> None:
    """No server process is left running (nor left unreaped)."""
    pids = list(pids)
    assert pids, "no MCP server process was started"
    assert [p for p in pids if alive(p)] == []


@dataclass
class McpShop:
    """The shop file, the test's own view of it, and the command of its MCP server."""

    path: Path
    shop: Shop
    server: StdioServerParameters

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        """What the server received: {"tool", "arguments", "key"} in order."""
        return [c for c in received_calls(self.path) if tool in (None, c["tool"])]

    def pids(self) -> list[int]:
        return server_pids(self.path)


@pytest.fixture
def mcp_shop(tmp_path: Path) -> McpShop:
    path = tmp_path / "shop.db"
    server = stdio_server(sys.executable, "-m", "sagacity.examples.mcp_shop_server",
                          "--shop", str(path))  # fmt: skip
    return McpShop(path, Shop(path), server)


@dataclass
class McpOrders(SagaRig[McpShop]):
    """The MCP shop's tools on a worker, and the toolset that serves them."""

    toolset: McpToolset
    id_prefix = "mcp-order"


@pytest.fixture
async def mcp_orders(
    temporal_env: WorkflowEnvironment, pg_store: JournalStore, mcp_shop: McpShop
) -> AsyncIterator[McpOrders]:
    """A worker serving the MCP shop's tools (AgentSaga and the user's OrderWorkflow)."""
    async with (
        McpToolset(mcp_shop.server, tools=SHOP_MAPPING) as toolset,
        serving(temporal_env.client, pg_store, toolset.toolbox, [OrderWorkflow], "mcp") as (
            client,
            task_queue,
        ),
    ):
        yield McpOrders(client, pg_store, mcp_shop, task_queue, toolset)
    assert_stopped(mcp_shop.pids())
