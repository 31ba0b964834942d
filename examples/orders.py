"""The canonical demo toolbox: an order saga against a small durable fake shop.

reserve_inventory (undone by release_inventory), charge_card (undone by refund_card),
send_wire_transfer (irreversible: needs approval) and ship_order (fails on demand). The
shop keeps its state in a SQLite file so a test, a worker subprocess and a demo all see
the same stock, charges and wires — every compensation is visible — and it honours
idempotency keys the way a payment provider would.

Faults are switched on in the shop's own table (`Shop.set_fault`) so that a worker in
another process sees them too.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sagacity import (
    CompensationContext,
    Toolbox,
    ToolContext,
    compensable,
    compensation,
    irreversible,
    tool,
)
from sagacity._data_home import data_home, ensure_private

INITIAL_STOCK = {"widget": 10, "gadget": 5}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS stock (sku TEXT PRIMARY KEY, qty INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS reservations (
    key TEXT PRIMARY KEY, sku TEXT, qty INTEGER, released INTEGER DEFAULT 0);
CREATE TABLE IF NOT EXISTS charges (
    key TEXT PRIMARY KEY, amount INTEGER, currency TEXT, refunded INTEGER DEFAULT 0);
CREATE TABLE IF NOT EXISTS wires (key TEXT PRIMARY KEY, iban TEXT, amount INTEGER, currency TEXT);
CREATE TABLE IF NOT EXISTS shipments (key TEXT PRIMARY KEY, address TEXT);
CREATE TABLE IF NOT EXISTS faults (name TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS calls (
    n INTEGER PRIMARY KEY AUTOINCREMENT, tool TEXT, key TEXT, attempt INTEGER);
"""


class ShopError(Exception):
    """A business failure of the shop (out of stock, card declined, shipping refused)."""


