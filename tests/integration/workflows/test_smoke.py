from __future__ import annotations

from sagacity.journal._chain import verify_chain
from sagacity.journal._phases import SagaStatus
from sagacity.workflows._models import SagaInput, ToolCall


async def test_happy(saga) -> None:
    result = await saga.run(
        SagaInput(
            plan=[
                ToolCall(tool="reserve_inventory", args={"sku": "widget", "qty": 2}),
                ToolCall(tool="charge_card", args={"amount": 100}),
                ToolCall(tool="ship_order", args={"address": "Main St 1"}),
            ]
        )
    )
    print(result)
    assert result.status is SagaStatus.COMPLETED
    entries = list(saga.store.entries(result.saga_id))
    for e in entries:
        print(e.seq, e.phase, e.step, e.tool)
    assert verify_chain(result.saga_id, entries).ok
