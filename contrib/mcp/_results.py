"""An MCP tool result as a saga step's outcome.

`isError: true` is the server saying the call failed; it becomes McpToolError, so the
step is FAILED and the saga compensates — an agent framework would hand the text to its
model as if the call had worked, and the saga would report success over a failed step.

A result that worked is the step's result, as a Python tool's return value would be: its
`structuredContent` when the tool returns one (the tool's typed result; its text blocks
are, by the protocol's advice, the same JSON rendered), else `{"content": [blocks]}`. A
workflow reads `(await saga.call("charge_card", amount=100))["charge"]` from an MCP tool
as from a Python one. A result that breaks the tool's declared output schema ran all the
same, so it is not a failure of the step: it raises ToolResultError, which the runner
journals EXECUTED with a description of the result, and the saga fails and compensates.
"""

from __future__ import annotations

from typing import Any

from mcp_types import CallToolResult, TextContent

from sagacity.journal._bounds import MAX_ERROR_CHARS, cut
from sagacity.tools._decorators import ToolResultError

from ._errors import McpToolError
from ._input_schema import OutputSchema

CONTENT = "content"


def recorded(result: CallToolResult) -> dict[str, Any]:
    """The step's result: the structured content, or the content blocks (as JSON)."""
    if result.structured_content is not None:
        return dict(result.structured_content)
    return {
        CONTENT: [
            block.model_dump(mode="json", by_alias=True, exclude_none=True)
            for block in result.content
        ]
    }


def recorded_whole(result: CallToolResult) -> dict[str, Any]:
    """Both parts of a result, for the evidence of one that breaks its output schema."""
    return {
        CONTENT: [
            b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in result.content
        ],
        "structuredContent": result.structured_content,
    }


def failure_text(result: CallToolResult) -> str:
    """What a failed result says: its text blocks (other blocks by their type)."""
    parts = [
        block.text if isinstance(block, TextContent) else f"[{block.type} content]"
        for block in result.content
    ]
    text = " ".join(p for p in parts if p).strip() or "the server gave no reason"
    return cut(text, MAX_ERROR_CHARS)


def step_result(
    server: str, tool: str, result: CallToolResult, output: OutputSchema | None
) -> dict[str, Any]:
    """The step's result, McpToolError for a failed call, or ToolResultError (carrying
    the result) for one that ran but breaks the tool's output schema."""
    if result.is_error:
        raise McpToolError(f"MCP tool {tool!r} on server {server!r} failed: {failure_text(result)}")
    kept = recorded(result)
    if output is not None:
        found = output.problems(result.structured_content)
        if found:
            error = ToolResultError(
                f"MCP tool {tool!r} on server {server!r} ran, but its result breaks its "
                f"output schema: {'; '.join(found)}"
            )
            error.value = recorded_whole(result)
            raise error
    return kept


def undo_arguments(result: object, what: str) -> dict[str, Any]:
    """The forward step's recorded (structured) result, as the arguments of its undo."""
    if not isinstance(result, dict):
        raise McpToolError(
            f"{what}: the recorded result is not a JSON object to pass as the undo's "
            "arguments; give compensated_by(..., args=...) a function that builds them "
            "from ctx.input and ctx.result"
        )
    return result


__all__ = ["CONTENT", "failure_text", "recorded", "step_result", "undo_arguments"]
