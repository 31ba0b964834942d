"""An agent's run that ends without an answer still ends the saga compensated: a tool
whose failure the SDK raises (failure_error_function=None) and a run the SDK gives up on
(max_turns) both fail the saga, which undoes what ran."""

from __future__ import annotations

import uuid

import pytest

from sagacity.examples.orders import INITIAL_STOCK
from tests.integration.contrib.openai_agents.agent_workflows import AgentRunEnds, RunEnds
from tests.integration.contrib.openai_agents.conftest import AgentRig
from tests.support.chat_server import call, completion
from tests.support.workers import phases

pytestmark = [pytest.mark.temporal, pytest.mark.postgres, pytest.mark.timeout(90)]


async def run(rig: AgentRig, inp: RunEnds) -> tuple[str, str | None, str]:
    handle = await rig.sagas.start_workflow(
        AgentRunEnds.run, inp, saga_id=f"agent-run-{uuid.uuid4().hex[:12]}"
    )
    report = await handle.result()
    assert rig.sagas.verify(handle.id).ok
    return report.status, report.failure, handle.id


async def test_a_tool_failure_the_sdk_raises_compensates(rig: AgentRig) -> None:
    rig.server.script(
        completion(call("reserve_inventory", {"sku": "widget", "qty": 2}, "r")),
        completion(call("ship_order", {"address": "nowhere"}, "s")),
        completion(content="never asked"),
    )
    status, failure, saga_id = await run(rig, RunEnds(strict_tools=True))

    assert status == "COMPENSATED"
    assert failure is not None and "step 2 (ship_order) failed" in failure
    assert len(rig.server.requests) == 2  # the run stopped at the failure
    assert phases(rig.store, saga_id)[-4:] == [
        ("FAILED", 2),
        ("COMPENSATING", 0),
        ("COMPENSATED", 1),
        ("SAGA_CLOSED", 0),
    ]
    assert rig.shop.stock("widget") == INITIAL_STOCK["widget"]


async def test_a_run_out_of_turns_compensates(rig: AgentRig) -> None:
    rig.server.script(
        completion(call("reserve_inventory", {"sku": "widget", "qty": 2}, "r")),
        completion(call("charge_card", {"amount": 700}, "c")),
        completion(content="never asked"),
    )
    status, failure, saga_id = await run(rig, RunEnds(max_turns=2))

    assert status == "COMPENSATED"
    assert failure is not None and "MaxTurnsExceeded" in failure
    assert phases(rig.store, saga_id)[-4:] == [
        ("COMPENSATING", 0), ("COMPENSATED", 2), ("COMPENSATED", 1), ("SAGA_CLOSED", 0),
    ]  # fmt: skip
    assert [c["refunded"] for c in rig.shop.charges()] == [True]
