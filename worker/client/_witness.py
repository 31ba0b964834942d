"""Temporal as a witness of the journal (`sagacity verify --witness temporal`).

Every journal write an activity makes comes back to the workflow as an EntryRef (seq and
hash), and a saga's result names its head: so Temporal history holds, outside the
journal's database, the hash of each entry the saga wrote. This module reads the history
of every run Temporal has under the saga's workflow id — every execution visibility
lists with that id, and the continue-as-new chain of each back to its first run — and
compares what the saga runs among them say (witness_history: only runs that are
sagacity sagas are read, and only where sagacity writes) with the journal:

- an entry of the history whose hash differs from the journal's at that seq: rewritten;
- an entry of the history past the journal's end: the tail was cut;
- a saga workflow whose journal has no entry: the journal is gone;
- a journal saga with no workflow: inserted by hand (or its history is past the
  namespace's retention — the finding says so, since Temporal forgets on purpose);
- a journal saga with runs under its id but no saga run: another workflow was started
  under the id (to lend an inserted saga a history, say); it is named, not read;
- a journal saga whose saga runs hold none of its entries: they vouch for nothing.

A saga's id is started once (sagacity's own starts refuse a duplicate), but any client
may start another workflow under a closed saga's id. Every run is read, so a run that
reused the id cannot hide the saga's own, nor vouch for a journal or accuse it unless it
is a saga's run.

It trusts Temporal's history, which a Temporal administrator can delete but the
journal's database owner cannot touch: the two are separate failure (and attack)
domains; and it trusts the namespace's workers (witness_history says why). With `--all`
it lists the saga workflows (those with the SagaStatus search attribute) of every task
queue this journal's sagas ran on, and of the configured one; saga workflows on other
task queues of the namespace are counted, not compared, since they may be another
journal's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from temporalio.client import Client, WorkflowHistory
from temporalio.service import RPCError, RPCStatusCode

from sagacity.audit._evidence import Finding, Problem
from sagacity.stores._base import JournalStore
from sagacity.worker.client._witness_history import read_run
from sagacity.workflows._inspection import SAGA_STATUS

_MAX_RUNS = 10_000
"""Runs followed back through continue-as-new before giving up (a loop guard)."""


@dataclass
class Witnessed:
    """What the histories of the saga runs under one workflow id say about its journal
    (runs of other workflows under the id are counted in `foreign`, never read)."""

    saga_id: str
    runs: int = 0
    """Saga runs read."""
    refs: dict[int, str] = field(default_factory=dict)
    """seq -> hash, from sagacity's activities and the saga's result (witness_history)."""
    closed_at: int | None = None
    """Where the saga runs say the saga closed (None while it runs)."""
    conflicts: list[str] = field(default_factory=list)
    starts: set[str] = field(default_factory=set)
    """The first run of each chain of saga runs (continue-as-new, retries): more than one
    means a saga was started under the id more than once."""
    types: set[str] = field(default_factory=set)
    """The workflow types of the saga runs."""
    foreign: dict[str, int] = field(default_factory=dict)
    """Runs under the id that are no sagacity saga, by workflow type: not read."""


def read_history(seen: Witnessed, history: WorkflowHistory) -> str | None:
    """Add one run to `seen` (its refs only if it is a saga's run); returns the run it
    continued from, if any."""
    run = read_run(history)
    if not run.saga:
        seen.foreign[run.workflow_type] = seen.foreign.get(run.workflow_type, 0) + 1
        return run.previous
    seen.runs += 1
    seen.starts.add(run.first_run)
    seen.types.add(run.workflow_type)
    for seq, digest in run.refs:
        known = seen.refs.setdefault(seq, digest)
        if known != digest:
            seen.conflicts.append(f"history names two hashes for entry {seq}")
    if run.closes:
        closed = min(run.closes)
        seen.closed_at = closed if seen.closed_at is None else min(seen.closed_at, closed)
    return run.previous


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
    while pending and len(read) < _MAX_RUNS:
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
    return seen if read else None


def compare(store: JournalStore, seen: Witnessed | None, saga_id: str) -> list[Finding]:
    """The journal of `saga_id` against what its workflow's histories hold."""
    if seen is None or not seen.runs:
        if store.head(saga_id) is None:
            return []
        return [Finding(saga_id, Problem.WITNESS, _no_saga_run(seen))]
    reused = (
        f" (a saga was started {len(seen.starts)} times under the id: a saga of another "
        "journal may hold it)"
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
                "another saga reused the id, or one was started under it to lend an "
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


def _no_saga_run(seen: Witnessed | None) -> str:
    """Why a journaled saga has no witness: Temporal holds no workflow under its id, or
    only runs that are no saga."""
    if seen is None:
        return (
            "Temporal has no workflow with this id: the saga was inserted into the "
            "journal by hand, or its history is past the namespace's retention"
        )
    return (
        f"Temporal has no saga run under this id, only {_foreign(seen)}: no sagacity "
        "saga (neither an AgentSaga nor a workflow that ran sagacity's activities), so "
        "its history is not read as the saga's; the saga was inserted into the journal "
        "by hand and another workflow started under its id, or its own history is past "
        "the namespace's retention"
    )


def _foreign(seen: Witnessed) -> str:
    """The runs under an id that are no saga, as a summary names them."""
    kinds = ", ".join(f"{count} of {name or '?'}" for name, count in sorted(seen.foreign.items()))
    return f"run(s) of another workflow type ({kinds})"


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
    """What the witness compared: sagas with a saga run, saga runs read, ids a saga was
    started under more than once, ids that runs of other workflows share (not read), and
    the findings."""

    sagas: int = 0
    runs: int = 0
    reused: int = 0
    foreign: list[str] = field(default_factory=list)
    """"ID (N of TYPE…)" for every id under which runs of another workflow were found."""
    findings: list[Finding] = field(default_factory=list)


async def witness_all(
    client: Client, store: JournalStore, saga_ids: Iterable[str]
) -> WitnessReport:
    """Compare each saga with the histories of every run under its id."""
    report = WitnessReport()
    for saga_id in saga_ids:
        seen = await witness_saga(client, saga_id)
        if seen is not None:
            report.sagas += seen.runs > 0
            report.runs += seen.runs
            report.reused += len(seen.starts) > 1
            if seen.foreign:
                report.foreign.append(f"{saga_id} ({_foreign(seen)})")
        report.findings += compare(store, seen, saga_id)
    return report
