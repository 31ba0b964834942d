"""Whole sagas driven by a model behind a real HTTP server, on the real Temporal dev server.

The model's replies are scripted on the loopback server; everything between — the
adapter, the model activity and its retry policy, the tool runner, the approval gate,
compensation and the journal — is production code.
"""

from __future__ import annotations

import json
from typing import Any

from sagacity.journal._chain import verify_chain
from sagacity.journal._phases import SagaStatus
from sagacity.worker.client._client import saga_result
from tests.integration.workflows.test_approval_flows import decision, pending
from tests.support.chat_server import ModelSaga, call, completion, error
from tests.support.workflows import entries_of, phases

WIRE = {"iban": "DE89370400440532013000", "amount": 5000}


def tool_results(saga: ModelSaga, request: int) -> list[tuple[str, dict[str, Any]]]:
    """(tool_call_id, decoded content) of the tool messages in request `request`."""
    return [
        (m["tool_call_id"], json.loads(m["content"])) for m in saga.server.messages(request, "tool")
    ]


async def test_full_saga_with_approval_runs_through_the_adapter(model_saga: ModelSaga) -> None:
    s = model_saga
    s.server.script(
        completion(
            call("reserve_inventory", {"sku": "widget", "qty": 2}, "r"),
            call("charge_card", {"amount": 100}, "c"),
        ),
        completion(call("send_wire_transfer", WIRE, "w")),
        completion(content="order placed and paid"),
    )
    handle = await s.start(s.input("reserve 2 widgets, charge 100, wire 5000"))
    p = await pending(handle)
    assert p.tool == "send_wire_transfer" and p.step == 3
    assert len(s.server.requests) == 2 and s.shop.wires() == []  # waits; the model too

    await handle.signal("approve", decision(p))
    result = await saga_result(handle)

    assert result.status is SagaStatus.COMPLETED
    assert result.final_answer == "order placed and paid"
    assert [(r.step, r.tool, r.status) for r in result.steps] == [
        (1, "reserve_inventory", "EXECUTED"),
        (2, "charge_card", "EXECUTED"),
        (3, "send_wire_transfer", "EXECUTED"),
    ]
    assert result.steps[2].approver == "alice" and len(s.shop.wires()) == 1

    requests = s.server.requests
    assert len(requests) == 3
    assert all(r["model"] == "test-model" for r in requests)
    expected_tools = sorted(s.toolbox.names())
    assert {"charge_card", "reserve_inventory", "send_wire_transfer"} <= set(expected_tools)
    assert [sorted(s.server.tool_names(i)) for i in range(3)] == [expected_tools] * 3
    assert s.server.messages(0) == [
        {"role": "user", "content": "reserve 2 widgets, charge 100, wire 5000"}
    ]
    # the second request carries the model's own calls and their results, by call id
    [assistant] = s.server.messages(1, "assistant")
    assert [c["id"] for c in assistant["tool_calls"]] == ["r", "c"]
    first, second = tool_results(s, 1)
    assert first[0] == "r" and first[1]["ok"] and first[1]["result"]["qty"] == 2
    assert second[0] == "c" and second[1]["result"]["amount"] == 100
    # the third carries the approved wire's result
    assert [cid for cid, _ in tool_results(s, 2)] == ["r", "c", "w"]
    assert tool_results(s, 2)[2][1]["result"]["iban"] == WIRE["iban"]
    assert verify_chain(handle.id, s.store.entries(handle.id)).ok


async def test_a_later_tool_failure_compensates_what_the_model_ran(model_saga: ModelSaga) -> None:
    s = model_saga
    s.server.script(
        completion(call("reserve_inventory", {"sku": "widget", "qty": 3})),
        completion(call("charge_card", {"amount": 250})),
        completion(call("ship_order", {"address": "Main St 1", "fail": True})),
        completion(content="all good!"),  # never asked: the saga failed at step 3
    )
    result = await s.run(s.input())

    assert result.status is SagaStatus.COMPENSATED
    assert "ship_order" in (result.first_failure or "")
    assert "carrier refused" in (result.first_failure or "")
    assert [c.step for c in result.compensations] == [2, 1]
    assert s.shop.stock("widget") == 10
    assert [c["refunded"] for c in s.shop.charges()] == [True]
    assert len(s.server.requests) == 3 and len(s.server.replies) == 1


async def test_rate_limit_then_success_is_retried_without_rerunning_tools(
    model_saga: ModelSaga,
) -> None:
    s = model_saga
    s.server.script(
        error(429, "Rate limit reached", "rate_limit_exceeded", retry_after_ms="50"),
        completion(call("reserve_inventory", {"sku": "widget", "qty": 2})),
        error(503, "overloaded", "server_error"),
        completion(content="reserved"),
    )
    handle = await s.start(s.input())
    result = await saga_result(handle)

    assert result.status is SagaStatus.COMPLETED and result.final_answer == "reserved"
    requests = s.server.requests
    assert len(requests) == 4
    assert requests[0] == requests[1] and requests[2] == requests[3]  # same question, retried
    tool_phases = [(p, step) for p, step, _ in phases(s.store, handle.id) if step]
    assert tool_phases == [("INTENT", 1), ("EXECUTED", 1)]
    assert s.shop.stock("widget") == 8
    assert len(s.shop.calls("reserve_inventory")) == 1


