"""A model's turn, bounded before it reaches the workflow.

Whatever a model answers is recorded in history and decoded by the workflow, then carried
in the conversation. A model (or a compromised provider) that proposes arguments nested
hundreds of levels deep, megabytes of arguments, thousands of calls or a huge tool name
would otherwise produce a turn the workflow cannot decode — a saga that can neither go on
nor compensate. Here every call over the bounds keeps its place but its arguments are
replaced by the reason, so the runner refuses it (CALL_REFUSED) and the model is told why.
"""

from __future__ import annotations

from sagacity._errors import BoundsError
from sagacity.activities._models import REFUSED_ARGUMENTS_KEY, ModelTurn, ToolCall
from sagacity.journal._bounds import (
    MAX_ARGS_BYTES,
    MAX_CALLS_PER_TURN,
    MAX_DEPTH,
    MAX_FINAL_ANSWER_BYTES,
    MAX_TEXT_ECHO,
    check_value,
)

TURN_ARGS_BUDGET = 512 * 1024
"""Bytes of arguments in one turn, all calls together."""
MAX_CALL_ID_CHARS = 128


def _refused(call: ToolCall, reason: str) -> ToolCall:
    return ToolCall(
        tool=call.tool[:MAX_TEXT_ECHO],
        args={REFUSED_ARGUMENTS_KEY: reason},
        call_id=(call.call_id or "")[:MAX_CALL_ID_CHARS] or None,
    )


def bounded_turn(turn: ModelTurn) -> ModelTurn:
    """`turn` with every call over the bounds refused in place and the final answer cut."""
    calls: list[ToolCall] = []
    used = 0
    for index, call in enumerate(turn.tool_calls):
        if index >= MAX_CALLS_PER_TURN:
            calls.append(
                _refused(
                    call,
                    f"more than {MAX_CALLS_PER_TURN} tool calls in one turn; this one was not "
                    "run — ask for fewer calls at a time",
                )
            )
            continue
        try:
            check_value(call.args, "the arguments", max_depth=MAX_DEPTH, max_bytes=MAX_ARGS_BYTES)
        except BoundsError as exc:
            calls.append(_refused(call, str(exc)))
            continue
        size = len(call.model_dump_json().encode())
        if used + size > TURN_ARGS_BUDGET:
            calls.append(
                _refused(call, f"this turn's calls are over {TURN_ARGS_BUDGET:,} bytes together")
            )
            continue
        used += size
        if len(call.tool) > MAX_TEXT_ECHO or len(call.call_id or "") > MAX_CALL_ID_CHARS:
            call = call.model_copy(
                update={
                    "tool": call.tool[:MAX_TEXT_ECHO],
                    "call_id": (call.call_id or "")[:MAX_CALL_ID_CHARS] or None,
                }
            )
        calls.append(call)
    final = turn.final
    if final is not None and len(final.encode("utf-8", "surrogatepass")) > MAX_FINAL_ANSWER_BYTES:
        cut = final.encode("utf-8", "surrogatepass")[:MAX_FINAL_ANSWER_BYTES]
        final = cut.decode("utf-8", "ignore") + "…[final answer cut: over the size limit]"
    return ModelTurn(tool_calls=calls, final=final)


__all__ = ["TURN_ARGS_BUDGET", "bounded_turn"]
