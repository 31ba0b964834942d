"""Start a saga as a child workflow that can still compensate when its parent ends.

    order = await execute_child_saga(OrderWorkflow.run, order, id=f"{parent_id}/order")

Temporal's default parent-close policy is TERMINATE: when a parent closes — it fails,
completes, times out, is terminated, or continues as new — the server terminates every
child still running. A terminated saga runs no more code: its executed steps stay live
(stock reserved, card charged), its journal has no SAGA_CLOSED and nothing compensates.

The helpers here start the child with REQUEST_CANCEL instead: when the parent closes,
the server asks the child to cancel, and a saga's cancellation path compensates its
executed steps newest first and closes its journal (a step whose outcome is unknown then
waits for a person, as after any cancel). ABANDON may be asked for a child meant to
outlive its parent: it runs on alone and closes its own journal, undoing nothing because
the parent ended. TERMINATE is refused.

Why REQUEST_CANCEL is the default, not ABANDON: a parent that ends without awaiting its
child saga has failed at what the child was part of (or forgot it); the saga's contract is
that a failed whole is undone, not completed by a child nobody waits for — an abandoned
saga would go on charging, and wait days for an approval of an order its parent gave up.

The policy acts on the parent's close, so a parent that continues as new also cancels
its running child sagas: await them before `continue_as_new`. Run and execution timeouts
are not offered (nor a retry policy or a cron schedule): a timeout ends a saga as a
terminate does, without compensation, and a retried run would open a second saga under
the same id. Saga ids are never reused (REJECT_DUPLICATE).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.workflow import ChildWorkflowHandle, ParentClosePolicy

from sagacity.workflows.saga_errors import SagaUsageError

__all__ = ["CHILD_SAGA_POLICIES", "execute_child_saga", "start_child_saga"]

R = TypeVar("R")

CHILD_SAGA_POLICIES = frozenset({ParentClosePolicy.REQUEST_CANCEL, ParentClosePolicy.ABANDON})
"""Parent-close policies that let a child saga close its own journal."""


async def start_child_saga(
    saga_workflow: str | Callable[..., Awaitable[R]],
    *args: Any,
    id: str,
    task_queue: str | None = None,
    parent_close_policy: ParentClosePolicy = ParentClosePolicy.REQUEST_CANCEL,
    static_summary: str | None = None,
    static_details: str | None = None,
    memo: Mapping[str, Any] | None = None,
    result_type: type | None = None,
) -> ChildWorkflowHandle[Any, R]:
    """Start `saga_workflow` (a workflow that opens a saga: a `@workflow.run` method, or
    a workflow type's name such as "AgentSaga") as a child saga whose id is `id`, and
    return its handle. The parent-close policy is REQUEST_CANCEL unless ABANDON is asked
    for; anything else raises SagaUsageError (the workflow fails, nothing started)."""
    if parent_close_policy not in CHILD_SAGA_POLICIES:
        raise SagaUsageError(
            f"parent_close_policy {parent_close_policy.name} would end the child saga "
            f"{id!r} without compensating it when this workflow closes; use "
            "REQUEST_CANCEL (the default: it compensates) or ABANDON (it runs on alone)"
        )
    if not id:
        raise SagaUsageError("a child saga needs an id of its own: it names its journal")
    start: Any = workflow.start_child_workflow  # one door for a run method or a type's name
    handle: ChildWorkflowHandle[Any, R] = await start(
        saga_workflow,
        args=list(args),
        id=id,
        task_queue=task_queue,
        parent_close_policy=parent_close_policy,
        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        static_summary=static_summary,
        static_details=static_details,
        memo=memo,
        result_type=result_type,
    )
    return handle


async def execute_child_saga(
    saga_workflow: str | Callable[..., Awaitable[R]],
    *args: Any,
    id: str,
    task_queue: str | None = None,
    parent_close_policy: ParentClosePolicy = ParentClosePolicy.REQUEST_CANCEL,
    static_summary: str | None = None,
    static_details: str | None = None,
    memo: Mapping[str, Any] | None = None,
    result_type: type | None = None,
) -> R:
    """Start the child saga (as `start_child_saga`) and wait for its result. A child
    that fails (an AgentSaga that did not complete, a workflow that lets SagaFailedError
    out, a cancelled one) raises ChildWorkflowError with its failure as the cause."""
    handle = await start_child_saga(
        saga_workflow,
        *args,
        id=id,
        task_queue=task_queue,
        parent_close_policy=parent_close_policy,
        static_summary=static_summary,
        static_details=static_details,
        memo=memo,
        result_type=result_type,
    )
    return await handle
