"""Deliver a person's update to a saga through the race Temporal leaves in its way.

When the workflow task that carries an update fails on the server's side, the server
aborts the update with FAILED_PRECONDITION and a WorkflowNotReadyFailure ("unexpected
workflow task failure"). A saga meets this without any fault of its own: a cancelled
activity's acknowledgement that lands while the task applying the update is closing the
saga makes the server refuse the task (UNHANDLED_COMMAND), and the update goes with it.
Nothing of the update was applied or recorded then, and the next task runs at once, so
the same update is sent again. It keeps one update id across tries: were an update
applied after all, the server answers the retry with that update's outcome instead of
applying it twice.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any, TypeVar

from temporalio.client import WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

R = TypeVar("R")

NOT_READY = "WorkflowNotReadyFailure"
"""The error-details type the server attaches when it aborts an update this way."""
DELAYS = (0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0)
"""Pauses between tries: about 4.5 s in all, then the refusal is reported."""


def workflow_not_ready(exc: RPCError) -> bool:
    """True when the server aborted an update because its workflow task failed."""
    if exc.status is not RPCStatusCode.FAILED_PRECONDITION:
        return False
    try:
        details = exc.grpc_status.details
    except Exception:  # undecodable details: not the error this module retries
        return False
    return any(d.type_url.endswith("." + NOT_READY) for d in details)


async def execute_update(
    handle: WorkflowHandle[Any, Any],
    name: str,
    body: object,
    result_type: type[R],
    *,
    rpc_timeout: timedelta,
    delays: tuple[float, ...] = DELAYS,
) -> R:
    """`handle.execute_update`, sent again (same update id) while the server reports the
    workflow not ready; any other error, or the last not-ready one, is raised as is."""
    update_id = f"{name}-{uuid.uuid4().hex}"
    for delay in (*delays, None):
        try:
            result: R = await handle.execute_update(
                name, body, id=update_id, result_type=result_type, rpc_timeout=rpc_timeout
            )
            return result
        except RPCError as exc:
            if delay is None or not workflow_not_ready(exc):
                raise
        await asyncio.sleep(delay)
    raise AssertionError("unreachable: the last try returns or raises")
