"""Toolboxes that worker subprocesses of the fault tests serve (`--tools
tests.system.faults.toolkits:toolbox`): the example shop plus a gated payment.

The gated payment waits (heartbeating) until the test opens its gate, then applies its
effect. That lets a test stop a worker at an exact point — after the effect, before the
EXECUTED entry is committed — without guessing at timings. Like the shop, it keeps its
state and its record of body runs in SQLite so the test process sees what the worker
process did.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sagacity.examples.orders import Shop, shop_path
from sagacity.tools._decorators import CompensationContext, ToolContext, compensable, compensation
from sagacity.tools._toolbox import Toolbox

_SCHEMA = """
CREATE TABLE IF NOT EXISTS payments (
    key TEXT PRIMARY KEY, amount INTEGER, voided INTEGER DEFAULT 0);
CREATE TABLE IF NOT EXISTS calls (
    n INTEGER PRIMARY KEY AUTOINCREMENT, tool TEXT, key TEXT, attempt INTEGER);
"""


class GatedLedger:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.gate = self.path.with_suffix(".gate")
        with self._db() as db:
            db.executescript(_SCHEMA)

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=30)
        try:
            with db:
                yield db
        finally:
            db.close()

    def open_gate(self) -> None:
        self.gate.touch()

    def payments(self) -> list[dict[str, Any]]:
        with self._db() as db:
            rows = db.execute("SELECT key, amount, voided FROM payments").fetchall()
        return [{"key": k, "amount": a, "voided": bool(v)} for k, a, v in rows]

    def calls(self) -> list[tuple[str, str, int]]:
        with self._db() as db:
            rows = db.execute("SELECT tool, key, attempt FROM calls ORDER BY n").fetchall()
        return [(str(t), str(k), int(a)) for t, k, a in rows]

    @compensable("void_payment")
    async def gated_payment(self, amount: int, ctx: ToolContext) -> dict[str, Any]:
        """Take a payment once the gate is open."""
        while not self.gate.exists():
            ctx.heartbeat("waiting at the gate")
            await asyncio.sleep(0.05)
        if ctx.is_fenced():
            raise RuntimeError("step fenced off by compensation; not paying")
        with self._db() as db:
            db.execute(
                "INSERT INTO calls (tool, key, attempt) VALUES (?, ?, ?)",
                ("gated_payment", ctx.idempotency_key, ctx.attempt),
            )
            db.execute(
                "INSERT OR IGNORE INTO payments (key, amount) VALUES (?, ?)",
                (ctx.idempotency_key, amount),
            )
        return {"payment": ctx.idempotency_key, "amount": amount}

    @compensation
    def void_payment(self, ctx: CompensationContext) -> None:
        with self._db() as db:
            db.execute(
                "INSERT INTO calls (tool, key, attempt) VALUES (?, ?, ?)",
                ("void_payment", ctx.idempotency_key, ctx.attempt),
            )
            db.execute("UPDATE payments SET voided = 1 WHERE key = ?", (ctx.idempotency_key,))


def ledger_path() -> Path:
    return Path(os.environ["SAGACITY_LEDGER_PATH"])


def toolbox() -> Toolbox:
    return Toolbox.build(Shop(shop_path()), GatedLedger(ledger_path()))
