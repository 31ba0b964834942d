"""Running a worker process until it is told to stop."""

from __future__ import annotations

import asyncio
import signal

from sagacity.stores import open_store
from worker.app import connect, load_toolbox, new_worker
from worker.settings import Settings


async def run_worker(settings: Settings, *, ready: asyncio.Event | None = None) -> None:
    """Open the journal first (a journal that cannot be opened stops the start before any
    task is polled: no half-started worker), then poll until SIGINT/SIGTERM."""
    store = open_store(settings.journal_url)
    try:
        toolbox = load_toolbox(settings.tools)
        client = await connect(settings)
        worker = new_worker(
            client,
            store=store,
            toolbox=toolbox,
            task_queue=settings.task_queue,
            max_concurrent_activities=settings.max_concurrent_activities,
            max_concurrent_workflow_tasks=settings.max_concurrent_workflow_tasks,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with worker:
            print(
                f"sagacity worker: task queue {settings.task_queue!r} on "
                f"{settings.temporal_address}, journal {store.url}, tools {toolbox.names()}",
                flush=True,
            )
            if ready is not None:
                ready.set()
            await stop.wait()
    finally:
        store.close()
