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
from typing import Any, TypedDict, TypeVar, Unpack

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.workflow import ChildWorkflowHandle, ParentClosePolicy

from sagacity.workflows._saga_errors import SagaUsageError

__all__ = ["CHILD_SAGA_POLICIES", "ChildSagaOptions", "execute_child_saga", "start_child_saga"]

R = TypeVar("R")

CHILD_SAGA_POLICIES = frozenset({ParentClosePolicy.REQUEST_CANCEL, ParentClosePolicy.ABANDON})
"""Parent-close policies that let a child saga close its own journal."""


class ChildSagaOptions(TypedDict, total=False):
    """What a child saga may be started with besides its id: Temporal's options of the same
    names, except those that would end a saga without compensating it (see above)."""

    task_queue: str | None
    parent_close_policy: ParentClosePolicy
    """REQUEST_CANCEL when not given; ABANDON may be asked for; nothing else."""
    static_summary: str | None
    static_details: str | None
    memo: Mapping[str, Any] | None
    result_type: type | None


async def start_child_saga(
    saga_workflow: str | Callable[..., Awaitable[R]],
    *args: Any,
    id: str,
    **options: Unpack[ChildSagaOptions],
) -> ChildWorkflowHandle[Any, R]:
    """Start `saga_workflow` (a workflow that opens a saga: a `@workflow.run` method, or
    a workflow type's name such as "AgentSaga") as a child saga whose id is `id`, and
    return its handle. The parent-close policy is REQUEST_CANCEL unless ABANDON is asked
    for; anything else raises SagaUsageError (the workflow fails, nothing started)."""
    unknown = sorted(set(options) - ChildSagaOptions.__optional_keys__)
    if unknown:  # a timeout, retry policy or cron schedule would end or repeat the saga
        raise SagaUsageError(
            f"a child saga takes no {', '.join(unknown)}; it takes "
            f"{', '.join(sorted(ChildSagaOptions.__optional_keys__))}"
        )
    policy = options.get("parent_close_policy", ParentClosePolicy.REQUEST_CANCEL)
    if policy not in CHILD_SAGA_POLICIES:
        raise SagaUsageError(
            f"parent_close_policy {policy.name} would end the child saga "
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
        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        **{**options, "parent_close_policy": policy},
    )
    return handle


async def execute_child_saga(
    saga_workflow: str | Callable[..., Awaitable[R]],
    *args: Any,
    id: str,
    **options: Unpack[ChildSagaOptions],
) -> R:
    """Start the child saga (as `start_child_saga`) and wait for its result. A child
    that fails (an AgentSaga that did not complete, a workflow that lets SagaFailedError
    out, a cancelled one) raises ChildWorkflowError with its failure as the cause."""
    handle = await start_child_saga(saga_workflow, *args, id=id, **options)
    return await handle
