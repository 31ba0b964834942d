"""Activities of a saga, routed to the worker identity the saga is pinned to.

A saga pins the identity (toolbox and journal) of the worker that opened it. Its
activities first go to the workflow's own task queue, so Temporal can hand them straight
to this worker (eager dispatch, no extra round trip); a worker with another toolbox or
journal refuses such an activity before doing anything (WrongWorker), and it runs again
on the pinned identity's own queue, which only the right workers poll. A step is never
run by, or journaled into, another worker's toolbox or journal.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from sagacity.activities import WRONG_WORKER, activity_queue

from sagacity.workflows._compensator import LOCAL_FAILURES, LOCAL_OPTIONS, failure_type


class PinnedActivities:
    """Runs a saga's activities on the worker identity it is pinned to."""

    def __init__(self) -> None:
        self.worker: str | None = None
        """The pinned identity (None for sagas from before pinning: any worker)."""

    def queue(self) -> str | None:
        """The queue only workers of the pinned identity poll (None: the workflow's own)."""
        if self.worker is None:
            return None
        return activity_queue(workflow.info().task_queue, self.worker)

    async def run(self, activity: str, arg: Any, **options: Any) -> Any:
        """A regular activity: the workflow's queue first, the pinned queue if refused."""
        try:
            return await workflow.execute_activity(activity, arg, **options)
        except ActivityError as exc:
            if self.worker is None or failure_type(exc) != WRONG_WORKER:
                raise
            return await workflow.execute_activity(
                activity, arg, task_queue=self.queue(), **options
            )

    async def run_local(self, activity: str, arg: Any, result_type: type) -> Any:
        """A local activity on this worker; if this worker is not of the pinned identity it
        refuses before doing anything, and the call goes to the pinned queue instead."""
        try:
            return await workflow.execute_local_activity(
                activity, arg, result_type=result_type, **LOCAL_OPTIONS
            )
        except LOCAL_FAILURES as exc:
            if failure_type(exc) != WRONG_WORKER:
                raise
            return await workflow.execute_activity(
                activity, arg, result_type=result_type, task_queue=self.queue(), **LOCAL_OPTIONS
            )
