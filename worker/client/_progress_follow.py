"""Follow a running saga until its workflow closes: poll its journal (or, when the CLI
cannot read the journal, its workflow's queries) and yield each new event once.

The journal is the source when it can be opened here and holds the saga's entries: it is
read every POLL_SECONDS (slowing to a second while nothing happens) for the entries after
the last seq seen, so nothing recorded is missed or repeated, and one last time after the
workflow closed (its SAGA_CLOSED entry is written before the workflow returns). It is
given up, with a note saying why, when it cannot be opened, when a read fails, or when it
has no entry for a saga whose workflow already reports steps (it is not the journal the
worker writes); the workflow's queries then take over (asked every QUERY_SECONDS, slowing
to five seconds while nothing happens), skipping what the journal already showed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from sagacity._errors import SagacityError
from sagacity.journal._entry import JournalEntry
from sagacity.stores import JournalStore
from sagacity.worker._settings import Settings
from sagacity.worker.cli._common import open_journal
from sagacity.worker.client._client import SagaHandle, saga_steps, saga_view
from sagacity.worker.client._progress import JournalTracker, ProgressEvent, WorkflowTracker
from sagacity.workflows._models import SagaResult

__all__ = ["POLL_SECONDS", "QUERY_SECONDS", "follow", "readable_journal"]

POLL_SECONDS = 0.25
"""How often the journal is read while the saga moves: one indexed query for the entries
after the last seq."""
QUERY_SECONDS = 0.5
"""How often the workflow is asked when its queries are the source (a worker answers
each one, so they are asked less often)."""
IDLE_FACTOR = 1.5
MAX_POLL_SECONDS = {"journal": 1.0, "workflow": 5.0}
"""While nothing happens (a saga waiting days for an approval), polls slow down by
IDLE_FACTOR up to these; the next event brings them back to the short interval."""

T = TypeVar("T")
Note = Callable[[str], None]


def readable_journal(settings: Settings) -> tuple[JournalStore | None, str]:
    """The worker's journal opened for reading here, or None and why not."""
    url = settings.journal_url
    if url.startswith("memory:"):
        return None, f"the journal {url} lives in the worker's memory"
    try:
        return open_journal(settings), ""
    except SagacityError as exc:  # says what and where
        return None, f"cannot read the journal here ({exc})"
    except Exception as exc:  # any other failure to open it: follow the workflow instead
        return None, f"cannot read the journal {url} here ({type(exc).__name__}: {exc})"


def _after(store: JournalStore, saga_id: str, seq: int) -> list[JournalEntry]:
    return list(store.entries(saga_id, after_seq=seq))


async def _unless_closed(call: Awaitable[T], closed: asyncio.Future[Any]) -> T | None:
    """`call`'s answer, or None when the workflow closes first (a query can wait up to
    its timeout for a worker; the wait for the result must not wait for it)."""
    task = asyncio.ensure_future(call)
    await asyncio.wait({task, closed}, return_when=asyncio.FIRST_COMPLETED)
    if not task.done():
        task.cancel()
        return None
    return task.result()


class _Follower:
    def __init__(
        self,
        handle: SagaHandle,
        closed: asyncio.Future[SagaResult | None],
        store: JournalStore | None,
        note: Note,
    ) -> None:
        self.handle = handle
        self.closed = closed
        self.store = store
        self.note = note
        self.journal = JournalTracker() if store is not None else None
        self.workflow = None if store is not None else WorkflowTracker(handle.id)
        self.next_probe = 0.0

    def _switch(self, why: str) -> None:
        seen = self.journal.seen if self.journal is not None else set()
        self.journal, self.store = None, None
        self.workflow = WorkflowTracker(self.handle.id, seen)
        self.note(
            f"{why}; following saga {self.handle.id} through its workflow's queries instead "
            "(each step as the workflow reports it; `sagacity journal` has every entry)"
        )

    async def _read(self) -> list[ProgressEvent]:
        assert self.store is not None and self.journal is not None
        try:
            entries = await asyncio.to_thread(
                _after, self.store, self.handle.id, self.journal.last_seq
            )
        except Exception as exc:  # a journal gone away: the queries remain
            self._switch(f"reading the journal failed ({type(exc).__name__}: {exc})")
            return []
        return self.journal.feed(entries)

    async def _probe(self, finished: bool) -> list[ProgressEvent] | None:
        """With the journal still silent about the saga: None once the workflow has steps
        (or closed) and the journal still has no entry of it (it is not the journal the
        worker writes), else what a new read finds. The workflow is asked first, so an
        entry journaled before its answer is seen by the read after it."""
        loop = asyncio.get_running_loop()
        if not finished:
            if loop.time() < self.next_probe:
                return []
            self.next_probe = loop.time() + QUERY_SECONDS
            try:
                view = await _unless_closed(saga_view(self.handle), self.closed)
            except SagacityError:
                return []  # not opened yet, or no answer: ask again later
            if view is None or view.steps == 0:
                return []
        events = await self._read()
        if events or self.journal is None:
            return events
        return None

    async def _ask(self) -> list[ProgressEvent]:
        assert self.workflow is not None
        try:  # steps before the view: a step reported waiting finds its pending request
            steps = await _unless_closed(saga_steps(self.handle), self.closed)
            view = await _unless_closed(saga_view(self.handle), self.closed)
        except SagacityError:
            return []  # not opened yet, or a slow worker: the next poll asks again
        return self.workflow.update(steps or [], view)

    async def events(self) -> AsyncIterator[ProgressEvent]:
        interval = 0.0
        while True:
            finished = self.closed.done()
            quiet = True
            if self.journal is not None:
                found: list[ProgressEvent] | None = await self._read()
                if not found and self.journal is not None and self.journal.last_seq == 0:
                    found = await self._probe(finished)
                    if found is None:
                        self._switch(
                            f"the journal {self.store.url if self.store else ''} has no entry "
                            f"for saga {self.handle.id}, which has started: it is not the "
                            "journal the worker writes (set SAGACITY_JOURNAL_URL or --journal)"
                        )
                for event in found or []:
                    quiet = False
                    yield event
            if self.workflow is not None:
                if finished:
                    result = _result(self.closed)
                    for event in self.workflow.closed(result) if result is not None else []:
                        yield event
                else:
                    for event in await self._ask():
                        quiet = False
                        yield event
            if finished:
                return
            source = "journal" if self.journal is not None else "workflow"
            short = POLL_SECONDS if source == "journal" else QUERY_SECONDS
            slower = min(interval * IDLE_FACTOR, MAX_POLL_SECONDS[source])
            interval = slower if quiet and interval else short
            await asyncio.wait({self.closed}, timeout=interval)


def _result(closed: asyncio.Future[SagaResult | None]) -> SagaResult | None:
    """The saga's result, None when it ended without one (the caller reports why)."""
    if closed.cancelled() or closed.exception() is not None:
        return None
    return closed.result()


def follow(
    handle: SagaHandle,
    closed: asyncio.Future[SagaResult | None],
    store: JournalStore | None,
    *,
    note: Note,
) -> AsyncIterator[ProgressEvent]:
    """The saga's events until `closed` (the wait for its result) is done: from `store`
    when given and it proves to be the worker's journal, else from the workflow's
    queries. Notes (why the source changed) go to `note`."""
    return _Follower(handle, closed, store, note).events()
