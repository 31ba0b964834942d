"""Journal I/O off the event loop, on the journal's own threads.

Every activity reads and writes the journal through blocking store calls; running them
here keeps the worker's event loop (and every heartbeat on it) free, and slow sync tools
(which use the default pool) never delay a journal write.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["STORE_EXECUTOR", "store_call"]

T = TypeVar("T")

STORE_EXECUTOR = ThreadPoolExecutor(max_workers=16, thread_name_prefix="sagacity-journal")
"""The journal's own threads."""


async def store_call(func: Callable[..., T], *args: Any) -> T:
    """Run a blocking store call off the event loop, on the journal's own threads."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(STORE_EXECUTOR, functools.partial(func, *args))
