"""Sagas whose workflow ended without closing their journal: found, with what they did.

A saga closes its journal with SAGA_CLOSED, written by its own code before its workflow
returns. A workflow can end without running that code: terminated (by a person, by
`temporal workflow terminate`, by a parent whose parent-close policy is TERMINATE, by a
reset away from the run), or timed out (its run or execution timeout). Its executed
steps stay live, its journal stays open, and the saga itself can flag nothing.

The journal is the authority: an open chain (SAGA_OPENED, no SAGA_CLOSED) whose workflow
run is closed in Temporal is a saga that ended without closing. Two searches find them,
and `EndedSearch` says which ran and what each covered, so an empty answer is never a
silent one:

- the journal's open chains, each looked up in Temporal by its id (described, not taken
  from visibility, which lags a terminate by a moment);
- Temporal visibility alone: runs closed while their SagaStatus search attribute still
  said RUNNING, AWAITING_APPROVAL, COMPENSATING or NEEDS_HUMAN (a saga that closes sets
  a final status first). It needs no journal, so a caller without one still finds them;
  with the journal, each is confirmed there (a chain closed since is not listed).

Each saga found carries its executed steps read from the journal (what is live), the
steps whose outcome is unknown, how its workflow ended, and the commands that resolve
it: `sagacity compensate` for a terminated or timed-out run (worker.saga_reset).
"""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHistoryEventFilterType,
)

from sagacity.journal._bounds import cut
from sagacity.journal._entry import JournalEntry
from sagacity.journal._phases import Phase, SagaStatus
from sagacity.stores import JournalStore
from sagacity.tools._compensation import ExecutedStep, UnknownStep, plan_compensation
from sagacity.worker.client._client import (
    SagaHandle,
    SagaNotFoundError,
    SagaSummary,
    _rpc,
    handle_client,
    summary_of,
)
from sagacity.worker.client._discovery import EVERY_SAGA, SagaSearch
from sagacity.worker.client._saga_runs import _quoted, opening, owning_chain, saga_run

__all__ = [
    "ENDED_QUERY",
    "RESETTABLE",
    "EndedSaga",
    "EndedSearch",
    "ended_json",
    "ended_saga",
    "find_ended",
    "live_lines",
    "open_chains",
]

NON_FINAL = tuple(s.value for s in SagaStatus if not s.is_final)
ENDED_QUERY = (
    "SagaStatus IN (" + ", ".join(_quoted(s) for s in NON_FINAL) + ") "
    "AND ExecutionStatus != 'Running' AND ExecutionStatus != 'ContinuedAsNew'"
)
"""Runs that closed while their saga said it was not done (paste it into the Temporal
UI's search). A run reset away from is listed too; its id's current run decides."""
RESETTABLE = frozenset(
    {WorkflowExecutionStatus.TERMINATED.name, WorkflowExecutionStatus.TIMED_OUT.name}
)
"""How a run ended that `sagacity compensate` can undo: reset to its last workflow task
and cancelled, the saga's own cancellation path compensates. A run that failed, completed
or was cancelled by its own code would run the same code again."""
LOOKUPS = 16
"""Sagas looked up in Temporal at once. Every open chain is described, running or not:
visibility lags a terminate by a moment, so a run it still lists as running may have
ended. Measured on a busy 2-core machine: 40 open chains of running sagas looked up in
0.13-0.65 s, 40 ended sagas listed in 0.3-0.8 s."""


