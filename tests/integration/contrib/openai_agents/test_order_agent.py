"""The order scenario through an OpenAI Agents SDK agent, run by Temporal's agents plugin
on the dev server, its tools as saga steps journaled to PostgreSQL. The model is the
SDK's own chat-completions model talking to a loopback server that answers from a
script; everything else — the plugin's model activities, the SDK's tool execution and
error handling, the saga, the toolbox, compensation and the journal — is production code.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sagacity.examples.orders import INITIAL_STOCK
from sagacity.journal._phases import Phase
from tests.integration.contrib.openai_agents.conftest import AgentRig
from tests.support.chat_server import call, completion
from tests.support.workers import phases

pytestmark = [pytest.mark.temporal, pytest.mark.postgres, pytest.mark.timeout(90)]

RESERVE = {"sku": "widget", "qty": 2}
CHARGE = {"amount": 2500}


def tool_messages(rig: AgentRig, request: int) -> dict[str, Any]:
    """The tool outputs the SDK sent the model in request `request`, by call id."""
    return {m["tool_call_id"]: m["content"] for m in rig.server.messages(request, "tool")}


async def test_a_failed_shipment_compensates_although_the_agent_says_done(rig: AgentRig) -> None:
    rig.server.script(
        completion(call("reserve_inventory", RESERVE, "r")),
        completion(call("charge_card", CHARGE, "c")),
        completion(call("ship_order", {"address": "nowhere"}, "s")),
        completion(content="done"),
    )
    handle = await rig.start()
    report = await handle.result()

    assert report.agent_said == "done"
    assert report.status == "COMPENSATED"
    assert "ship_order" in (report.failure or "")
    # The SDK handed the carrier's refusal to the model as the tool's output, and the
    # model carried on: four requests, the last one answered "done".
    assert len(rig.server.requests) == 4
    assert "carrier refused" in tool_messages(rig, 3)["s"]

    assert phases(rig.store, handle.id) == [
        ("SAGA_OPENED", 0), ("INTENT", 1), ("EXECUTED", 1), ("INTENT", 2), ("EXECUTED", 2),
        ("INTENT", 3), ("FAILED", 3), ("COMPENSATING", 0), ("COMPENSATED", 2), ("COMPENSATED", 1),
        ("SAGA_CLOSED", 0),
    ]  # fmt: skip
    closed = rig.sagas.journal(handle.id)[-1]
    assert closed.phase is Phase.SAGA_CLOSED
    assert closed.result["status"] == "COMPENSATED"
    assert closed.result["final_answer"] == "done"
    assert rig.sagas.verify(handle.id).ok

    ran = [tool for tool, _, _ in rig.shop.calls()]
    assert ran == [
        "reserve_inventory", "charge_card", "ship_order", "refund_card", "release_inventory",
    ]  # fmt: skip
    assert [c["refunded"] for c in rig.shop.charges()] == [True]
    assert rig.shop.stock("widget") == INITIAL_STOCK["widget"]
    assert json.loads(tool_messages(rig, 2)["c"])["amount"] == 2500
