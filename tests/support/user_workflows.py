"""Small user workflows on the saga API, each pinning one rule of its contract."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel

    from sagacity.examples.order_workflow import Order, OrderWorkflow, Receipt
    from sagacity.workflows._models import SagaOptions, SagaState
    from sagacity.workflows._saga import Saga


@workflow.defn(name="LetsFailureOut")
class LetsFailureOut:
    """Does not catch anything: the workflow fails with SagaFailedError after compensating."""

    @workflow.run
    async def run(self, address: str) -> str:
        async with Saga.open() as saga:
            await saga.call("reserve_inventory", sku="widget", qty=1)
            await saga.call("ship_order", address=address)
        return "shipped"


@workflow.defn(name="TwoSagas")
class TwoSagas:
    """Opens a second saga in the same run: refused before it does anything."""

    @workflow.run
    async def run(self) -> str:
        async with Saga.open() as saga:
            await saga.call("reserve_inventory", sku="widget", qty=1)
        async with Saga.open() as again:
            await again.call("reserve_inventory", sku="widget", qty=1)
        return "twice"


@workflow.defn(name="OwnApproveSignal")
class OwnApproveSignal:
    """Has a signal named `approve` of its own, which would bypass the gate: refused."""

    @workflow.signal
    def approve(self, body: dict[str, object]) -> None:
        pass

    @workflow.run
    async def run(self) -> str:
        async with Saga.open() as saga:
            await saga.call("reserve_inventory", sku="widget", qty=1)
        return "ran"


class LongInput(BaseModel):
    reservations: int
    fail_at_end: bool = False
    state: SagaState | None = None
    done: int = 0


@workflow.defn(name="LongOrder")
class LongOrder:
    """Reserves one unit at a time, continuing as new every two steps with the saga."""

    @workflow.run
    async def run(self, inp: LongInput) -> int:
        options = SagaOptions(continue_as_new_after_steps=2)
        async with Saga.open(options, state=inp.state) as saga:
            while inp.done < inp.reservations:
                await saga.call("reserve_inventory", sku="widget", qty=1)
                inp.done += 1
                if inp.done < inp.reservations and saga.should_continue_as_new():
                    state = await saga.handover()
                    workflow.continue_as_new(inp.model_copy(update={"state": state}))
            if inp.fail_at_end:
                await saga.call("ship_order", address="nowhere")
        return saga.next_step


class _NoCompensation(Saga):
    """A plausible edit: forget to compensate (the activities of the undo are missing)."""

    async def _compensate(self) -> None:
        return None


@workflow.defn(name="OrderWorkflow")
class ForgetsToCompensate(OrderWorkflow):
    @workflow.run
    async def run(self, order: Order) -> Receipt:
        original = Saga.open

        def without_compensation(options: Any = None, *, state: Any = None) -> Saga:
            saga = original(options, state=state)
            saga.__class__ = _NoCompensation
            return saga

        Saga.open = without_compensation  # type: ignore[method-assign]
        try:
            return await super().run(order)
        finally:
            Saga.open = original  # type: ignore[method-assign]


@workflow.defn(name="ForgetsHandover")
class ForgetsHandover:
    """Continues as new after one step without handing the saga over."""

    @workflow.run
    async def run(self, continued: bool) -> int:
        async with Saga.open() as saga:
            await saga.call("reserve_inventory", sku="widget", qty=1)
            if not continued:
                workflow.continue_as_new(True)
        return saga.next_step


IBAN = "DE89370400440532013000"


@workflow.defn(name="ParallelWires")
class ParallelWires:
    """Two irreversible calls at once (gather runs each in a task of its own): refused."""

    @workflow.run
    async def run(self) -> str:
        async with Saga.open() as saga:
            await saga.call("charge_card", amount=5)
            await asyncio.gather(
                saga.call("send_wire_transfer", iban=IBAN, amount=1),
                saga.call("send_wire_transfer", iban="DE00EVIL", amount=999_999),
            )
        return "wired"


@workflow.defn(name="ForgetsToAwait")
class ForgetsToAwait:
    """Starts a call in a task of its own and leaves the block without awaiting it."""

    @workflow.run
    async def run(self) -> str:
        async with Saga.open() as saga:
            await saga.call("charge_card", amount=5)
            self._pending = asyncio.ensure_future(
                saga.call("reserve_inventory", sku="widget", qty=1)
            )
            await asyncio.sleep(0)  # the call has started; the block leaves without it
        return "left"


@workflow.defn(name="SwallowsCancel")
class SwallowsCancel:
    """Swallows the cancellation of an approval wait and calls another tool."""

    @workflow.run
    async def run(self) -> str:
        async with Saga.open() as saga:
            await saga.call("charge_card", amount=5)
            with contextlib.suppress(asyncio.CancelledError):
                await saga.call("send_wire_transfer", iban=IBAN, amount=5)
            await saga.call("reserve_inventory", sku="widget", qty=1)
        return "carried on"


@workflow.defn(name="WaitsForTheEnd", failure_exception_types=[ValueError])
class WaitsForTheEnd:
    """Has an update of its own that waits for the saga's end, and lists ValueError as
    a workflow failure (so a ValueError in the block fails the workflow, not its task)."""

    def __init__(self) -> None:
        self.asked = False
        self.finished = False

    @workflow.update
    async def wait_done(self) -> str:
        self.asked = True
        await workflow.wait_condition(lambda: self.finished)
        return "done"

    @workflow.run
    async def run(self, explode: bool) -> str:
        try:
            async with Saga.open() as saga:
                await saga.call("charge_card", amount=5)
                await workflow.wait_condition(lambda: self.asked)
                if explode:
                    raise ValueError("a listed failure type")
        finally:
            self.finished = True
        return "closed"


class ForwardInput(BaseModel):
    state: SagaState | None = None
    hops: int = 0


@workflow.defn(name="ForwardsInput")
class ForwardsInput:
    """Continues as new once before opening its saga, forwarding its input whole (a
    state planted in it reaches a continued run)."""

    @workflow.run
    async def run(self, inp: ForwardInput) -> str:
        if inp.hops == 0:
            workflow.continue_as_new(inp.model_copy(update={"hops": 1}))
        async with Saga.open(state=inp.state) as saga:
            await saga.call("charge_card", amount=5)
        return "charged"


@workflow.defn(name="CallsAfterTheBlock")
class CallsAfterTheBlock:
    @workflow.run
    async def run(self) -> str:
        async with Saga.open() as saga:
            await saga.call("reserve_inventory", sku="widget", qty=1)
        await saga.call("reserve_inventory", sku="widget", qty=1)
        return "twice"


@workflow.defn(name="OpensLater")
class OpensLater:
    """Opens its saga only once signalled `go`."""

    def __init__(self) -> None:
        self.go = False

    @workflow.signal(name="go")
    def on_go(self) -> None:
        self.go = True

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.go)
        async with Saga.open() as saga:
            await saga.call("charge_card", amount=5)
        return "charged"
