"""How sagas are found: the one rule `sagacity list`, `pending` and `dirty`, the inbox and
SagaClient share.

Every saga — AgentSaga or a user's own workflow on the saga API, on whatever task queue
its worker polls — sets the same search attributes (workflows._inspection
SEARCH_ATTRIBUTES: SagaStatus, SagaNeedsHuman). They are the index: a search asks
Temporal's visibility for the namespace's workflows by them, so a saga is found whatever
its workflow type and task queue. A task queue or a workflow type only narrows a search
when one is asked for. A list that comes back empty says what was searched (`describe`);
a visibility that cannot be asked raises (worker.client._errors.rpc), never "none".
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from sagacity._errors import SagacityError

__all__ = ["EVERY_SAGA", "QUERIES", "ROW_TIMEOUT", "SagaSearch", "ask_each", "quoted"]

R = TypeVar("R")
T = TypeVar("T")

ROW_TIMEOUT = 5.0
"""Seconds one row's query may take before the row is shown as unreadable (a saga whose
worker is down, or a workflow nobody runs)."""

QUERIES = 200
"""Row queries in flight at once: a long list is read in waves, not all at once."""


@dataclass(frozen=True)
class SagaSearch:
    """Which sagas a list covers: every saga of the namespace, or those of one task queue
    or one workflow type when given."""

    task_queue: str | None = None
    workflow_type: str | None = None

    def query(self, condition: str | None = None) -> str:
        """The visibility query of the sagas matching `condition` (a clause on the saga
        search attributes; None: every saga)."""
        clauses = ["SagaStatus IS NOT NULL"] if condition is None else [condition]
        if self.task_queue is not None:
            clauses.append(f"TaskQueue = {quoted(self.task_queue)}")
        if self.workflow_type is not None:
            clauses.append(f"WorkflowType = {quoted(self.workflow_type)}")
        return " AND ".join(clauses)

    def filters(self) -> str:
        """The filters in words: 'any workflow type on any task queue' when none."""
        kind = "any workflow type"
        if self.workflow_type is not None:
            kind = f"workflow type {self.workflow_type!r}"
        queue = "any task queue"
        if self.task_queue is not None:
            queue = f"task queue {self.task_queue!r}"
        return f"{kind} on {queue}"

    def describe(self, namespace: str, what: str) -> str:
        """What a search of `what` asked (for an empty list, or a list cut at its limit)."""
        return (
            f"Temporal visibility of namespace {namespace!r} was asked for sagas {what}, "
            f"{self.filters()}"
        )


EVERY_SAGA = SagaSearch()
"""No filter: every saga of the namespace."""


def quoted(text: str) -> str:
    """A visibility query string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


async def ask_each(
    rows: Sequence[R], ask: Callable[[R], Awaitable[T]], row_timeout: float = ROW_TIMEOUT
) -> list[T | str]:
    """Ask each listed saga (its own query confirms what visibility says), QUERIES at a
    time: its answer, or why it has none (a sagacity error, or no answer within
    `row_timeout`) as a sentence, so a row that cannot be read is kept, never hidden and
    never holding the list."""
    gate = asyncio.Semaphore(QUERIES)

    async def one(row: R) -> T | str:
        async with gate:
            try:
                return await asyncio.wait_for(ask(row), row_timeout)
            except TimeoutError:
                return f"its query did not answer within {row_timeout:g}s"
            except SagacityError as exc:
                return str(exc)

    return list(await asyncio.gather(*(one(r) for r in rows)))
