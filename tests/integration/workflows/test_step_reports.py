"""What a saga reports about each step once it is undone: steps nothing can undo say
NOT_COMPENSABLE (not EXECUTED), and an approved step carries the hash that was approved."""

from __future__ import annotations

from typing import Any

from sagacity.approval._judge import approval_hash
from sagacity.journal._phases import SagaStatus
from sagacity.worker.client._client import saga_result
from sagacity.workflows._models import SagaInput, ToolCall
from tests.integration.workflows.test_approval_flows import decision, pending
from tests.support.workflows import RESERVE, SHIP_FAILS, WIRE

EXPORT = ToolCall(tool="catalog_export", args={"size_bytes": 10})


async def test_live_steps_after_compensation_are_not_compensable(saga: Any) -> None:
    handle = await saga.start(SagaInput(plan=[RESERVE, EXPORT, WIRE, SHIP_FAILS]))
    p = await pending(handle)
    await handle.signal("approve", decision(p))
    result = await saga_result(handle)

    assert result.status is SagaStatus.COMPENSATED
    by_tool = {s.tool: s for s in result.steps}
    assert by_tool["reserve_inventory"].status == "COMPENSATED"
    assert by_tool["catalog_export"].status == "NOT_COMPENSABLE"
    wire = by_tool["send_wire_transfer"]
    assert wire.status == "NOT_COMPENSABLE" and wire.approver == "alice"
    assert wire.payload_sha256 == p.payload_sha256 == approval_hash(wire.tool, p.payload)
    asked = [s.tool for s in result.steps if s.payload_sha256 is not None]
    assert asked == ["send_wire_transfer"]  # no other step waited for an approval
    assert by_tool["ship_order"].status == "FAILED"
    assert len(saga.shop.wires()) == 1  # it really ran and stays live
