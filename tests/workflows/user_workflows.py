"""Small user workflows on the saga API, each pinning one rule of its contract."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel

    from sagacity.examples.order_workflow import Order, OrderWorkflow, Receipt
    from sagacity.workflows.models import SagaOptions, SagaState
    from sagacity.workflows.saga import Saga


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
