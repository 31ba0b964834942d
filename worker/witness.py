"""Temporal as a witness of the journal (`sagacity verify --witness temporal`).

Every journal write an activity makes comes back to the workflow as an EntryRef (seq and
hash), and a saga's result names its head: so Temporal history holds, outside the
journal's database, the hash of each entry the saga wrote. This module reads the history
of every run Temporal has under the saga's workflow id — every execution visibility
lists with that id, and the continue-as-new chain of each back to its first run — and
compares them with the journal:

- an entry of the history whose hash differs from the journal's at that seq: rewritten;
- an entry of the history past the journal's end: the tail was cut;
- a saga workflow whose journal has no entry: the journal is gone;
- a journal saga with no workflow: inserted by hand (or its history is past the
  namespace's retention — the finding says so, since Temporal forgets on purpose);
- a journal saga whose workflow's runs hold none of its entries: they vouch for nothing
  (a workflow that reused the id, or one started only to lend the id a history).

A saga's id is started once (sagacity's own starts refuse a duplicate), but any client
may start another workflow under a closed saga's id. Every run is read, so a run that
reused the id cannot hide the saga's own; only runs that hold the saga's entries vouch.

It trusts Temporal's history, which a Temporal administrator can delete but the
journal's database owner cannot touch: the two are separate failure (and attack)
domains. With `--all` it lists the saga workflows (those with the SagaStatus search
attribute) of every task queue this journal's sagas ran on, and of the configured one;
saga workflows on other task queues of the namespace are counted, not compared, since
they may be another journal's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHistory
from temporalio.service import RPCError, RPCStatusCode

from sagacity.evidence import Finding, Problem
from sagacity.stores.base import JournalStore
from sagacity.workflows.inspection import SAGA_STATUS

_HASH = re.compile(r"^[0-9a-f]{64}$")
_MAX_RUNS = 10_000
"""Runs followed back through continue-as-new before giving up (a loop guard)."""


@dataclass
class Witnessed:
    """What the histories of one saga's runs say about its journal."""

    saga_id: str
    runs: int = 0
    refs: dict[int, str] = field(default_factory=dict)
    """seq -> hash, from every activity result, update result and run result."""
    closed_at: int | None = None
    """The head seq the saga's result names (None while it runs)."""
    conflicts: list[str] = field(default_factory=list)
    starts: set[str] = field(default_factory=set)
    """The first run of each chain of runs (continue-as-new, retries): more than one
    means the id was started more than once."""
    types: set[str] = field(default_factory=set)
    """The workflow types of the runs."""


def _payloads(event: HistoryEvent) -> Iterator[Payload]:
    kind = event.WhichOneof("attributes")
    if kind == "activity_task_completed_event_attributes":
        yield from event.activity_task_completed_event_attributes.result.payloads
    elif kind == "marker_recorded_event_attributes":
        details = event.marker_recorded_event_attributes.details
        if "result" in details:
            yield from details["result"].payloads
    elif kind == "workflow_execution_completed_event_attributes":
        yield from event.workflow_execution_completed_event_attributes.result.payloads
    elif kind == "activity_task_failed_event_attributes":
        # A failed tool fails its activity with the step's outcome as details.
        yield from _failure_details(event.activity_task_failed_event_attributes.failure)
    elif kind == "workflow_execution_failed_event_attributes":
        # A saga that did not complete fails its workflow with its result as details.
        yield from _failure_details(event.workflow_execution_failed_event_attributes.failure)
    elif kind == "workflow_execution_continued_as_new_event_attributes":
        yield from event.workflow_execution_continued_as_new_event_attributes.input.payloads
    elif kind == "workflow_execution_update_completed_event_attributes":
        outcome = event.workflow_execution_update_completed_event_attributes.outcome
        if outcome.HasField("success"):
            yield from outcome.success.payloads


def _failure_details(failure: Failure) -> Iterator[Payload]:
    if failure.HasField("application_failure_info"):
        yield from failure.application_failure_info.details.payloads


_CLOSES = frozenset(
    ("workflow_execution_completed_event_attributes", "workflow_execution_failed_event_attributes")
)
"""Events that carry the saga's result: its head is where the journal closed."""


