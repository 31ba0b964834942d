"""The journaled compensation of one executed step.

The step is fenced before the compensation runs, so a late forward attempt (Temporal
cannot stop an activity that timed out) sees the tombstone and refuses to apply. A
COMPENSATED entry already journaled means an earlier attempt finished: it is returned,
never run twice. A compensation that raises is retried by its own retry policy; when the
workflow gives up it journals COMPENSATION_FAILED. Journal outages are retried in place,
so they never use up the compensation's own attempts.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.models import CompensateInput, CompensationOutcome
from activities.tool_runner import entry_ref, heartbeating, retrying
from sagacity.entry import EntryDraft
from sagacity.errors import SagacityError
from sagacity.phases import Phase
from sagacity.stores.base import JournalStore
from sagacity.toolbox import Toolbox
from sagacity.tools import CompensationContext, idempotency_key

__all__ = ["CompensationRunner"]


class CompensationRunner:
    def __init__(self, store: JournalStore, toolbox: Toolbox) -> None:
        self.store = store
        self.toolbox = toolbox

    async def run(self, req: CompensateInput) -> CompensationOutcome:
        return await heartbeating(self._run(req))

    async def _run(self, req: CompensateInput) -> CompensationOutcome:
        await retrying(self.store.fence, req.saga_id, req.step)
        prior = await retrying(self.store.step_entries, req.saga_id, req.step)
        done = next((e for e in prior if e.phase is Phase.COMPENSATED), None)
        if done is not None:
            return CompensationOutcome(step=req.step, tool=req.tool, entry=entry_ref(done))
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
        ctx = CompensationContext(
            saga_id=req.saga_id,
            step=req.step,
            tool=req.tool,
            input=executed.input if executed else req.args,
            result=executed.result if executed else req.result,
            idempotency_key=idempotency_key(req.saga_id, req.step),
            attempt=activity.info().attempt,
            heartbeat=activity.heartbeat,
        )
        await spec.compensation.invoke(ctx)
        entry = await retrying(
            self.store.append,
            EntryDraft.new(
                req.saga_id,
                Phase.COMPENSATED,
                step=req.step,
                tool=req.tool,
                input={"compensation": spec.compensation.name},
            ),
        )
        return CompensationOutcome(step=req.step, tool=req.tool, entry=entry_ref(entry))
