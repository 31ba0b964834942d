"""The journaled compensation of one executed step.

The step is fenced before the compensation runs, so a late forward attempt (Temporal
cannot stop an activity that timed out) sees the tombstone and refuses to apply. A
COMPENSATED entry already journaled means an earlier attempt finished: it is returned,
never run twice. A compensation that raises is retried by its own retry policy; when the
workflow gives up it journals COMPENSATION_FAILED.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.models import CompensateInput, CompensationOutcome
from activities.tool_runner import _heartbeating, append_retrying, entry_ref, store_call
from sagacity.entry import EntryDraft
from sagacity.errors import SagacityError
from sagacity.phases import Phase
from sagacity.stores.base import JournalStore
from sagacity.toolbox import Toolbox
from sagacity.tools import CompensationContext

__all__ = ["CompensationRunner"]


class CompensationRunner:
    def __init__(self, store: JournalStore, toolbox: Toolbox) -> None:
        self.store = store
        self.toolbox = toolbox

    async def run(self, req: CompensateInput) -> CompensationOutcome:
        await store_call(self.store.fence, req.saga_id, req.step)
        prior = await store_call(self.store.step_entries, req.saga_id, req.step)
        done = next((e for e in prior if e.phase is Phase.COMPENSATED), None)
        if done is not None:
            return CompensationOutcome(step=req.step, tool=req.tool, ok=True, entry=entry_ref(done))
        try:
            spec = self.toolbox.get(req.tool)
        except SagacityError as exc:
            raise ApplicationError(str(exc), type="UnknownTool", non_retryable=True) from exc
        if spec.compensation is None:
            raise ApplicationError(
                f"tool {req.tool!r} declares no compensation",
                type="NoCompensation",
                non_retryable=True,
            )
        # The journal's EXECUTED entry is the authority on what ran and what it returned
        # (the workflow only holds the result as cut for the model).
        executed = next((e for e in prior if e.phase is Phase.EXECUTED), None)
        info = activity.info()
        ctx = CompensationContext(
            saga_id=req.saga_id,
            step=req.step,
            tool=req.tool,
            input=executed.input if executed else req.args,
            result=executed.result if executed else req.result,
            idempotency_key=f"{req.saga_id}:{req.step}",
            attempt=info.attempt,
            heartbeat=activity.heartbeat,
        )
        await _heartbeating(spec.compensation.invoke(ctx))
        entry = await append_retrying(
            self.store,
            EntryDraft.new(
                req.saga_id,
                Phase.COMPENSATED,
                step=req.step,
                tool=req.tool,
                input={"compensation": spec.compensation.name, "attempt": info.attempt},
            ),
        )
        return CompensationOutcome(step=req.step, tool=req.tool, ok=True, entry=entry_ref(entry))