@dataclass(frozen=True)
class EndedSaga:
    """One saga whose workflow ended without SAGA_CLOSED."""

    saga_id: str
    summary: SagaSummary
    """What Temporal knows of its current run (execution_status NOT_FOUND: nothing)."""
    how: str
    """How the run ended, in words: "terminated (reason) by identity", "timed out"..."""
    journaled: bool
    """Its chain was read from the journal searched (False: found by visibility only)."""
    executed: tuple[ExecutedStep, ...] = ()
    """EXECUTED steps with no COMPENSATED entry, in step order: effects that are live."""
    unknown: tuple[UnknownStep, ...] = ()
    """Steps with INTENT and no outcome: whether they took effect is unknown."""
    awaiting: tuple[int, ...] = ()
    """Steps that waited for an approval when the run ended (nothing of theirs ran)."""
    parent_id: str | None = None
    """The parent workflow, for a child saga."""
    head_seq: int | None = None
    resettable: bool = False
    commands: tuple[str, ...] = ()
    """What resolves it, to paste."""
    note: str = ""


@dataclass
class EndedSearch:
    """What was found, and what was searched: an empty `found` with a search in
    `not_searched` is "nothing found there", not "nothing"."""

    found: list[EndedSaga] = field(default_factory=list)
    searched: list[str] = field(default_factory=list)
    not_searched: list[str] = field(default_factory=list)


def open_chains(store: JournalStore) -> list[str]:
    """Ids of the sagas whose chain has no SAGA_CLOSED (JournalStore.open_sagas; blocking:
    call it off the event loop)."""
    return list(store.open_sagas())


def _pending_approvals(entries: Iterable[JournalEntry]) -> tuple[int, ...]:
    """Steps asked for approval and neither rejected nor run (an approval short of its
    quorum still waits)."""
    waiting: set[int] = set()
    for entry in entries:
        if entry.phase is Phase.AWAITING_APPROVAL:
            waiting.add(entry.step)
        elif entry.phase in (Phase.REJECTED, Phase.INTENT, Phase.EXECUTED, Phase.FAILED):
            waiting.discard(entry.step)
    return tuple(sorted(waiting))


def _how(summary: SagaSummary, close: Any, config: Any) -> str:
    """How the run ended, in words, from its close event and its timeouts."""
    if close is not None:
        if close.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
            attrs = close.workflow_execution_terminated_event_attributes
            why = f" ({attrs.reason})" if attrs.reason else ""
            who = f" by {attrs.identity}" if attrs.identity else ""
            return f"terminated{why}{who}"
        if close.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
            failure = close.workflow_execution_failed_event_attributes.failure
            return f"failed ({failure.message[:300]})"
    if summary.execution_status == WorkflowExecutionStatus.TIMED_OUT.name:
        limits = [
            f"{name} timeout {value.ToSeconds()}s"
            for name, value in (
                ("run", config.workflow_run_timeout),
                ("execution", config.workflow_execution_timeout),
            )
            if value.ToSeconds()
        ]
        return f"timed out ({', '.join(limits)})" if limits else "timed out"
    return summary.execution_status.lower().replace("_", " ")


async def _close_event(handle: SagaHandle) -> Any:
    """The run's close event (one event read, not its history)."""
    with _rpc(handle_client(handle), handle.id, call="the close event"):
        async for event in handle.fetch_history_events(
            event_filter_type=WorkflowHistoryEventFilterType.CLOSE_EVENT
        ):
            return event
    return None


def _commands(saga_id: str, resettable: bool, journaled: bool) -> tuple[str, ...]:
    sid = shlex.quote(saga_id)
    listed = [f"sagacity journal {sid}"] if journaled else []
    if resettable:
        listed.append(f"sagacity compensate {sid} --actor NAME --reason 'WHY'")
    return tuple(listed)


def _closed(entries: list[JournalEntry] | None) -> bool:
    return bool(entries) and entries[-1].phase is Phase.SAGA_CLOSED  # type: ignore[index]


