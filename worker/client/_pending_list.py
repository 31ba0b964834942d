"""The list of approvals waiting for a person, as `sagacity pending` and the inbox show it.

The SagaStatus search attribute alone says nothing: any Temporal caller can start a
workflow of any type, on any task queue, with SagaStatus=AWAITING_APPROVAL set, and no
worker ever runs it. A few hundred such starts would push real approvals off a list cut
at its limit, and each row's query would wait for a worker that never comes. So the list
is scoped to sagacity's saga workflow types (AgentSaga and the saga-API workflows the
worker is configured to run) on the task queue the worker polls: a workflow of those
types on that queue is run by sagacity's own code, which writes SagaStatus itself. The
list says when its limit cut it, and each row's query is bounded: a row that does not
answer in time is shown as unreadable, never hanging the list.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

from temporalio.client import Client

from sagacity._errors import SagacityError
from sagacity.journal._phases import SagaStatus
from sagacity.worker._settings import Settings
from sagacity.worker.client._client import (
    SAGA_WORKFLOW,
    PendingItem,
    SagaSummary,
    _rpc,
    pending_approval,
    saga_handle,
    summary_of,
)

__all__ = ["ROW_TIMEOUT", "PendingPage", "SagaScope", "pending_page"]

ROW_TIMEOUT = 5.0
"""Seconds one row's `pending_approval` query may take before the row is shown as
unreadable (a saga whose worker is down, or a workflow nobody runs)."""


@dataclass(frozen=True)
class SagaScope:
    """Which workflows are sagas to list: their types and the task queues they run on."""

    workflow_types: tuple[str, ...] = (SAGA_WORKFLOW,)
    task_queues: tuple[str, ...] = ("sagacity",)

    @classmethod
    def of(cls, task_queue: str, workflows: Iterable[type] = ()) -> SagaScope:
        """AgentSaga and the given saga-API workflow classes, on `task_queue`."""
        from temporalio.workflow import _Definition

        names = [_Definition.must_from_class(w).name or w.__name__ for w in workflows]
        types = tuple(dict.fromkeys([SAGA_WORKFLOW, *(n for n in names if n)]))
        return cls(types, (task_queue,))

    @classmethod
    def of_settings(cls, settings: Settings) -> SagaScope:
        """The scope the worker `settings` describe runs: its task queue, AgentSaga and
        its --workflow classes."""
        from sagacity.worker._app import load_workflow

        return cls.of(settings.task_queue, [load_workflow(s) for s in settings.workflows])

    def query(self) -> str:
        """The visibility query of these sagas awaiting approval."""
        types = " OR ".join(f"WorkflowType = {_quoted(t)}" for t in self.workflow_types)
        queues = " OR ".join(f"TaskQueue = {_quoted(q)}" for q in self.task_queues)
        waiting = SagaStatus.AWAITING_APPROVAL.value
        return f'({types}) AND ({queues}) AND SagaStatus = "{waiting}"'

    def describe(self) -> str:
        """For the note when the limit cut the list."""
        return (
            f"workflow type {' or '.join(self.workflow_types)} on task queue "
            f"{' or '.join(self.task_queues)}"
        )


@dataclass(frozen=True)
class PendingPage:
    """The approvals listed, and whether the limit left more out (visibility is read one
    past the limit to know)."""

    items: list[PendingItem]
    more: bool
    limit: int
    scope: SagaScope

    def more_note(self) -> str:
        """What to say when the limit cut the list, or ''."""
        if not self.more:
            return ""
        return (
            f"more sagas await approval than the {self.limit} shown (newest first; "
            f"{self.scope.describe()}): narrow with a task queue of its own per team "
            "(SAGACITY_TASK_QUEUE), decide the oldest first, or raise the limit"
        )


async def pending_page(
    client: Client,
    scope: SagaScope,
    *,
    limit: int = 200,
    row_timeout: float = ROW_TIMEOUT,
) -> PendingPage:
    """Every saga of `scope` listed as AWAITING_APPROVAL, newest first, with what it waits
    for: at most `limit`, saying whether more were left out. Visibility lags, so a saga
    decided a moment ago is left out (its query answers None); a saga whose query fails
    or takes longer than `row_timeout` is kept with the reason, so nothing awaiting a
    person is silently hidden."""
    listed: list[SagaSummary] = []
    with _rpc(client, call="the visibility list"):
        async for wf in client.list_workflows(scope.query(), limit=limit + 1):
            listed.append(summary_of(wf.id, wf))
    more = len(listed) > limit
    listed = listed[:limit]

    async def one(summary: SagaSummary) -> PendingItem:
        handle = saga_handle(client, summary.saga_id)
        try:
            pending = await asyncio.wait_for(pending_approval(handle), row_timeout)
        except TimeoutError:
            return PendingItem(
                summary, None, f"unreadable: its query did not answer within {row_timeout:g}s"
            )
        except SagacityError as exc:
            return PendingItem(summary, None, f"unreadable: {exc}")
        return PendingItem(summary, pending)

    items = await asyncio.gather(*(one(s) for s in listed))
    kept = [item for item in items if item.pending is not None or item.error is not None]
    return PendingPage(kept, more, limit, scope)


def _quoted(text: str) -> str:
    """A visibility query string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
