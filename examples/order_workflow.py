"""A user's own order workflow on the saga API (not AgentSaga).

The workflow reserves stock, charges the card, ships, and pays the supplier by wire. The
wire is irreversible, so it waits for a person to approve its exact payload; if anything
fails, is rejected or the workflow is cancelled, the charge is refunded and the stock
released, newest first. Run it with the shop's tools (examples.orders) on any worker that
has SagacityPlugin:

    worker = Worker(client, task_queue="orders", workflows=[OrderWorkflow])

and approve the wire with `SagaClient.approve(order_id, approver=...)` or
`sagacity approve ORDER_ID`.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, Field

    from sagacity.worker import Saga, SagaFailedError, SagaOptions, StepError


class Order(BaseModel):
    sku: str
    qty: int
    amount: int
    """In minor units (cents)."""
    address: str
    supplier_iban: str | None = None
    """Pay the supplier this order's amount by wire (irreversible: approved first)."""
    options: SagaOptions = Field(default_factory=SagaOptions)
    """How the saga runs: timeouts and retries. Who may approve is not the order's to
    say: the workflow sets it (FINANCE), whatever the order carries."""
    ship_best_effort: bool = False
    """Catch a shipping failure and carry on. It still fails the saga: a caught step
    error is not a success, and leaving the saga compensates all the same."""


FINANCE = ["alice@example.com", "bob@example.com"]
"""Who may approve the supplier wire: fixed in code, so whoever submits an order cannot
name its approver."""


class Receipt(BaseModel):
    status: str
    reservation: str | None = None
    charge: str | None = None
    shipment: str | None = None
    wire: str | None = None
    failure: str | None = None


@workflow.defn(name="OrderWorkflow")
class OrderWorkflow:
    @workflow.run
    async def run(self, order: Order) -> Receipt:
        receipt = Receipt(status="COMPLETED")
        try:
            options = order.options.model_copy(update={"approvers": FINANCE})
            async with Saga.open(options) as saga:
                hold = await saga.call("reserve_inventory", sku=order.sku, qty=order.qty)
                receipt.reservation = hold["reservation"]
                charge = await saga.call("charge_card", amount=order.amount)
                receipt.charge = charge["charge"]
                try:
                    shipment = await saga.call("ship_order", address=order.address)
                    receipt.shipment = shipment["shipment"]
                except StepError:
                    if not order.ship_best_effort:
                        raise
                    workflow.logger.warning("shipping failed; carrying on")  # swallowed
                if order.supplier_iban is not None:
                    wire = await saga.call(
                        "send_wire_transfer", iban=order.supplier_iban, amount=order.amount
                    )
                    receipt.wire = wire["wire"]
        except SagaFailedError as failed:
            # Compensated: report it as this workflow's result rather than fail the run.
            return Receipt(status=failed.result.status.value, failure=failed.result.first_failure)
        return receipt
