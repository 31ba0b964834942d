"""Who polls a task queue: asked of the Temporal server, so it needs no worker.

A saga started on a task queue no worker polls makes no progress and reports nothing: its
workflow task just waits. `sagacity start --wait` would then wait in silence for ever, so
it asks first (DescribeTaskQueue) and says so.
"""

from __future__ import annotations

import asyncio

from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from sagacity.worker.client._client import NoWorkerError, _rpc

__all__ = ["require_pollers", "task_queue_pollers"]


async def task_queue_pollers(client: Client, task_queue: str) -> list[str]:
    """The identities of the workers that polled `task_queue` for workflow tasks lately
    (the server remembers a poller for a few minutes after its last poll). Needs no
    worker: the server answers. An empty list means no saga started there will make any
    progress until a worker polls."""
    request = DescribeTaskQueueRequest(
        namespace=client.namespace,
        task_queue=TaskQueue(name=task_queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    )
    with _rpc(client, call=f"the description of task queue {task_queue!r}"):
        described = await client.workflow_service.describe_task_queue(request)
    return [poller.identity for poller in described.pollers]


FRESH_WORKER_GRACE_SECONDS = 3.0
"""How long `require_pollers` keeps asking before it concludes that nothing polls: a
worker started a moment ago may not have reached the server with its first poll yet."""


async def require_pollers(
    client: Client, task_queue: str, *, grace_seconds: float = FRESH_WORKER_GRACE_SECONDS
) -> list[str]:
    """`task_queue_pollers`, or NoWorkerError saying that nothing polls the queue."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_seconds
    pollers = await task_queue_pollers(client, task_queue)
    while not pollers and loop.time() < deadline:
        await asyncio.sleep(0.25)
        pollers = await task_queue_pollers(client, task_queue)
    if not pollers:
        target = client.service_client.config.target_host
        raise NoWorkerError(
            f"no worker polls task queue {task_queue!r} (namespace {client.namespace!r} at "
            f"{target}): a saga started there waits until one does; start one with "
            "`sagacity worker` on that task queue (SAGACITY_TASK_QUEUE or --task-queue)"
        )
    return pollers