async def ended_saga(
    client: Client, store: JournalStore | None, saga_id: str, *, entries: list[JournalEntry] | None
) -> EndedSaga | None:
    """`saga_id` if its workflow ended without closing its journal, else None. `entries`
    is its chain as read from `store` (None: no journal searched; [] none there)."""
    if _closed(entries):
        return None
    try:
        handle, _ = await saga_run(client, saga_id)
        with _rpc(client, saga_id, call="describe"):
            desc = await handle.describe()
    except SagaNotFoundError:
        if not entries:
            return None
        summary = SagaSummary(saga_id, None, None, "NOT_FOUND", None, None, None, "")
        return _ended(saga_id, summary, entries, how="not found in Temporal")
    summary = summary_of(saga_id, desc)
    info = desc.raw_description.workflow_execution_info
    stranger = await _stranger(client, saga_id, entries, info.first_run_id)
    if summary.running and stranger is None:
        return None
    if store is not None and entries:
        # Read again now that the run is known closed: a saga closes its chain before its
        # workflow returns, so a chain still open now stays open.
        head = await asyncio.to_thread(store.head, saga_id)
        if head is not None and head.phase is Phase.SAGA_CLOSED:
            return None
    elif summary.status not in NON_FINAL:
        return None  # closed as a saga closes (or not a saga): the attribute says so
    if summary.running:
        how = f"replaced: a {desc.workflow_type} run of another run chain runs under its id"
    else:
        how = _how(summary, await _close_event(handle), desc.raw_description.execution_config)
    parent = info.parent_execution.workflow_id or None
    journal = store is not None
    return _ended(
        saga_id, summary, entries, how=how, parent=parent, journal=journal, stranger=stranger
    )


async def _stranger(
    client: Client, saga_id: str, entries: list[JournalEntry] | None, first_run_id: str
) -> str | None:
    """Why the run Temporal holds under the saga's id is not the saga's (another run chain
    than the one that journaled SAGA_OPENED), or None. A run started under the id once the
    saga's own run ended would otherwise hide it, or be reset in its place."""
    opened = opening(entries or [])
    known = (opened.get("first_run_id"), opened.get("run_id"))
    if not opened or not first_run_id or first_run_id in known:
        return None  # the common case, without a lookup: the saga opened in its first run
    owner = await owning_chain(client, saga_id, opened)
    if owner is None or owner == first_run_id:
        return None
    return (
        f"the workflow under this id in Temporal is another run chain (first run "
        f"{first_run_id}) than the one that opened the saga (first run {owner}): a reset of "
        "it could undo nothing; undo its executed steps by hand"
    )


def _ended(
    saga_id: str,
    summary: SagaSummary,
    entries: list[JournalEntry] | None,
    *,
    how: str,
    parent: str | None = None,
    journal: bool = True,
    stranger: str | None = None,
) -> EndedSaga:
    journaled = bool(entries)
    plan = plan_compensation(entries or [])
    resettable = summary.execution_status in RESETTABLE and stranger is None
    if stranger is not None:
        note = stranger
    elif summary.execution_status == "NOT_FOUND":
        note = (
            "Temporal has no workflow with this id in this namespace: its history is past "
            "the namespace's retention, or it runs in another namespace writing this journal; "
            "nothing can reset it: undo its executed steps by hand"
        )
    elif not journaled:
        note = (
            "its journal is not the one searched"
            if journal
            else "no journal was searched: its executed steps are in the worker's journal"
        )
    elif summary.execution_status not in RESETTABLE:
        note = (
            f"its run ended {summary.execution_status} by its own code with the saga open; "
            "a reset would run the same code again: undo its executed steps by hand"
        )
    else:
        note = ""
    return EndedSaga(
        saga_id=saga_id,
        summary=summary,
        how=how,
        journaled=journaled,
        executed=tuple(sorted(plan.to_compensate, key=lambda s: s.step)),
        unknown=tuple(plan.unknown),
        awaiting=_pending_approvals(entries or []),
        parent_id=parent,
        head_seq=entries[-1].seq if entries else None,
        resettable=resettable and journaled,
        commands=_commands(saga_id, resettable and journaled, journaled),
        note=note,
    )


