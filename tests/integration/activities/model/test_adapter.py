"""The adapter against the loopback server, without Temporal: what goes on the wire, how
replies become turns, and which failures are retryable."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from sagacity.activities._models import ChatMessage, ModelSettings, ModelTurnInput, ToolCall
from sagacity.activities._openai_model import (
    INVALID_ARGUMENTS_KEY,
    OpenAIChatModel,
    parse_arguments,
)
from tests.support.chat_server import ChatServer, Reply, call, completion, error

SCHEMAS: list[dict[str, object]] = [
    {
        "type": "function",
        "function": {
            "name": "reserve_inventory",
            "description": "Reserve stock.",
            "parameters": {"type": "object", "properties": {"sku": {"type": "string"}}},
        },
    }
]


def turn_input(*messages: ChatMessage, **settings: Any) -> ModelTurnInput:
    return ModelTurnInput(
        saga_id="saga-1",
        settings=ModelSettings(provider="openai", **settings),
        messages=list(messages) or [ChatMessage(role="user", content="go")],
    )


async def test_request_carries_conversation_tools_model_and_key(
    chat_server: ChatServer, adapter: OpenAIChatModel
) -> None:
    chat_server.script(completion(content="done"))
    conversation = [
        ChatMessage(role="system", content="be careful"),
        ChatMessage(role="user", content="reserve a widget"),
        ChatMessage(
            role="assistant",
            tool_calls=[ToolCall(tool="reserve_inventory", args={"sku": "w"}, call_id="c1")],
        ),
        ChatMessage(role="tool", name="reserve_inventory", tool_call_id="c1", content='{"ok":1}'),
    ]
    turn = await adapter.next_turn(
        turn_input(*conversation, model="test-model", temperature=0.2), SCHEMAS
    )

    assert turn.final == "done" and turn.tool_calls == []
    sent = chat_server.requests[0]
    assert sent["model"] == "test-model" and sent["temperature"] == 0.2
    assert sent["tools"] == SCHEMAS
    assert sent["messages"] == [
        {"role": "system", "content": "be careful"},
        {"role": "user", "content": "reserve a widget"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "reserve_inventory", "arguments": '{"sku": "w"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"ok":1}'},
    ]
    assert chat_server.headers[0]["authorization"] == "Bearer test"


async def test_defaults_no_tools_and_no_temperature_are_left_out(
    chat_server: ChatServer, adapter: OpenAIChatModel
) -> None:
    chat_server.script(completion(content="hi"))
    await adapter.next_turn(turn_input(), [])
    sent = chat_server.requests[0]
    assert sent["model"] == "default-model"
    assert "tools" not in sent and "temperature" not in sent


async def test_tool_calls_keep_their_order_ids_and_arguments(
    chat_server: ChatServer, adapter: OpenAIChatModel
) -> None:
    chat_server.script(
        completion(
            call("b_tool", {"x": 1}, "id-b"),
            call("a_tool", "{not json", "id-a"),
            call("c_tool", "[1, 2]", "id-c"),
            call("d_tool", "", "id-d"),
        )
    )
    turn = await adapter.next_turn(turn_input(), SCHEMAS)
    assert [(c.tool, c.call_id) for c in turn.tool_calls] == [
        ("b_tool", "id-b"),
        ("a_tool", "id-a"),
        ("c_tool", "id-c"),
        ("d_tool", "id-d"),
    ]
    assert [c.args for c in turn.tool_calls] == [
        {"x": 1},
        {INVALID_ARGUMENTS_KEY: "{not json"},
        {INVALID_ARGUMENTS_KEY: "[1, 2]"},
        {},
    ]
    assert turn.final is None


async def test_missing_call_ids_get_stable_stand_ins(
    chat_server: ChatServer, adapter: OpenAIChatModel
) -> None:
    no_id = call("a_tool", {})
    del no_id["id"]
    chat_server.script(Reply(completion(no_id, no_id).body))
    turn = await adapter.next_turn(turn_input(), SCHEMAS)
    assert [c.call_id for c in turn.tool_calls] == ["call_1_1", "call_1_2"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ({"a": 1}, {"a": 1}),  # servers that send an object instead of a string
        (None, {}),
        ("  ", {}),
        ('"text"', {INVALID_ARGUMENTS_KEY: '"text"'}),
        ('{"a": NaN}', {INVALID_ARGUMENTS_KEY: '{"a": NaN}'}),
        ("[" * 100_000, {INVALID_ARGUMENTS_KEY: "[" * 2_000}),
    ],
)
def test_parse_arguments(raw: object, expected: dict[str, Any]) -> None:
    assert parse_arguments(raw) == expected


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_client_errors_are_not_retryable_and_name_the_provider_message(
    chat_server: ChatServer, adapter: OpenAIChatModel, status: int
) -> None:
    chat_server.script(error(status, "model 'gpt-x' does not exist"))
    with pytest.raises(ApplicationError) as raised:
        await adapter.next_turn(turn_input(), SCHEMAS)
    assert raised.value.type == "ModelRequestError" and raised.value.non_retryable
    assert f"HTTP {status}" in str(raised.value)
    assert "model 'gpt-x' does not exist" in str(raised.value)
    assert len(chat_server.requests) == 1  # the client itself never retries


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503])
async def test_transient_statuses_are_retryable(
    chat_server: ChatServer, adapter: OpenAIChatModel, status: int
) -> None:
    chat_server.script(error(status, "slow down", "rate_limit_exceeded"))
    with pytest.raises(ApplicationError) as raised:
        await adapter.next_turn(turn_input(), SCHEMAS)
    assert raised.value.type == "ModelUnavailable" and not raised.value.non_retryable
    assert f"HTTP {status}" in str(raised.value) and "slow down" in str(raised.value)
    assert len(chat_server.requests) == 1


async def test_retry_after_is_honoured_and_capped(
    chat_server: ChatServer, adapter: OpenAIChatModel
) -> None:
    chat_server.script(
        error(429, "rate limited", retry_after_ms="1500"),
        error(429, "rate limited", retry_after="3600"),
    )
    delays = []
    for _ in range(2):
        with pytest.raises(ApplicationError) as raised:
            await adapter.next_turn(turn_input(), SCHEMAS)
        delays.append(raised.value.next_retry_delay)
    assert [d.total_seconds() if d else None for d in delays] == [1.5, 60.0]


async def test_non_json_error_body_is_reported(
    chat_server: ChatServer, adapter: OpenAIChatModel
) -> None:
    chat_server.script(Reply("upstream model crashed", status=400))
    with pytest.raises(ApplicationError) as raised:
        await adapter.next_turn(turn_input(), SCHEMAS)
    assert "upstream model crashed" in str(raised.value)


async def _unavailable(model: OpenAIChatModel) -> ApplicationError:
    """The model's next turn fails as ModelUnavailable, retryable (the client is closed
    after); the error, for what it says."""
    try:
        with pytest.raises(ApplicationError) as raised:
            await model.next_turn(turn_input(), SCHEMAS)
    finally:
        await model.aclose()
    assert raised.value.type == "ModelUnavailable" and not raised.value.non_retryable
    return raised.value


async def test_connection_refused_is_retryable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens
    model = OpenAIChatModel(base_url=f"http://127.0.0.1:{port}/v1", model="m")
    raised = await _unavailable(model)
    assert f"127.0.0.1:{port}" in str(raised)


async def test_timeout_is_retryable(chat_server: ChatServer) -> None:
    chat_server.script(Reply(completion(content="late").body, delay=2.0))
    model = OpenAIChatModel(base_url=chat_server.url, model="m", timeout=0.3)
    raised = await _unavailable(model)
    assert "timed out" in str(raised)


async def test_a_saga_cannot_send_the_key_elsewhere(
    chat_server: ChatServer, adapter: OpenAIChatModel
) -> None:
    with pytest.raises(ApplicationError) as raised:
        await adapter.next_turn(turn_input(base_url="https://evil.example/v1"), SCHEMAS)
    assert raised.value.type == "ModelBaseUrlNotAllowed" and raised.value.non_retryable
    assert chat_server.requests == []

    chat_server.script(completion(content="same server"))
    turn = await adapter.next_turn(turn_input(base_url=chat_server.url + "/"), SCHEMAS)
    assert turn.final == "same server"


async def test_an_allowed_base_url_is_used(chat_server: ChatServer) -> None:
    with ChatServer() as other:
        other.script(completion(content="from the other server"))
        model = OpenAIChatModel(base_url=chat_server.url, model="m", allowed_base_urls=[other.url])
        try:
            turn = await model.next_turn(turn_input(base_url=other.url), SCHEMAS)
        finally:
            await model.aclose()
    assert turn.final == "from the other server"
    assert chat_server.requests == [] and len(other.requests) == 1


async def test_no_model_name_is_a_request_error(chat_server: ChatServer) -> None:
    model = OpenAIChatModel(base_url=chat_server.url)
    try:
        with pytest.raises(ApplicationError) as raised:
            await model.next_turn(turn_input(), SCHEMAS)
    finally:
        await model.aclose()
    assert raised.value.non_retryable and "SAGACITY_OPENAI_MODEL" in str(raised.value)


@pytest.mark.parametrize("body", [{"choices": []}, "a plain string", [1, 2], {"weird": 1}])
async def test_a_reply_that_is_not_a_completion_is_retryable(
    chat_server: ChatServer, adapter: OpenAIChatModel, body: Any
) -> None:
    chat_server.script(Reply(body))
    with pytest.raises(ApplicationError) as raised:
        await adapter.next_turn(turn_input(), SCHEMAS)
    assert raised.value.type == "ModelResponseError" and not raised.value.non_retryable


async def test_a_filtered_answer_is_not_a_final_answer(
    chat_server: ChatServer, adapter: OpenAIChatModel
) -> None:
    filtered = completion(content=None)
    filtered.body["choices"][0]["finish_reason"] = "content_filter"
    chat_server.script(filtered)
    with pytest.raises(ApplicationError) as raised:
        await adapter.next_turn(turn_input(), SCHEMAS)
    assert raised.value.non_retryable and "content filter" in str(raised.value)
