"""Small helpers for workflow tests: polling queries, reading the journal."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from sagacity.approval._resolutions import Resolution
from sagacity.examples.orders import Shop
from sagacity.journal._entry import JournalEntry
from sagacity.journal._phases import SagaStatus
from sagacity.stores import JournalStore
from sagacity.worker._devserver import start_time_skipping_server
from sagacity.worker.client._resolutions import resolve
from sagacity.workflows._models import DirtyStep, SagaInput, SagaView, ToolCall

T = TypeVar("T")


async def eventually(probe: Callable[[], Awaitable[T | None]], timeout: float = 20.0) -> T:
    """Poll `probe` until it returns something truthy."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await probe()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(0.1)


@asynccontextmanager
async def time_skipping_server() -> AsyncIterator[WorkflowEnvironment]:
    """Temporal's time-skipping test server (start_time_skipping_server), shut down when
    the block ends: for sagas whose deadlines are hours or days away."""
    env = await start_time_skipping_server()
    try:
        yield env
    finally:
        await env.shutdown()


def phases(store: JournalStore, saga_id: str) -> list[tuple[str, int, str]]:
    """(phase, step, tool) of every entry, in seq order."""
    return [(e.phase.value, e.step, e.tool) for e in store.entries(saga_id)]


def entries_of(store: JournalStore, saga_id: str, phase: str) -> list[JournalEntry]:
    return [e for e in store.entries(saga_id) if e.phase.value == phase]


RESERVE = ToolCall(tool="reserve_inventory", args={"sku": "widget", "qty": 2})
CHARGE = ToolCall(tool="charge_card", args={"amount": 100, "currency": "EUR"})
SHIP = ToolCall(tool="ship_order", args={"address": "Main St 1"})
SHIP_FAILS = ToolCall(tool="ship_order", args={"address": "Main St 1", "fail": True})
WIRE = ToolCall(tool="send_wire_transfer", args={"iban": "DE89370400440532013000", "amount": 5000})


def refund_refused(shop: Shop, **options: Any) -> SagaInput:
    """The shop refuses refunds from now on, and a plan whose last step fails: the
    charge's refund fails every attempt (two unless `options` say), so the saga needs a
    person. `options` are more SagaInput fields (its resolution policy, say)."""
    shop.set_fault("refund")
    fields: dict[str, Any] = {"compensation_attempts": 2, **options}
    return SagaInput(plan=[RESERVE, CHARGE, SHIP_FAILS], **fields)


async def accept_when_dirty(
    handle: WorkflowHandle[Any, Any],
    *,
    reason: str = "accepted by the test",
    actor: str = "olivia",
    timeout: float = 40.0,
) -> list[DirtyStep]:
    """Wait until the saga needs a person, then accept its dirty steps as they are (the
    saga closes ACCEPTED). Returns the dirty steps it listed."""

    async def probe() -> list[DirtyStep] | None:
        view = await handle.query("status", result_type=SagaView)
        return view.dirty if view.status is SagaStatus.NEEDS_HUMAN else None

    dirty = await eventually(probe, timeout)
    action = Resolution(
        saga_id=handle.id, action="accept", steps=[d.step for d in dirty], actor=actor,
        reason=reason,
    )  # fmt: skip
    # The product's own call: it sends again an update the server dropped because the
    # saga's closing task met an event (a cancelled tool's acknowledgement, say).
    await resolve(handle, action)
    return dirty
