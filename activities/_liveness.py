"""Keeping a long activity visibly alive: heartbeats while it works, and a fence check
that waits out a journal blip instead of failing the tool that asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from temporalio import activity

from sagacity._errors import JournalWriteError, StoreUnavailableError
from sagacity.stores._base import JournalStore

__all__ = ["HEARTBEAT_EVERY_S", "heartbeating", "patient_fence_check"]

T = TypeVar("T")

HEARTBEAT_EVERY_S = 5.0


def _heartbeat_period() -> float:
    """A third of the heartbeat timeout (at most HEARTBEAT_EVERY_S): a live worker with a
    slow tool must never look dead. The SDK throttles what it actually sends."""
    timeout = activity.info().heartbeat_timeout
    if not timeout:
        return HEARTBEAT_EVERY_S
    return max(0.05, min(HEARTBEAT_EVERY_S, timeout.total_seconds() / 3))


async def heartbeating(work: Awaitable[T], details: Sequence[Any] = ("running",)) -> T:
    """Await `work` while heartbeating `details`, so cancellation and worker loss are
    noticed. `details` is read at each beat: a caller may fill a list it passed in (the
    compensation runner reports the EXECUTED evidence once it has read it)."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=_heartbeat_period())
            if done:
                return task.result()
            activity.heartbeat(*details)
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


def patient_fence_check(store: JournalStore, saga_id: str, step: int) -> Callable[[], bool]:
    """`ToolContext.is_fenced` for one step: a journal blip is retried in place rather than
    surfacing in the tool as if the tool had failed. Its patience is half the heartbeat
    timeout (at most 30 s), because an async tool calls it on the event loop, where
    waiting also holds back every heartbeat of this worker."""
    timeout = activity.info().heartbeat_timeout
    patience = min(30.0, timeout.total_seconds() / 2) if timeout else 30.0

    def is_fenced() -> bool:
        deadline = time.monotonic() + patience
        delay = 0.2
        while True:
            try:
                return store.is_fenced(saga_id, step)
            except (JournalWriteError, StoreUnavailableError):
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    return is_fenced
