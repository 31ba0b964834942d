"""Journal I/O from an activity: off the event loop, on the journal's own threads.

Every activity reads and writes the journal through blocking store calls; running them
here keeps the worker's event loop (and every heartbeat on it) free, and slow sync tools
(which use the default pool) never delay a journal write. Every write an activity makes
comes back to the workflow as an EntryRef.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from temporalio import activity

from sagacity._errors import JournalWriteError, StoreUnavailableError
from sagacity.activities._models import EntryRef
from sagacity.journal._entry import JournalEntry

__all__ = ["STORE_EXECUTOR", "entry_ref", "retrying", "store_call"]

T = TypeVar("T")

STORE_EXECUTOR = ThreadPoolExecutor(max_workers=16, thread_name_prefix="sagacity-journal")
"""The journal's own threads."""


async def store_call(func: Callable[..., T], *args: Any) -> T:
    """Run a blocking store call off the event loop, on the journal's own threads."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(STORE_EXECUTOR, functools.partial(func, *args))


async def retrying(func: Callable[..., T], *args: Any) -> T:
    """A store call retried in place while the journal is unreachable.

    Used where giving up would turn a known fact into an unknown one (the outcome of a
    tool that already ran, a fence before an undo). It is bounded by the activity's own
    timeout, and the activity heartbeats meanwhile.
    """
    delay = 0.2
    while True:
        try:
            return await store_call(func, *args)
        except (JournalWriteError, StoreUnavailableError) as exc:
            activity.logger.warning("journal unavailable, retrying in %.1fs: %s", delay, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)


def entry_ref(entry: JournalEntry) -> EntryRef:
    """Where `entry` landed, as the workflow's history records it."""
    return EntryRef(seq=entry.seq, hash=entry.hash, phase=entry.phase)