async def test_a_model_that_stays_unavailable_fails_the_saga_after_the_retries(
    model_saga: ModelSaga,
) -> None:
    s = model_saga
    down = error(503, "model is loading", "server_error", retry_after_ms="20")
    s.server.script(completion(call("reserve_inventory", {"sku": "widget", "qty": 2})))
    s.server.script(*[down] * 5)  # the model activity's policy allows 5 attempts
    result = await s.run(s.input())

    assert result.status is SagaStatus.COMPENSATED
    assert "HTTP 503" in (result.first_failure or "")
    assert "model is loading" in (result.first_failure or "")
    assert s.shop.stock("widget") == 10
    assert len(s.server.requests) == 6 and not s.server.replies


async def test_a_client_error_fails_the_saga_with_the_provider_message(
    model_saga: ModelSaga,
) -> None:
    s = model_saga
    message = "This model's maximum context length is 8192 tokens"
    s.server.script(
        completion(call("reserve_inventory", {"sku": "widget", "qty": 2})),
        completion(call("charge_card", {"amount": 100})),
        error(400, message, "invalid_request_error"),
    )
    result = await s.run(s.input())

    assert result.status is SagaStatus.COMPENSATED
    assert "HTTP 400" in (result.first_failure or "")
    assert message in (result.first_failure or "")
    assert [c.step for c in result.compensations] == [2, 1]
    assert s.shop.stock("widget") == 10
    assert [c["refunded"] for c in s.shop.charges()] == [True]
    assert len(s.server.requests) == 3  # a 400 is not retried


async def test_invalid_calls_are_refused_and_the_model_corrects_itself(
    model_saga: ModelSaga,
) -> None:
    s = model_saga
    malformed = '{"sku": "widget", "qty": '
    s.server.script(
        completion(call("launch_rockets", {"count": 3}, "a")),
        completion(call("reserve_inventory", malformed, "b")),
        completion(call("reserve_inventory", {"sku": "widget", "qty": "many"}, "c")),
        completion(call("reserve_inventory", {"sku": "widget", "qty": 1}, "d")),
        completion(content="reserved one widget"),
    )
    handle = await s.start(s.input(max_invalid_calls=4))
    result = await saga_result(handle)

    assert result.status is SagaStatus.COMPLETED
    assert result.final_answer == "reserved one widget"
    assert [r.status for r in result.steps] == ["REFUSED", "REFUSED", "REFUSED", "EXECUTED"]
    refused = entries_of(s.store, handle.id, "CALL_REFUSED")
    assert [(e.step, e.tool) for e in refused] == [
        (1, "launch_rockets"),
        (2, "reserve_inventory"),
        (3, "reserve_inventory"),
    ]
    assert refused[1].input == {"__invalid_json__": malformed}  # the raw text is evidence
    assert entries_of(s.store, handle.id, "INTENT")[0].step == 4  # nothing ran before
    assert s.shop.stock("widget") == 9

    # each refusal reached the model on its next request, answering the call's id
    for request, call_id, needles in [
        (1, "a", ("unknown tool 'launch_rockets'",)),
        # today the toolbox names the marker key as an extra field; a runner that knows the
        # marker says "not a JSON object" instead — either way the model is told
        (2, "b", ("__invalid_json__", "not a JSON object")),
        (3, "c", ("qty",)),
    ]:
        got_id, content = tool_results(s, request)[-1]
        assert got_id == call_id and content["ok"] is False
        assert content["outcome"] == "REFUSED"
        assert any(n in content["error"] for n in needles), content["error"]
    # the unparseable call is shown back to the model as valid JSON naming the raw text
    shown = s.server.messages(2, "assistant")[-1]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(shown) == {"__invalid_json__": malformed}
    assert verify_chain(handle.id, s.store.entries(handle.id)).ok


async def test_consecutive_invalid_calls_end_the_saga(model_saga: ModelSaga) -> None:
    s = model_saga
    s.server.script(
        completion(call("reserve_inventory", {"sku": "widget", "qty": 4})),
        completion(call("launch_rockets", {})),
        completion(call("reserve_inventory", "not json at all")),
        completion(call("reserve_inventory", {"sku": "widget", "qty": "lots"})),
        completion(content="never asked"),
    )
    result = await s.run(s.input(max_invalid_calls=3))

    assert result.status is SagaStatus.COMPENSATED
    assert "3 invalid tool calls in a row" in (result.first_failure or "")
    assert "qty" in (result.first_failure or "")
    assert [c.step for c in result.compensations] == [1]
    assert s.shop.stock("widget") == 10
    assert len(s.server.requests) == 4


async def test_several_calls_in_one_reply_run_one_at_a_time_in_order(
    model_saga: ModelSaga,
) -> None:
    s = model_saga
    s.server.script(
        completion(
            call("ship_order", {"address": "Main St 1"}, "s"),
            call("charge_card", {"amount": 42}, "c"),
            call("reserve_inventory", {"sku": "gadget", "qty": 1}, "r"),
        ),
        completion(content="done"),
    )
    handle = await s.start(s.input())
    result = await saga_result(handle)

    assert result.status is SagaStatus.COMPLETED
    order = ["ship_order", "charge_card", "reserve_inventory"]
    assert [(r.step, r.tool) for r in result.steps] == list(enumerate(order, start=1))
    # one at a time: each INTENT is followed by its own outcome before the next starts
    tool_entries = [(p, step, tool) for p, step, tool in phases(s.store, handle.id) if step]
    assert tool_entries == [
        (phase, step, tool)
        for step, tool in enumerate(order, start=1)
        for phase in ("INTENT", "EXECUTED")
    ]
    assert [t for t, _, _ in s.shop.calls()] == order
    assert [cid for cid, _ in tool_results(s, 1)] == ["s", "c", "r"]
