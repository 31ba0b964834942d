"""`python -m bench.plain_worker --address HOST:PORT --task-queue Q`: a worker serving the
plain baselines with the settings `worker.app.new_worker` uses, until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from bench.plain import PlainApprovalWorkflow, PlainWorkflow, noop_activity
from sagacity.worker._plugin import PASSTHROUGH


def plain_worker(client: Client, task_queue: str) -> Worker:
    """Same settings as new_worker (concurrency, sandbox passthrough); plain workflows."""
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[PlainWorkflow, PlainApprovalWorkflow],
        activities=[noop_activity],
        max_concurrent_activities=100,
        max_concurrent_workflow_tasks=100,
        workflow_runner=SandboxedWorkflowRunner(
            restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH, "bench")
        ),
    )


async def serve(address: str, task_queue: str) -> None:
    client = await Client.connect(address, data_converter=pydantic_data_converter)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with plain_worker(client, task_queue):
        print(f"plain worker ready: task queue {task_queue!r} on {address}", flush=True)
        await stop.wait()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.plain_worker")
    parser.add_argument("--address", required=True)
    parser.add_argument("--task-queue", required=True)
    args = parser.parse_args(argv)
    asyncio.run(serve(args.address, args.task_queue))
    sys.stdout.flush()
    os._exit(0)  # skip the SDK's interpreter-exit crash (sdk-python issue 300)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
