"""The order scenario with tools from an MCP server: python -m sagacity.examples.mcp_order

The shop's tools come from a stdio MCP server (examples/mcp_shop_server.py) that the
worker starts, holds a session with, and stops. A small mapping says what each tool is
to a saga; the worker runs AgentSaga and the user's OrderWorkflow over those tools on an
embedded dev server, with a SQLite journal (or --journal URL, e.g. PostgreSQL):

1. an AgentSaga plan reserves, charges and ships; the carrier refuses (`isError` from the
   server), so the saga fails and the server is asked to refund, then to release;
2. an OrderWorkflow pays its supplier by wire: the wire waits for approval of the SHA-256
   of its exact arguments, is approved through SagaClient, and the server receives
   exactly those arguments.

Everything lands in a temporary folder unless --workdir says where.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import uuid
from pathlib import Path

from sagacity.audit import verify_store
from sagacity.contrib.mcp import McpToolset, compensated_by, irreversible, plain, stdio_server
from sagacity.examples.mcp_shop_server import received_calls
from sagacity.examples.order_workflow import Order, OrderWorkflow
from sagacity.stores import JournalStore, open_store
from sagacity.worker import SagaClient, SagaInput, ToolCall
from sagacity.worker._app import new_worker
from sagacity.worker._devserver import start_dev_server
from sagacity.worker._quiet_failures import ACTIVITY_LOGGER

SHOP_TOOLS = {
    "reserve_inventory": compensated_by("release_inventory"),  # undone by another MCP tool
    "charge_card": compensated_by("refund_card"),
    "ship_order": plain,
    "send_wire_transfer": irreversible,  # sent only after a person approves its exact args
}
"""What each tool of the shop server is to a saga. A name the server does not list fails
when the toolset opens; a server tool not named here is not a saga tool at all."""

IBAN = "DE89370400440532013000"


def show_journal(store: JournalStore, saga_id: str) -> None:
    for e in store.entries(saga_id):
        what = e.error or (e.result if e.phase.value == "EXECUTED" else e.input) or ""
        print(f"  #{e.seq:<3} {e.phase.value:<18} {e.step} {e.tool:<19} {str(what)[:70]}")
    report = verify_store(store, saga_id)
    print(f"  journal verifies: {report.ok}, closed: {report.closed}")


async def run(workdir: Path, journal_url: str | None) -> bool:
    shop_file = workdir / "shop.db"
    server = stdio_server(sys.executable, "-m", "sagacity.examples.mcp_shop_server",
                          "--shop", str(shop_file))  # fmt: skip
    store = open_store(journal_url or f"sqlite:///{workdir}/journal.db")
    # The carrier's refusal is on purpose: it shows in the journal, not as a traceback.
    logging.getLogger(ACTIVITY_LOGGER).setLevel(logging.ERROR)
    print("starting the embedded Temporal dev server …")
    env = await start_dev_server(log_level="error", banner=False)
    try:
        async with McpToolset(server, tools=SHOP_TOOLS) as shop:
            print(f"MCP server {shop.name!r}: saga tools {shop.toolbox.names()}")
            worker = new_worker(env.client, store=store, toolbox=shop.toolbox,
                                task_queue="mcp-orders", workflows=[OrderWorkflow])  # fmt: skip
            client = SagaClient(env.client, task_queue="mcp-orders", store=store)
            async with worker:
                return await scenario(client, store, shop_file)
    finally:
        await env.shutdown()
        store.close()


async def scenario(client: SagaClient, store: JournalStore, shop_file: Path) -> bool:
    run_id = uuid.uuid4().hex[:6]
    failing = f"mcp-failing-order-{run_id}"
    plan = [
        ToolCall(tool="reserve_inventory", args={"sku": "widget", "qty": 2}),
        ToolCall(tool="charge_card", args={"amount": 1250}),
        ToolCall(tool="ship_order", args={"address": "Main St 1", "fail": True}),
    ]
    await client.start(SagaInput(plan=plan), saga_id=failing)
    result = await client.result(failing)
    print(f"\n1. {failing}: {result.status.value} — {result.first_failure}")
    show_journal(store, failing)

    order = Order(sku="widget", qty=1, amount=5000, address="Main St 1", supplier_iban=IBAN)
    handle = await client.start_workflow(OrderWorkflow.run, order, saga_id=f"mcp-order-{run_id}")
    review = await client.wait_pending(handle.id)
    print(f"\n2. {handle.id} waits: {review.pending.tool} {review.pending.payload}")
    print(f"   sha256 {review.pending.payload_sha256}")
    await client.approve(handle.id, approver="alice@example.com")
    receipt = await handle.result()
    print(f"   approved by alice@example.com → {receipt.status}, wire {receipt.wire}")
    show_journal(store, handle.id)

    print("\nwhat the MCP server received, in order:")
    for call in received_calls(shop_file):
        print(f"  {call['tool']:<19} {call['arguments']}  key {call['key']}")
    return result.status.value == "COMPENSATED" and receipt.status == "COMPLETED"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None, help="keep the files here")
    parser.add_argument("--journal", default=None, help="journal URL (default: SQLite)")
    args = parser.parse_args(argv)
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        ok = asyncio.run(run(args.workdir, args.journal))
    else:
        with tempfile.TemporaryDirectory(prefix="sagacity-mcp-") as folder:
            ok = asyncio.run(run(Path(folder), args.journal))
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