class Shop:
    """The fake shop. Each public tool method is a sagacity tool."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else Path(shop_path())
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        schema = sqlite3.connect(self.path, timeout=30)
        try:
            schema.executescript(_SCHEMA)
        finally:
            schema.close()
        with self._db() as db:
            for sku, qty in INITIAL_STOCK.items():
                db.execute("INSERT OR IGNORE INTO stock VALUES (?, ?)", (sku, qty))

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            try:
                db.execute("BEGIN IMMEDIATE")
                yield db
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            finally:
                db.close()

    # ---- inspection and fault switches, for tests and the demo -----------------------------

    def stock(self, sku: str) -> int:
        with self._db() as db:
            row = db.execute("SELECT qty FROM stock WHERE sku=?", (sku,)).fetchone()
        return int(row[0]) if row else 0

    def charges(self) -> list[dict[str, Any]]:
        with self._db() as db:
            rows = db.execute("SELECT key, amount, currency, refunded FROM charges").fetchall()
        return [{"key": k, "amount": a, "currency": c, "refunded": bool(r)} for k, a, c, r in rows]

    def wires(self) -> list[dict[str, Any]]:
        with self._db() as db:
            rows = db.execute("SELECT key, iban, amount, currency FROM wires").fetchall()
        return [{"key": k, "iban": i, "amount": a, "currency": c} for k, i, a, c in rows]

    def shipments(self) -> list[str]:
        with self._db() as db:
            return [r[0] for r in db.execute("SELECT key FROM shipments").fetchall()]

    def calls(self, tool_name: str | None = None) -> list[tuple[str, str, int]]:
        """Every time a tool or compensation body actually ran: (tool, key, attempt)."""
        with self._db() as db:
            rows = db.execute("SELECT tool, key, attempt FROM calls ORDER BY n").fetchall()
        return [(str(t), str(k), int(a)) for t, k, a in rows if tool_name in (None, t)]

    def set_fault(self, name: str, value: str = "1") -> None:
        """Faults: 'refund' and 'release' (always fail), 'ship_delay' and 'refund_delay'
        (seconds)."""
        with self._db() as db:
            db.execute("INSERT OR REPLACE INTO faults VALUES (?, ?)", (name, value))

    def clear_fault(self, name: str) -> None:
        """The service is back (`set_fault` switched it off)."""
        with self._db() as db:
            db.execute("DELETE FROM faults WHERE name=?", (name,))

    def fault(self, name: str) -> str | None:
        with self._db() as db:
            row = db.execute("SELECT value FROM faults WHERE name=?", (name,)).fetchone()
        return str(row[0]) if row else None

    def _log(self, db: sqlite3.Connection, tool_name: str, key: str, attempt: int) -> None:
        db.execute(
            "INSERT INTO calls (tool, key, attempt) VALUES (?, ?, ?)", (tool_name, key, attempt)
        )

    # ---- tools -------------------------------------------------------------------------------

    @compensable("release_inventory")
    def reserve_inventory(self, sku: str, qty: int, ctx: ToolContext) -> dict[str, Any]:
        """Reserve `qty` units of `sku` for this order."""
        if qty <= 0:
            raise ShopError(f"qty must be positive, got {qty}")
        with self._db() as db:
            self._log(db, "reserve_inventory", ctx.idempotency_key, ctx.attempt)
            if db.execute(
                "SELECT 1 FROM reservations WHERE key=?", (ctx.idempotency_key,)
            ).fetchone():
                return {"reservation": ctx.idempotency_key, "sku": sku, "qty": qty}
            row = db.execute("SELECT qty FROM stock WHERE sku=?", (sku,)).fetchone()
            if row is None or row[0] < qty:
                raise ShopError(f"not enough {sku!r} in stock")
            db.execute("UPDATE stock SET qty = qty - ? WHERE sku=?", (qty, sku))
            db.execute(
                "INSERT INTO reservations (key, sku, qty) VALUES (?, ?, ?)",
                (ctx.idempotency_key, sku, qty),
            )
        return {"reservation": ctx.idempotency_key, "sku": sku, "qty": qty}

    @compensation
    def release_inventory(self, ctx: CompensationContext) -> None:
        with self._db() as db:  # logged in its own transaction: failed attempts count too
            self._log(db, "release_inventory", ctx.idempotency_key, ctx.attempt)
        with self._db() as db:
            if db.execute("SELECT value FROM faults WHERE name='release'").fetchone():
                raise ShopError("inventory service unavailable (fault injected)")
            row = db.execute(
                "SELECT sku, qty, released FROM reservations WHERE key=?", (ctx.idempotency_key,)
            ).fetchone()
            if row is None or row[2]:
                return
            db.execute("UPDATE stock SET qty = qty + ? WHERE sku=?", (row[1], row[0]))
            db.execute("UPDATE reservations SET released=1 WHERE key=?", (ctx.idempotency_key,))

    @compensable("refund_card")
    def charge_card(
        self, amount: int, ctx: ToolContext, currency: str = "EUR", card: str = "tok_visa"
    ) -> dict[str, Any]:
        """Charge `amount` (minor units) to the customer's card."""
        with self._db() as db:
            self._log(db, "charge_card", ctx.idempotency_key, ctx.attempt)
            if card == "tok_declined":
                raise ShopError("card declined")
            db.execute(
                "INSERT OR IGNORE INTO charges (key, amount, currency) VALUES (?, ?, ?)",
                (ctx.idempotency_key, amount, currency),
            )
        return {"charge": ctx.idempotency_key, "amount": amount, "currency": currency}

    @compensation
    def refund_card(self, ctx: CompensationContext) -> dict[str, Any]:
        delay = float(self.fault("refund_delay") or 0)
        if delay:  # tests wait for this mark (the refund is in its delay), not for a clock
            self.set_fault("refund_delaying", ctx.idempotency_key)
            time.sleep(delay)
        with self._db() as db:  # logged in its own transaction: failed attempts count too
            self._log(db, "refund_card", ctx.idempotency_key, ctx.attempt)
        with self._db() as db:
            if db.execute("SELECT value FROM faults WHERE name='refund'").fetchone():
                raise ShopError("payment provider refused the refund (fault injected)")
            db.execute("UPDATE charges SET refunded=1 WHERE key=?", (ctx.idempotency_key,))
        return {"refunded": ctx.idempotency_key}

    @irreversible
    def send_wire_transfer(
        self, iban: str, amount: int, ctx: ToolContext, currency: str = "EUR"
    ) -> dict[str, Any]:
        """Send a bank wire. Cannot be undone: a human approves the exact payload first."""
        with self._db() as db:
            self._log(db, "send_wire_transfer", ctx.idempotency_key, ctx.attempt)
            db.execute(
                "INSERT OR IGNORE INTO wires (key, iban, amount, currency) VALUES (?, ?, ?, ?)",
                (ctx.idempotency_key, iban, amount, currency),
            )
        return {"wire": ctx.idempotency_key, "iban": iban, "amount": amount, "currency": currency}

    @tool
    async def ship_order(
        self, address: str, ctx: ToolContext, fail: bool = False
    ) -> dict[str, Any]:
        """Hand the order to the carrier. `fail=True` makes the carrier refuse it."""
        waited = 0.0  # the delay is re-read as it waits: clearing the fault ends the wait
        while waited < float(self.fault("ship_delay") or 0):
            await asyncio.sleep(0.2)
            waited += 0.2
            ctx.heartbeat("waiting for the carrier")
        if fail or address == "nowhere":
            with self._db() as db:
                self._log(db, "ship_order", ctx.idempotency_key, ctx.attempt)
            raise ShopError(f"carrier refused to ship to {address!r}")
        if ctx.is_fenced():
            raise ShopError("step fenced off by compensation; not shipping")
        with self._db() as db:
            self._log(db, "ship_order", ctx.idempotency_key, ctx.attempt)
            db.execute(
                "INSERT OR IGNORE INTO shipments VALUES (?, ?)", (ctx.idempotency_key, address)
            )
        return {"shipment": ctx.idempotency_key, "address": address}

    @tool
    def catalog_export(self, size_bytes: int = 1_000) -> dict[str, Any]:
        """Export the product catalogue (size chosen by the caller: large results are fine;
        the model sees them cut, the journal keeps them whole)."""
        line = "widget,gadget,gizmo;"
        return {"rows": (line * (size_bytes // len(line) + 1))[:size_bytes]}


def shop_path() -> str:
    """$SAGACITY_SHOP_PATH, else shop.db in sagacity's data home (made private on first use)."""
    return os.environ.get("SAGACITY_SHOP_PATH") or str(ensure_private(data_home()) / "shop.db")


def toolbox() -> Toolbox:
    """`--tools sagacity.examples.orders:toolbox`: the shop at $SAGACITY_SHOP_PATH as a toolbox."""
    return Toolbox.build(Shop(shop_path()))
