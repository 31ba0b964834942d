"""A user workflow on the saga API that continues as new between its two steps, each
step held until the test says `go`: the test changes the approver registry and restarts
the worker exactly between them."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel

    from sagacity.workflows._models import RequesterClaim, SagaOptions, SagaState
    from sagacity.workflows._saga import Saga


class PayInput(BaseModel):
    requester: RequesterClaim
    iban: str
    amount: int
    state: SagaState | None = None


@workflow.defn(name="PaysAfterContinuing")
class PaysAfterContinuing:
    """Reserves stock, waits for `go`, continues as new with the saga's state, waits for
    `go` again, then pays (irreversible: it waits for an approval)."""

    def __init__(self) -> None:
        self._go = False

    @workflow.signal(name="go")
    def go(self) -> None:
        self._go = True

    @workflow.run
    async def run(self, inp: PayInput) -> str:
        options = SagaOptions(requester=inp.requester)
        async with Saga.open(options, state=inp.state) as saga:
            if inp.state is None:
                await saga.call("reserve_inventory", sku="widget", qty=1)
                await workflow.wait_condition(lambda: self._go)
                state = await saga.handover()
                workflow.continue_as_new(inp.model_copy(update={"state": state}))
            await workflow.wait_condition(lambda: self._go)
            await saga.call("pay", iban=inp.iban, amount=inp.amount)
        return "paid"
