"""Compensate a saga whose workflow ended without closing its journal: reset, then cancel.

Only the saga's own run chain may act for it: sagacity's activities refuse a run whose
workflow id is not the saga id, or whose chain (Temporal's first run id) is not the one
that journaled SAGA_OPENED. A new workflow started under the saga's id is another chain
and could undo nothing. A reset keeps the chain: ResetWorkflowExecution makes a new run
of the same workflow from a point in the ended run's history, with the same first run
id. So `compensate_ended`:

1. reads the journal, the authority: the chain is open (SAGA_OPENED, no SAGA_CLOSED);
2. asks Temporal: the saga's current run ended TERMINATED or TIMED_OUT, in the chain
   that opened the saga (a run that failed or completed by its own code would only run
   that code again);
3. resets that run to its last completed workflow task, reapplying nothing: a signal or
   update that came after that point (an approval sent while the run was being
   terminated) must not act now;
4. cancels the new run at once with who asks and why: the saga's own cancellation path
   compensates its executed steps newest first, journals each and closes the chain (a
   step whose outcome is unknown then waits for a person, as after any cancel).

Measured on the dev server (tests/integration/worker/client/ended): the reset run keeps the
first run id; a run that timed out (run or execution timeout) resets too, and the new run
gets a fresh timeout of the same length from the reset, so a compensation longer than that
times out again: the saga is listed again, and `compensate` again goes on where it stopped
(a journaled compensation is returned, never run twice). Two resets of one ended run make
two runs, the second terminating the first: run one `compensate` at a time (a second one
finds the saga running and refuses).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, ResetReapplyType
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client

from sagacity._errors import SagacityError
from sagacity.journal._phases import Phase
from sagacity.stores import JournalStore
from sagacity.tools._compensation import ExecutedStep, UnknownStep
from sagacity.worker.client._client import (
    SagaClientError,
    SagaHandle,
    _rpc,
    cancel_reason,
    handle_client,
)
from sagacity.worker.client._ended_sagas import EndedSaga, ended_saga

__all__ = ["CompensationStarted", "NotEndedError", "compensate_ended", "last_workflow_task"]

_TASK_POINTS = (
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
)


class NotEndedError(SagaClientError):
    """The saga is not one whose workflow ended without closing its journal (it runs, it
    closed, or its run cannot be reset): nothing was reset or cancelled."""


@dataclass(frozen=True)
class CompensationStarted:
    """A reset run asked to compensate: where it came from and what it will undo."""

    saga_id: str
    ended: EndedSaga
    run_id: str
    """The new run (the reset of `ended.summary.run_id`), cancelled at once."""
    reset_to_event: int
    reason: str
    """The cancel's reason, as the saga journals it ("by ACTOR: ...")."""

    @property
    def executed(self) -> tuple[ExecutedStep, ...]:
        return self.ended.executed

    @property
    def unknown(self) -> tuple[UnknownStep, ...]:
        return self.ended.unknown


async def last_workflow_task(handle: SagaHandle) -> int:
    """The event id a reset goes back to: the run's last completed workflow task (or,
    in a run that never completed one, its last started one)."""
    completed = started = 0
    with _rpc(handle_client(handle), handle.id, call="the history"):
        async for event in handle.fetch_history_events():
            if event.event_type == _TASK_POINTS[0]:
                completed = event.event_id
            elif event.event_type == _TASK_POINTS[1]:
                started = event.event_id
    if not (completed or started):
        raise NotEndedError(
            f"saga {handle.id!r}: its run never started a workflow task; nothing ran"
        )
    return completed or started


async def compensate_ended(
    client: Client, store: JournalStore, saga_id: str, *, actor: str, reason: str
) -> CompensationStarted:
    """Reset the ended run of `saga_id` and cancel the new run (see the module's
    docstring). Raises NotEndedError, saying why, when the saga is not such a saga."""
    if not actor.strip() or not reason.strip():
        raise SagaClientError("compensating a saga needs an actor and a reason: both are journaled")
    try:
        entries = list(store.entries(saga_id))
    except SagacityError as exc:
        raise SagaClientError(f"cannot read saga {saga_id!r} in the journal: {exc}") from exc
    if not entries:
        raise NotEndedError(
            f"saga {saga_id!r} has no entry in the journal {store.url}: give the journal "
            "its worker writes (--journal)"
        )
    if entries[-1].phase is Phase.SAGA_CLOSED:
        closing = entries[-1].result
        status = closing.get("status", "?") if isinstance(closing, dict) else "?"
        raise NotEndedError(f"saga {saga_id!r} is closed ({status}); nothing to compensate")
    ended = await ended_saga(client, store, saga_id, entries=entries)
    if ended is None:
        raise NotEndedError(
            f"saga {saga_id!r} is running: ask it to stop with `sagacity cancel {saga_id}` "
            "(it compensates), or see `sagacity status`"
        )
    if not ended.resettable:
        raise NotEndedError(f"saga {saga_id!r} ended {ended.how}: {ended.note}")
    run_id = ended.summary.run_id
    handle = client.get_workflow_handle(saga_id, run_id=run_id)
    point = await last_workflow_task(handle)
    asked = cancel_reason(actor, f"compensate the saga that ended {ended.how}: {reason}")
    request = ResetWorkflowExecutionRequest(
        namespace=client.namespace,
        workflow_execution=WorkflowExecution(workflow_id=saga_id, run_id=run_id or ""),
        reason=f"sagacity compensate, {asked}"[:1000],
        workflow_task_finish_event_id=point,
        request_id=str(uuid.uuid4()),
        reset_reapply_type=ResetReapplyType.RESET_REAPPLY_TYPE_NONE,
    )
    with _rpc(client, saga_id, call="the reset"):
        reset = await client.workflow_service.reset_workflow_execution(request)
    new_run = client.get_workflow_handle(saga_id, run_id=reset.run_id)
    with _rpc(client, saga_id, call="the cancel request"):
        await new_run.cancel(reason=asked)
    return CompensationStarted(saga_id, ended, reset.run_id, point, asked)
