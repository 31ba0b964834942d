"""A user's own workflow on the saga API whose payment step can end unknown."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sagacity.workflows._models import RequesterClaim, SagaOptions
    from sagacity.workflows._saga import Saga


@workflow.defn(name="DirtyOrder")
class DirtyOrder:
    @workflow.run
    async def run(self, effect: str, requester: RequesterClaim | None = None) -> str:
        options = SagaOptions(
            tool_timeout_seconds=2, tool_heartbeat_timeout_seconds=1, requester=requester
        )
        async with Saga.open(options) as saga:
            await saga.call("reserve_inventory", sku="widget", qty=1)
            await saga.call("hanging_payment", amount=99, effect=effect)
        return "paid"
