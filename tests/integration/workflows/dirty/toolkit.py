"""A payment whose attempt never returns: the way an unknown outcome arises in one
process (the attempt times out; its retry finds the INTENT and no outcome).

`hanging_payment` applies its effect first ("after") or never ("before"), then waits
until Temporal gives up on the attempt (the heartbeat is refused once the attempt timed
out, and the SDK cancels the activity): the journal keeps INTENT and no outcome, and the
ledger says whether the money really moved. `void_payment` undoes it once per key."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Literal

from sagacity.tools._decorators import CompensationContext, ToolContext, compensable, compensation
from tests.support.sqlite_files import transaction

_SCHEMA = """
CREATE TABLE IF NOT EXISTS payments (key TEXT PRIMARY KEY, amount INTEGER, voided INTEGER);
CREATE TABLE IF NOT EXISTS voids (n INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT, result TEXT);
"""


class HangingLedger:
    def __init__(self, path: Path) -> None:
        self.path = path
        with self._db() as db:
            db.executescript(_SCHEMA)

    def _db(self) -> AbstractContextManager[sqlite3.Connection]:
        return transaction(self.path)

    def payments(self) -> list[dict[str, Any]]:
        with self._db() as db:
            rows = db.execute("SELECT key, amount, voided FROM payments").fetchall()
        return [{"key": k, "amount": a, "voided": bool(v)} for k, a, v in rows]

    def voids(self) -> list[tuple[str, str]]:
        with self._db() as db:
            return [(str(k), str(r)) for k, r in db.execute("SELECT key, result FROM voids")]

    @compensable("void_payment")
    async def hanging_payment(
        self, amount: int, ctx: ToolContext, effect: Literal["after", "before"] = "after"
    ) -> dict[str, Any]:
        """Pay, then never answer (effect="after"); or never pay (effect="before")."""
        if effect == "after" and ctx.attempt == 1:
            with self._db() as db:
                db.execute(
                    "INSERT OR IGNORE INTO payments VALUES (?, ?, 0)", (ctx.idempotency_key, amount)
                )
        await asyncio.sleep(3600)  # cancelled when Temporal gives up on the attempt
        return {"payment": ctx.idempotency_key}

    @compensation
    def void_payment(self, ctx: CompensationContext) -> dict[str, Any]:
        with self._db() as db:
            db.execute(
                "INSERT INTO voids (key, result) VALUES (?, ?)",
                (ctx.idempotency_key, repr(ctx.result)),
            )
            db.execute("UPDATE payments SET voided=1 WHERE key=?", (ctx.idempotency_key,))
        return {"voided": ctx.idempotency_key}
