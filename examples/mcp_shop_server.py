"""The example shop as an MCP server (stdio), for the MCP adapter's example and tests.

    python -m sagacity.examples.mcp_shop_server --shop /tmp/shop.db
    python -m sagacity.examples.mcp_shop_server --shop /tmp/shop.db --http 8765  # HTTP

It serves the shop of examples.orders (a SQLite file: stock, charges, wires, shipments)
as MCP tools with the `mcp` package's MCPServer: reserve_inventory / release_inventory,
charge_card / refund_card, ship_order (fails when asked to, or for "nowhere") and
send_wire_transfer. Each forward tool keys its effect on the idempotency key sagacity
sends in the call's `_meta`, so a retried call applies once; each undo takes what its
forward tool returned. Every call the server receives is appended, with its arguments
exactly as they arrived, to `<shop>.mcp-calls.jsonl`, and the process's id to
`<shop>.mcp-pids`: the witnesses a test reads.

The fault "server_exit" (Shop.set_fault("server_exit", TOOL)) makes the process exit in
the middle of that tool's call, after its effect: a connection lost mid-call.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from sagacity import CompensationContext, ToolContext
from sagacity.contrib.mcp import IDEMPOTENCY_KEY_META, SAGA_ID_META, STEP_META
from sagacity.examples.orders import Shop, ShopError, shop_path


class Reservation(TypedDict):
    reservation: str
    sku: str
    qty: int


class Charge(TypedDict):
    charge: str
    amount: int
    currency: str


class Shipment(TypedDict):
    shipment: str
    address: str


class Wire(TypedDict):
    wire: str
    iban: str
    amount: int
    currency: str


class Undone(TypedDict):
    undone: str


def calls_path(shop: Path) -> Path:
    return shop.with_name(shop.name + ".mcp-calls.jsonl")


def pids_path(shop: Path) -> Path:
    return shop.with_name(shop.name + ".mcp-pids")


def received_calls(shop: Path) -> list[dict[str, Any]]:
    """Every call the server received, in order: {"tool", "arguments", "key"}."""
    path = calls_path(shop)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def server_pids(shop: Path) -> list[int]:
    """The process id of every server started on this shop, in order."""
    path = pids_path(shop)
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def build_server(shop: Shop) -> MCPServer:
    server = MCPServer("shop", instructions="The example shop.", log_level="WARNING")

    def received(tool: str, ctx: Context) -> ToolContext:
        """Log the call as it arrived and make the shop's context from its `_meta`."""
        request = ctx.request_context
        meta = dict(request.meta or {})
        key = meta.get(IDEMPOTENCY_KEY_META)
        arguments = (request.params or {}).get("arguments")
        with calls_path(shop.path).open("a") as log:
            log.write(json.dumps({"tool": tool, "arguments": arguments, "key": key}) + "\n")
        if not isinstance(key, str) or not key:
            raise ToolError(
                f"call {tool} with an idempotency key in _meta[{IDEMPOTENCY_KEY_META!r}]"
            )
        step = meta.get(STEP_META)
        return ToolContext(
            saga_id=str(meta.get(SAGA_ID_META, "")),
            step=step if isinstance(step, int) else 0,
            attempt=1,
            tool=tool,
            idempotency_key=key,
        )

    def exit_if_asked(tool: str) -> None:
        if shop.fault("server_exit") == tool:
            shop.clear_fault("server_exit")
            os._exit(3)  # mid-call: the effect is applied, no answer goes out

    def undo(
        tool: str,
        ctx: Context,
        of: str,
        key: str,
        shop_undo: Callable[[CompensationContext], object],
    ) -> Undone:
        """Log the undo call `tool`, then have the shop undo `of`'s effect named `key`
        (the shop finds it by that key, as the worker's compensation would)."""
        received(tool, ctx)
        undo_ctx = CompensationContext(saga_id="", step=0, tool=of, input={}, result=None,
                                       idempotency_key=key)  # fmt: skip
        try:
            shop_undo(undo_ctx)
        except ShopError as exc:
            raise ToolError(str(exc)) from exc
        return Undone(undone=key)

    @server.tool()
    def reserve_inventory(sku: str, qty: int, ctx: Context) -> Reservation:
        """Reserve `qty` units of `sku` for this order."""
        try:
            done = shop.reserve_inventory(sku, qty, received("reserve_inventory", ctx))
        except ShopError as exc:
            raise ToolError(str(exc)) from exc
        return Reservation(reservation=done["reservation"], sku=sku, qty=qty)

    @server.tool()
    def release_inventory(reservation: str, sku: str, qty: int, ctx: Context) -> Undone:
        """Release a reservation (the undo of reserve_inventory)."""
        return undo(
            "release_inventory", ctx, "reserve_inventory", reservation, shop.release_inventory
        )

    @server.tool()
    def charge_card(
        amount: int, ctx: Context, currency: str = "EUR", card: str = "tok_visa"
    ) -> Charge:
        """Charge `amount` (minor units) to the customer's card."""
        try:
            done = shop.charge_card(amount, received("charge_card", ctx), currency, card)
        except ShopError as exc:
            raise ToolError(str(exc)) from exc
        exit_if_asked("charge_card")
        return Charge(charge=done["charge"], amount=amount, currency=currency)

    @server.tool()
    def refund_card(charge: str, amount: int, currency: str, ctx: Context) -> Undone:
        """Refund a charge (the undo of charge_card)."""
        return undo("refund_card", ctx, "charge_card", charge, shop.refund_card)

    @server.tool()
    async def ship_order(address: str, ctx: Context, fail: bool = False) -> Shipment:
        """Hand the order to the carrier. `fail=True` makes the carrier refuse it."""
        try:
            done = await shop.ship_order(address, received("ship_order", ctx), fail)
        except ShopError as exc:
            raise ToolError(str(exc)) from exc
        return Shipment(shipment=done["shipment"], address=address)

    @server.tool()
    def send_wire_transfer(iban: str, amount: int, ctx: Context, currency: str = "EUR") -> Wire:
        """Send a bank wire. It cannot be undone."""
        done = shop.send_wire_transfer(iban, amount, received("send_wire_transfer", ctx), currency)
        return Wire(wire=done["wire"], iban=iban, amount=amount, currency=currency)

    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shop", default=None, help="the shop's SQLite file")
    parser.add_argument(
        "--http",
        type=int,
        default=None,
        metavar="PORT",
        help="serve streamable HTTP on 127.0.0.1:PORT/mcp instead of stdio",
    )
    args = parser.parse_args(argv)
    path = Path(args.shop or shop_path())
    shop = Shop(path)
    with pids_path(path).open("a") as pids:
        pids.write(f"{os.getpid()}\n")
    if args.http is None:
        build_server(shop).run()
    else:
        build_server(shop).run("streamable-http", host="127.0.0.1", port=args.http)


if __name__ == "__main__":
    main()
