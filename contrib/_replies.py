"""Answering an agent's tool call with the saga step that ran it, for the adapters whose
tool calls wait on a future while the saga's own task runs their steps (OpenAI Agents,
Pydantic AI): one place decides what the waiting call sees for each way a step ends."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from sagacity.workflows._saga import StepError

__all__ = ["answer"]


async def answer(
    reply: asyncio.Future[Any],
    step: Awaitable[Any],
    failed: Callable[[StepError], BaseException],
) -> None:
    """Await `step` and settle `reply` with its result; with `failed(exc)` when the step
    did not complete (the agent's tool call fails, the saga goes on deciding); cancelled,
    and the error raised on, when anything else stops the step (the saga's task is being
    cancelled). A call already settled meanwhile (cancelled: its run was cancelled) is
    answered by no one; its step stays the saga's, journaled and compensated with the
    others."""
    try:
        result = await step
    except StepError as exc:
        if not reply.done():
            reply.set_exception(failed(exc))
    except BaseException:
        reply.cancel()  # a no-op on a settled future
        raise
    else:
        if not reply.done():
            reply.set_result(result)
