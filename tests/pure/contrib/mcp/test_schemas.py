"""A server's input schema as the judge of a call, and an MCP result as a step's outcome:
the branches, I/O-free (no server, no session)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from mcp_types import CallToolResult, ImageContent, TextContent

from sagacity._errors import ToolInputError
from sagacity.contrib.mcp import InputSchema, McpMappingError, McpToolError, OutputSchema
from sagacity.contrib.mcp._results import step_result, undo_arguments
from sagacity.tools._decorators import ToolResultError

CHARGE = {
    "type": "object",
    "properties": {
        "amount": {"type": "integer", "minimum": 1},
        "currency": {"type": "string", "default": "EUR", "enum": ["EUR", "USD"]},
        "card": {"type": "object", "properties": {"token": {"type": "string"}}},
    },
    "required": ["amount"],
    "additionalProperties": False,
}


def charge() -> InputSchema:
    return InputSchema("shop", "charge_card", CHARGE)


def test_the_payload_is_the_arguments_with_the_top_level_defaults() -> None:
    assert charge().payload({"amount": 100}) == {"amount": 100, "currency": "EUR"}
    assert charge().payload({"amount": 100, "currency": "USD"})["currency"] == "USD"


def test_every_problem_is_named_with_its_path_and_nothing_is_sent() -> None:
    with pytest.raises(ToolInputError) as caught:
        charge().payload({"amount": "ten", "currency": "GBP", "card": {"token": 7}, "tip": 1})
    message = str(caught.value)
    assert message.startswith("invalid arguments for MCP tool 'charge_card'")
    assert "amount: 'ten' is not of type 'integer'" in message
    assert "currency: 'GBP' is not one of ['EUR', 'USD']" in message
    assert "card.token: 7 is not of type 'string'" in message
    assert "(arguments): Additional properties are not allowed ('tip' was unexpected)" in message
    assert message.endswith("nothing was sent")


def test_a_missing_required_argument_is_named() -> None:
    with pytest.raises(ToolInputError, match=r"\(arguments\): 'amount' is a required property"):
        charge().payload({})


@pytest.mark.parametrize("bad", [[1, 2], "amount=1", None])
def test_arguments_must_be_an_object(bad: object) -> None:
    with pytest.raises(ToolInputError, match="takes a JSON object of named arguments"):
        charge().payload(bad)


def test_values_without_a_json_form_are_refused() -> None:
    with pytest.raises(ToolInputError, match="not JSON"):
        InputSchema("shop", "any", {}).payload({"amount": math.nan})
    with pytest.raises(ToolInputError, match="not JSON"):
        InputSchema("shop", "any", {}).payload({"when": object()})


def test_the_payload_does_not_alias_the_callers_values() -> None:
    args: dict[str, Any] = {"amount": 5, "card": {"token": "tok"}}
    payload = charge().payload(args)
    args["card"]["token"] = "changed"
    assert payload["card"] == {"token": "tok"}


def test_a_schema_less_tool_takes_any_object_and_tells_the_model_it_is_an_object() -> None:
    for schema in ({}, {"type": "object"}):
        anything = InputSchema("shop", "notes", schema)
        assert anything.constrains_nothing
        assert anything.payload({"free": ["form"]}) == {"free": ["form"]}
        assert anything.parameters == {"type": "object", "properties": {}}
    assert not charge().constrains_nothing


def test_a_ref_to_elsewhere_is_never_fetched_and_refuses_the_call() -> None:
    remote = InputSchema("shop", "r", {"type": "object", "properties": {
        "a": {"$ref": "https://example.com/schema.json"}}})  # fmt: skip
    with pytest.raises(ToolInputError, match=r"\$ref that does not resolve"):
        remote.payload({"a": 1})


def test_a_schema_too_deep_or_too_big_is_refused_at_start() -> None:
    deep: dict[str, Any] = {"type": "object"}
    for _ in range(70):
        deep = {"type": "object", "properties": {"x": deep}}
    with pytest.raises(McpMappingError, match="nested more than 64 levels"):
        InputSchema("shop", "deep", deep)
    big = {"type": "object", "description": "x" * 300_000}
    with pytest.raises(McpMappingError, match="larger than"):
        InputSchema("shop", "big", big)


# ---- results ---------------------------------------------------------------------------


def result(**fields: Any) -> CallToolResult:
    return CallToolResult.model_validate(fields)


def test_is_error_is_a_failure_with_the_servers_words() -> None:
    failed = CallToolResult(
        content=[TextContent(type="text", text="carrier refused"),
                 ImageContent(type="image", data="aGk=", mime_type="image/png")],
        is_error=True,
    )  # fmt: skip
    with pytest.raises(McpToolError) as caught:
        step_result("shop", "ship_order", failed, None)
    assert str(caught.value) == (
        "MCP tool 'ship_order' on server 'shop' failed: carrier refused [image content]"
    )


def test_a_structured_result_is_the_steps_result_as_a_python_tool_would_return_it() -> None:
    answer = result(content=[{"type": "text", "text": '{"charge": "c1"}'}],
                    structuredContent={"charge": "c1"}, _meta={"trace": "x"})  # fmt: skip
    assert step_result("shop", "charge_card", answer, None) == {"charge": "c1"}


def test_an_unstructured_result_is_its_content_blocks() -> None:
    answer = result(content=[{"type": "text", "text": "ok"}], _meta={"trace": "x"})
    assert step_result("shop", "notes", answer, None) == {
        "content": [{"type": "text", "text": "ok"}]
    }


def test_a_result_that_breaks_the_output_schema_ran_and_carries_its_value() -> None:
    schema = {
        "type": "object",
        "properties": {"charge": {"type": "string"}},
        "required": ["charge"],
    }
    output = OutputSchema("shop", "charge_card", schema)
    answer = result(content=[], structuredContent={"charge": 7})
    with pytest.raises(ToolResultError, match="ran, but its result breaks its output schema") as e:
        step_result("shop", "charge_card", answer, output)
    assert e.value.value == {"content": [], "structuredContent": {"charge": 7}}  # the evidence
    with pytest.raises(ToolResultError, match="returned no structured content"):
        step_result("shop", "charge_card", result(content=[]), output)


def test_the_default_undo_arguments_are_the_recorded_result() -> None:
    assert undo_arguments({"charge": "c1"}, "undo") == {"charge": "c1"}
    with pytest.raises(McpToolError, match="not a JSON object"):
        undo_arguments(["c1"], "undo")
