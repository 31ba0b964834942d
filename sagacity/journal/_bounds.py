"""Bounds on every value that enters a saga: depth, size in bytes, count.

A workflow must always be able to decode what it accepted, store it in history (Temporal
caps one payload at about 2 MB) and compensate. A value nested a few hundred levels deep
encodes on the client and fails to decode in the worker; a workflow task that cannot
decode its input fails and is retried for ever, and a saga that never runs its workflow
code never compensates. So limits are checked where values come in — at start, on each
model turn, on each tool result — and a value over them is refused or replaced by a
description there, never carried inward.

Pure functions over JSON-shaped values; no I/O, no Temporal.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sagacity._errors import BoundsError

MAX_DEPTH = 32
"""Deepest nesting of arrays and objects in one value (tool arguments, tool results as the
model sees them, decisions). Decoders in the worker refuse far deeper values (about 200
levels), so this leaves the saga's own wrapping plenty of room."""
MAX_ARGS_BYTES = 64 * 1024
"""One tool call's arguments, UTF-8 JSON."""
MAX_START_INPUT_BYTES = 512 * 1024
"""A saga's whole start input. Continue-as-new carries it once more beside the saga's
state, and both must fit one 2 MB payload."""
MAX_TEXT_ECHO = 200
"""Characters of caller-supplied text (a tool name, an error) echoed into messages."""
MAX_CALLS_PER_TURN = 64
MAX_FINAL_ANSWER_BYTES = 64 * 1024
MAX_ERROR_CHARS = 2_000
"""A tool's error as the saga reports it (the journal keeps up to 10,000 characters)."""


def depth_of(value: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of a JSON-shaped value (a scalar is 0), counted without recursion and
    stopping as soon as `limit` is passed, so a hostile value costs at most its size."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        level += 1
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        stack.extend((child, level) for child in children)
    return deepest


def json_bytes(value: Any) -> int:
    """Size of `value` as compact UTF-8 JSON (what a payload of it costs, near enough)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode())


def check_value(
    value: Any, what: str, *, max_depth: int = MAX_DEPTH, max_bytes: int | None = None
) -> None:
    """Raise BoundsError naming `what` when `value` is nested deeper than `max_depth` or
    larger than `max_bytes` as JSON. Depth is checked first: measuring the size of a value
    nested too deep would itself recurse."""
    depth = depth_of(value, max_depth)
    if depth > max_depth:
        raise BoundsError(
            f"{what} is nested more than {max_depth} levels deep; flatten it (a saga refuses "
            "values it could not decode, store and compensate)"
        )
    if max_bytes is not None:
        size = json_bytes(value)
        if size > max_bytes:
            raise BoundsError(
                f"{what} is {size:,} bytes as JSON, over the limit of {max_bytes:,}; pass a "
                "reference (an id, a URL) instead of the data"
            )


def cut(text: str, limit: int) -> str:
    """`text` whole if it fits in `limit` characters, else its first characters and "…":
    a reader must never take a cut message for the whole of it."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def echo(text: object, limit: int = MAX_TEXT_ECHO) -> str:
    """Caller-supplied text as it may appear in a message: repr-quoted, cut to `limit`."""
    shown = str(text)
    if len(shown) <= limit:
        return repr(shown)
    return repr(shown[:limit]) + f"…(+{len(shown) - limit:,} characters)"


def utf8_len(text: str | None) -> int:
    """Bytes of `text` as UTF-8 (limits are in bytes, and an emoji is four of them)."""
    return len(text.encode("utf-8", "surrogatepass")) if text else 0


__all__ = [
    "MAX_ARGS_BYTES",
    "MAX_CALLS_PER_TURN",
    "MAX_DEPTH",
    "MAX_ERROR_CHARS",
    "MAX_FINAL_ANSWER_BYTES",
    "MAX_START_INPUT_BYTES",
    "MAX_TEXT_ECHO",
    "check_value",
    "depth_of",
    "echo",
    "json_bytes",
    "utf8_len",
]


def exception_message(exc: BaseException) -> str:
    """An exception's message, as its raiser wrote it. The raiser's code decides it: one
    whose `__str__` itself raises still gets a sentence (a failure must be recorded as a
    failure, never turn into a crash of the code that records it)."""
    try:
        return str(exc)
    except Exception as broken:  # the raiser's own __str__ failed
        return f"(its message could not be read: {type(broken).__name__})"


def exception_text(exc: BaseException, limit: int = MAX_ERROR_CHARS) -> str:
    """`Type: message` of an exception a tool or a compensation raised, cut with "…"."""
    message = exception_message(exc)
    name = type(exc).__name__
    return cut(f"{name}: {message}" if message else name, limit)
