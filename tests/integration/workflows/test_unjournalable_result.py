"""A tool that ran but returned something the journal cannot hold: its effect is live,
so it is journaled EXECUTED with a stand-in (and compensated), and the saga fails with a
message that says so. Never recorded as FAILED, which would leave the effect undone."""

from __future__ import annotations

import uuid
from pathlib import Path

from sagacity.journal._chain import verify_chain
from sagacity.journal._phases import SagaStatus
from sagacity.tools._decorators import CompensationContext, ToolContext, compensable, compensation
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker.client._client import saga_result
from sagacity.workflows._models import SagaInput, SagaResult, ToolCall
from tests.support.workflows import entries_of


class Provider:
    def __init__(self) -> None:
        self.charged: list[str] = []
        self.refunded: list[str] = []

    @compensable("refund")
    def charge(self, amount: int, ctx: ToolContext) -> dict[str, object]:
        self.charged.append(ctx.idempotency_key)
        return {"charge_id": 2**63 - 5, "amount": amount}  # no exact JSON form

    @compensation
    def refund(self, ctx: CompensationContext) -> None:
        self.refunded.append(ctx.idempotency_key)


async def test_unjournalable_result_is_executed_compensated_and_fails_the_saga(
    temporal_env, journal, tmp_path: Path
) -> None:
    provider = Provider()
    queue = f"u-{uuid.uuid4().hex[:8]}"
    async with new_worker(
        temporal_env.client, store=journal, toolbox=Toolbox.build(provider), task_queue=queue
    ):
        handle = await temporal_env.client.start_workflow(
            "AgentSaga",
            SagaInput(plan=[ToolCall(tool="charge", args={"amount": 100})]),
            id=f"u-{uuid.uuid4().hex[:8]}",
            task_queue=queue,
            result_type=SagaResult,
        )
        result = await saga_result(handle)

    assert result.status is SagaStatus.COMPENSATED
    assert "result not journaled" in (result.first_failure or "")
    executed = entries_of(journal, result.saga_id, "EXECUTED")
    stand_in = executed[0].result["unjournalable_result"]
    assert stand_in["type"] == "dict" and "9223372036854775803" in stand_in["repr_prefix"]
    assert entries_of(journal, result.saga_id, "FAILED") == []
    assert [e.step for e in entries_of(journal, result.saga_id, "COMPENSATED")] == [1]
    assert provider.charged == provider.refunded == [f"{result.saga_id}:1"]
    assert verify_chain(result.saga_id, journal.entries(result.saga_id)).ok