def _values(payload: Payload) -> Any:
    if payload.metadata.get("encoding") != b"json/plain":
        return None
    try:
        return json.loads(payload.data)
    except (ValueError, RecursionError):
        return None


def _refs(value: Any) -> Iterator[tuple[int, str]]:
    """Every (seq, hash) a decoded payload names: EntryRef-shaped objects and a saga
    result's head."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for seq_key, hash_key in (("seq", "hash"), ("head_seq", "head_hash")):
                seq, digest = item.get(seq_key), item.get(hash_key)
                if isinstance(seq, int) and isinstance(digest, str) and _is_ref(seq, digest):
                    yield seq, digest
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _is_ref(seq: object, digest: object) -> bool:
    return (
        isinstance(seq, int)
        and not isinstance(seq, bool)
        and seq >= 1
        and isinstance(digest, str)
        and bool(_HASH.match(digest))
    )


def read_history(seen: Witnessed, history: WorkflowHistory) -> str | None:
    """Add one run's refs to `seen`; returns the run it continued from, if any."""
    previous: str | None = None
    for event in history.events:
        kind = event.WhichOneof("attributes")
        if kind == "workflow_execution_started_event_attributes":
            started = event.workflow_execution_started_event_attributes
            previous = started.continued_execution_run_id
            seen.starts.add(started.first_execution_run_id or started.original_execution_run_id)
            seen.types.add(started.workflow_type.name)
        for payload in _payloads(event):
            value = _values(payload)
            for seq, digest in _refs(value):
                known = seen.refs.setdefault(seq, digest)
                if known != digest:
                    seen.conflicts.append(f"history names two hashes for entry {seq}")
            if kind in _CLOSES and isinstance(value, dict):
                head = value.get("head_seq")
                if isinstance(head, int) and seen.closed_at is None:
                    seen.closed_at = head
    seen.runs += 1
    return previous or None


async def _run_ids(client: Client, saga_id: str) -> list[str | None]:
    """Every run visibility lists under the id, and the newest run (None: visibility
    may not list a run started a moment ago)."""
    query = f"WorkflowId = '{_quoted(saga_id)}'"
    listed: list[str | None] = [run.run_id async for run in client.list_workflows(query)]
    return [None, *listed]


async def witness_saga(client: Client, saga_id: str) -> Witnessed | None:
    """The refs of every run Temporal has under the saga's workflow id, each followed
    back through continue-as-new to its first run; None when Temporal has none."""
    seen = Witnessed(saga_id)
    pending = await _run_ids(client, saga_id)
    read: set[str] = set()
    while pending and seen.runs < _MAX_RUNS:
        run_id = pending.pop()
        if run_id is not None and run_id in read:
            continue
        handle = client.get_workflow_handle(saga_id, run_id=run_id)
        try:
            if run_id is None:
                run_id = (await handle.describe()).run_id
                if run_id in read:
                    continue
                handle = client.get_workflow_handle(saga_id, run_id=run_id)
            history = await handle.fetch_history()
        except RPCError as exc:
            if exc.status is RPCStatusCode.NOT_FOUND:
                continue  # the newest run is gone, or a listed run passed retention
            raise
        read.add(run_id)
        previous = read_history(seen, history)
        if previous is not None and previous not in read:
            pending.append(previous)
    return seen if seen.runs else None