async def _listed(client: Client, query: str, what: str) -> list[Any]:
    found: list[Any] = []
    with _rpc(client, call=what):
        async for wf in client.list_workflows(query):
            found.append(wf)
    return found


async def find_ended(
    client: Client,
    store: JournalStore | None,
    *,
    journal_name: str | None = None,
    why_no_journal: str = "no journal was given",
    limit: int | None = None,
    within: SagaSearch = EVERY_SAGA,
) -> EndedSearch:
    """Every saga whose workflow ended without closing its journal, latest ended first
    (see the module's docstring), and what was searched. `journal_name` names `store` in
    what is said; `why_no_journal` says why there is none."""
    search = EndedSearch()
    namespace = client.namespace
    query = within.query(ENDED_QUERY)
    ended_runs = await _listed(client, query, "the visibility list of ended sagas")
    candidates = list(dict.fromkeys(wf.id for wf in ended_runs))
    search.searched.append(
        f"Temporal visibility of namespace {namespace!r}: runs closed with a non-final "
        f"SagaStatus, {within.filters()} ({len(ended_runs)} run(s))"
    )
    if store is None:
        search.not_searched.append(f"the journal ({why_no_journal})")
    else:
        chains = await asyncio.to_thread(open_chains, store)
        candidates = list(dict.fromkeys([*chains, *candidates]))
        search.searched.append(
            f"the journal {journal_name or store.url}: {len(chains)} open chain(s), each "
            "looked up in Temporal, whatever its task queue and workflow type"
        )
    gate = asyncio.Semaphore(LOOKUPS)

    async def one(saga_id: str) -> EndedSaga | None:
        async with gate:
            entries = None
            if store is not None:
                entries = await asyncio.to_thread(lambda: list(store.entries(saga_id)))
            return await ended_saga(client, store, saga_id, entries=entries)

    found = [e for e in await asyncio.gather(*(one(s) for s in candidates)) if e is not None]
    found.sort(key=lambda e: e.summary.closed or datetime.min.replace(tzinfo=UTC), reverse=True)
    if limit is not None and len(found) > limit:
        left = len(found) - limit
        search.searched.append(f"{left} more ended saga(s) not shown (raise the limit)")
        found = found[:limit]
    search.found = found
    return search


def ended_json(ended: EndedSaga) -> dict[str, Any]:
    """One ended saga as JSON (`sagacity dirty --json`, `compensate --json`)."""
    summary = ended.summary
    return {
        "how": ended.how,
        "execution_status": summary.execution_status,
        "run_id": summary.run_id,
        "closed": summary.closed.isoformat() if summary.closed else None,
        "last_status": summary.status,
        "task_queue": summary.task_queue or None,
        "parent_id": ended.parent_id,
        "journaled": ended.journaled,
        "head_seq": ended.head_seq,
        "executed": [
            {"step": s.step, "tool": s.tool, "seq": s.seq, "args": s.input, "result": s.result}
            for s in ended.executed
        ],
        "unknown": [{"step": s.step, "tool": s.tool} for s in ended.unknown],
        "awaiting_approval": list(ended.awaiting),
        "resettable": ended.resettable,
        "commands": list(ended.commands),
        "note": ended.note or None,
    }


def live_lines(ended: EndedSaga) -> list[str]:
    """What is live, one line a step: executed steps, unknown outcomes, approvals."""
    lines = [
        f"step {s.step} {s.tool} {cut(json.dumps(s.input, ensure_ascii=False), 120)} "
        f"→ {cut(json.dumps(s.result, ensure_ascii=False), 120)} (seq {s.seq}): executed"
        for s in ended.executed
    ]
    lines += [f"step {s.step} {s.tool}: outcome unknown" for s in ended.unknown]
    lines += [f"step {step}: awaited approval, nothing ran" for step in ended.awaiting]
    if not ended.journaled:
        lines.append("(not in the journal searched)")
    elif not lines:
        lines.append("nothing executed and not compensated")
    return lines
