"""Parent workflows of the ended-saga tests: each starts the order saga
(examples.order_workflow) as a child, waits until told, then ends."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel

    from sagacity.examples.order_workflow import Order, OrderWorkflow
    from sagacity.workflows._saga import start_child_saga


class ParentInput(BaseModel):
    child_id: str
    order: Order
    helper: bool = True
    """Start the child with start_child_saga (else Temporal's own default: TERMINATE)."""
    policy: str | None = None
    """A parent-close policy to ask the helper for, by name."""


@workflow.defn(name="OrdersParent")
class OrdersParent:
    """Starts one child order saga, then fails once signalled `give_up` (or waits to be
    terminated)."""

    def __init__(self) -> None:
        self.giving_up = False

    @workflow.signal
    def give_up(self) -> None:
        self.giving_up = True

    @workflow.run
    async def run(self, inp: ParentInput) -> str:
        if inp.helper:
            policy = workflow.ParentClosePolicy[inp.policy or "REQUEST_CANCEL"]
            await start_child_saga(
                OrderWorkflow.run, inp.order, id=inp.child_id, parent_close_policy=policy
            )
        else:
            await workflow.start_child_workflow(OrderWorkflow.run, inp.order, id=inp.child_id)
        await workflow.wait_condition(lambda: self.giving_up)
        raise ApplicationError("the parent gives up", type="ParentGaveUp", non_retryable=True)


@workflow.defn(name="Stranger")
class Stranger:
    """Not a saga: started under a saga's id once the saga's own run ended, it is another
    run chain, which no reset may take for the saga's."""

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)
