"""The conversation with the model, kept within Temporal's payload limits.

Every model call carries the conversation as activity input, and a continued-as-new saga
carries it as workflow input, so it is bounded: the opening messages (system prompt and
goal) stay, and the oldest exchanges are dropped whole — an assistant message with its
tool results — so that no tool result is left without the call it answers.
"""

from __future__ import annotations

import json

from sagacity.activities._models import ChatMessage, OutcomeKind, ToolCall, ToolOutcome
from sagacity.journal._bounds import utf8_len

DROPPED_NOTE = "[earlier steps omitted to stay within payload limits; the journal has them]"
CUT_NOTE = "…[cut to stay within payload limits; the journal holds the full result]"


def tool_message(call: ToolCall, outcome: ToolOutcome) -> ChatMessage:
    """What the model learns of one call: its result, or why it did not run."""
    if outcome.kind is OutcomeKind.EXECUTED:
        content: dict[str, object] = {"ok": True, "result": outcome.result}
    else:
        content = {"ok": False, "error": outcome.error, "outcome": outcome.kind.value}
    return ChatMessage(
        role="tool",
        name=call.tool,
        tool_call_id=call.call_id,
        content=json.dumps(content, default=str, ensure_ascii=False),
    )


def _size(message: ChatMessage) -> int:
    """UTF-8 bytes, as payload limits count them (an emoji is four bytes, one character)."""
    calls = sum(
        utf8_len(c.tool) + utf8_len(json.dumps(c.args, default=str, ensure_ascii=False))
        for c in message.tool_calls
    )
    return utf8_len(message.content) + calls + 64


def conversation_bytes(messages: list[ChatMessage]) -> int:
    return sum(_size(m) for m in messages)


def bound_messages(messages: list[ChatMessage], budget_chars: int) -> list[ChatMessage]:
    """Drop the oldest exchanges until the conversation fits `budget_chars` (a budget in
    UTF-8 bytes, despite the historical name)."""
    if sum(_size(m) for m in messages) <= budget_chars:
        return messages
    head_len = 0
    while head_len < len(messages) and messages[head_len].role in ("system", "user"):
        head_len += 1
    head, tail = messages[:head_len], messages[head_len:]
    exchanges: list[list[ChatMessage]] = []
    for message in tail:
        if message.role == "tool" and exchanges:
            exchanges[-1].append(message)
        else:
            exchanges.append([message])
    note = ChatMessage(role="user", content=DROPPED_NOTE)
    used = sum(_size(m) for m in head) + _size(note)
    kept: list[list[ChatMessage]] = []
    for exchange in reversed(exchanges):
        size = sum(_size(m) for m in exchange)
        if used + size > budget_chars and kept:
            break
        kept.append(exchange)
        used += size
    kept.reverse()
    out = [*head, note, *(m for exchange in kept for m in exchange)]
    if used <= budget_chars:
        return out
    # The newest exchange alone is over the budget (many large results in one turn): cut
    # its tool results evenly, so no model call's input can outgrow a payload.
    results = [i for i, m in enumerate(out) if i >= len(head) + 1 and m.role == "tool"]
    room = budget_chars - sum(_size(m) for i, m in enumerate(out) if i not in results)
    share = max(1_000, room // max(1, len(results)) - 64)  # 64: what _size adds per message
    for i in results:
        out[i] = _cut(out[i], share)
    return out


def _cut(message: ChatMessage, limit: int) -> ChatMessage:
    content = message.content or ""
    data = content.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return message
    kept = data[: max(0, limit - len(CUT_NOTE.encode()))].decode("utf-8", "ignore")
    return message.model_copy(update={"content": kept + CUT_NOTE})