def compare(store: JournalStore, seen: Witnessed | None, saga_id: str) -> list[Finding]:
    """The journal of `saga_id` against what its workflow's histories hold."""
    if seen is None:
        if store.head(saga_id) is None:
            return []
        return [
            Finding(
                saga_id,
                Problem.WITNESS,
                "Temporal has no workflow with this id: the saga was inserted into the "
                "journal by hand, or its history is past the namespace's retention",
            )
        ]
    reused = (
        f" (the id was started {len(seen.starts)} times: a run of another workflow, or of "
        "a saga of another journal, may hold it)"
        if len(seen.starts) > 1
        else ""
    )
    findings = [Finding(saga_id, Problem.WITNESS, text + reused) for text in seen.conflicts]
    wanted = dict(seen.refs)
    last = 0
    for entry in store.entries(saga_id):
        last = entry.seq
        digest = wanted.pop(entry.seq, None)
        if digest is not None and digest != entry.hash:
            findings.append(
                Finding(
                    saga_id,
                    Problem.WITNESS,
                    f"entry {entry.seq} hashes to {entry.hash[:16]}… in the journal, Temporal "
                    f"history recorded {digest[:16]}…: the chain was rewritten",
                )
            )
    if last and not seen.refs:
        findings.append(
            Finding(
                saga_id,
                Problem.WITNESS,
                f"Temporal has {seen.runs} run(s) under this id ({', '.join(sorted(seen.types))}), "
                "but their history holds no entry of this saga, so it vouches for nothing: "
                "another workflow reused the id, or one was started under it to lend an "
                "inserted saga a history (a saga started a moment ago has none yet: look "
                "again)",
            )
        )
    elif last == 0 and seen.refs:
        findings.append(
            Finding(
                saga_id,
                Problem.WITNESS,
                f"its workflow ({seen.runs} run(s)) journaled {len(seen.refs)} entries, but "
                "the journal holds none: the saga's journal was deleted",
            )
        )
    elif wanted:
        findings.append(
            Finding(
                saga_id,
                Problem.WITNESS,
                f"Temporal history holds entries up to {max(wanted)}, the journal ends at "
                f"{last}: its tail was cut",
            )
        )
    if seen.closed_at is not None and last > seen.closed_at:
        findings.append(
            Finding(
                saga_id,
                Problem.WITNESS,
                f"the saga's result closed it at entry {seen.closed_at}, the journal holds "
                f"{last}: entries were added after the close",
            )
        )
    return findings


@dataclass(frozen=True, slots=True)
class Scope:
    """Which saga workflows `verify --all --witness temporal` compares with the journal."""

    ids: list[str]
    """The journal's sagas and the saga workflows on `queues`."""
    queues: list[str]
    """The configured task queue and every one this journal's sagas ran on."""
    others: int
    """Saga workflows on other task queues of the namespace: not compared."""


def scope(journal: Iterable[str], listed: dict[str, set[str]], configured: str) -> Scope:
    """The ids to witness: every saga of the journal, and every saga workflow (`listed`:
    id -> the task queues of its runs) on a task queue that serves this journal — the
    configured one and any a journal saga ran on. A journal served by several queues is
    covered by each; a saga deleted from the journal is found on any of them."""
    ids = set(journal)
    queues = {configured}
    for saga_id in ids:
        queues |= listed.get(saga_id, set())
    wanted = {saga_id for saga_id, on in listed.items() if on & queues}
    others = sum(1 for saga_id in listed if saga_id not in wanted and saga_id not in ids)
    return Scope(sorted(ids | wanted), sorted(queues), others)


async def saga_workflows(client: Client) -> dict[str, set[str]]:
    """Every saga workflow of the namespace (they carry SagaStatus), with the task queues
    of its runs: whatever queue a saga ran on, it is listed."""
    listed: dict[str, set[str]] = {}
    async for execution in client.list_workflows(f"{SAGA_STATUS.name} IS NOT NULL"):
        listed.setdefault(execution.id, set()).add(execution.task_queue)
    return listed


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


@dataclass
class WitnessReport:
    """What the witness compared: sagas with a workflow, runs read, ids started more
    than once, and the findings."""

    sagas: int = 0
    runs: int = 0
    reused: int = 0
    findings: list[Finding] = field(default_factory=list)


async def witness_all(
    client: Client, store: JournalStore, saga_ids: Iterable[str]
) -> WitnessReport:
    """Compare each saga with the histories of every run under its id."""
    report = WitnessReport()
    for saga_id in saga_ids:
        seen = await witness_saga(client, saga_id)
        if seen is not None:
            report.sagas += 1
            report.runs += seen.runs
            report.reused += len(seen.starts) > 1
        report.findings += compare(store, seen, saga_id)
    return report
