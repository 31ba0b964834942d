"""Helpers shared by the fault tests: worker processes, journal evidence, polling.

Every check here reads real evidence — the journal rows, the shop's record of what each
tool body actually did, Temporal's history — never the workflow's own account alone.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle

from sagacity.approval._registry_marks import JournaledMark
from sagacity.examples.orders import Shop
from sagacity.journal._chain import verify_chain
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase, SagaStatus
from sagacity.stores import JournalStore
from sagacity.stores._base import StepClaim
from sagacity.tlog._log import CheckpointLog
from sagacity.tlog._note_keys import NoteSigner
from sagacity.tools._compensation import plan_compensation
from sagacity.workflows._models import SagaResult, ToolCall

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[2]

RESERVE = ToolCall(tool="reserve_inventory", args={"sku": "widget", "qty": 1})
CHARGE = ToolCall(tool="charge_card", args={"amount": 100, "currency": "EUR"})
SHIP = ToolCall(tool="ship_order", args={"address": "Main St 1"})
SHIP_FAILS = ToolCall(tool="ship_order", args={"address": "Main St 1", "fail": True})
RESERVE_FAILS = ToolCall(tool="reserve_inventory", args={"sku": "widget", "qty": 0})
WIRE_ARGS = {"iban": "DE89370400440532013000", "amount": 5000, "currency": "EUR"}
WIRE = ToolCall(tool="send_wire_transfer", args=dict(WIRE_ARGS))
WIRE_2 = ToolCall(tool="send_wire_transfer", args={**WIRE_ARGS, "amount": 7000})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def with_schema(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


def restock(shop_path: Path, qty: int) -> None:
    """Give the fake shop enough stock for many sagas (its default is 10 widgets)."""
    Shop(shop_path)  # creates the schema and the initial rows
    with sqlite3.connect(shop_path, timeout=30) as db:
        db.execute("UPDATE stock SET qty = ?", (qty,))


async def eventually(
    probe: Callable[[], Awaitable[T | None]] | Callable[[], T | None],
    timeout: float = 20.0,
    what: str = "condition",
    interval: float = 0.05,
) -> T:
    """Poll `probe` (sync or async) until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout}s")
        await asyncio.sleep(interval)


# ---- Temporal history --------------------------------------------------------------------


async def failed_workflow_tasks(handle: WorkflowHandle[Any, Any]) -> list[str]:
    """Messages of every WORKFLOW_TASK_FAILED event: a failed workflow task means the
    workflow code itself broke (and retries forever), which no input may cause."""
    history = await handle.fetch_history()
    return [
        e.workflow_task_failed_event_attributes.failure.message
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]


async def history_events(handle: WorkflowHandle[Any, Any]) -> list[Any]:
    return list((await handle.fetch_history()).events)


# ---- journal evidence -------------------------------------------------------------------


def phases(store: JournalStore, saga_id: str) -> list[tuple[str, int]]:
    return [(e.phase.value, e.step) for e in store.entries(saga_id)]


def entries_of(store: JournalStore, saga_id: str, phase: Phase | str) -> list[JournalEntry]:
    return [e for e in store.entries(saga_id) if e.phase.value == str(phase)]


def assert_chain_closed(store: JournalStore, saga_id: str) -> list[JournalEntry]:
    """The saga's chain verifies and ends with SAGA_CLOSED; returns its entries."""
    entries = list(store.entries(saga_id))
    report = verify_chain(saga_id, entries)
    assert report.ok and report.closed, report.describe()
    assert [e.seq for e in entries] == list(range(1, len(entries) + 1))
    return entries


def orphan_steps(entries: Iterable[JournalEntry]) -> list[int]:
    """Steps with INTENT and neither EXECUTED nor FAILED, read from the journal alone."""
    return [u.step for u in plan_compensation(entries).unknown]


def assert_evidence_consistent(result: SagaResult, entries: list[JournalEntry]) -> None:
    """What the saga reports agrees with the journal: the closing entry is the head the
    result names, orphan INTENTs are exactly the steps reported as needing a human."""
    closing = entries[-1]
    assert closing.phase is Phase.SAGA_CLOSED
    assert (result.head_seq, result.head_hash) == (closing.seq, closing.hash)
    assert isinstance(closing.result, dict)
    assert closing.result["status"] == result.status.value
    orphans = orphan_steps(entries)
    assert result.unknown_outcome_steps == orphans, (result.unknown_outcome_steps, orphans)
    assert closing.result["unknown_outcome_steps"] == orphans
    if orphans and result.status is not SagaStatus.ACCEPTED:  # accepted: nobody needed now
        assert result.needs_human is True and closing.result["needs_human"] is True


def assert_executed_ran_once(
    calls_log: Iterable[tuple[str, str, int]], saga_id: str, entries: list[JournalEntry]
) -> None:
    """No step whose EXECUTED was journaled ran its tool body twice (the shop logs every
    body run with the step's idempotency key), and no compensation ran twice."""
    calls = Counter((tool, key) for tool, key, _ in calls_log)
    for entry in entries:
        key = f"{saga_id}:{entry.step}"
        if entry.phase is Phase.EXECUTED:
            assert calls[(entry.tool, key)] == 1, (entry.tool, key, calls)
        if entry.phase is Phase.COMPENSATED:
            comp = entry.input["compensation"] if isinstance(entry.input, dict) else None
            assert comp is not None and calls[(comp, key)] == 1, (comp, key, calls)


# ---- worker processes -------------------------------------------------------------------


class WorkerProcesses:
    """`python -m sagacity.worker worker` subprocesses of one test, as production runs them.

    Output goes to a file per process (the evidence for a post-mortem); every process
    still running at teardown is stopped (TERM, then KILL)."""

    def __init__(self, tmp: Path, env: dict[str, str], args: list[str]) -> None:
        self.tmp = tmp
        self.env = env
        self.args = args
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def task_queue(self) -> str:
        return self.args[self.args.index("--task-queue") + 1]

    def start(self, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        n = len(self.procs) + 1
        out = (self.tmp / f"worker{n}.out").open("wb")
        err = (self.tmp / f"worker{n}.err").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "sagacity.worker", "worker", *self.args, *extra],
            cwd=REPO,
            env=env or self.env,
            stdout=out,
            stderr=err,
        )
        out.close()
        err.close()
        self.procs.append(proc)
        return proc

    def output(self, proc: subprocess.Popen[bytes], stream: str = "both") -> str:
        n = self.procs.index(proc) + 1
        texts = []
        for name in ("out", "err") if stream == "both" else (stream,):
            path = self.tmp / f"worker{n}.{name}"
            if path.exists():
                texts.append(path.read_text(errors="replace"))
        return "\n".join(texts)

    async def wait_ready(self, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
        """Until the worker printed its banner (it polls from then on)."""
        await eventually(
            lambda: "sagacity worker:" in self.output(proc, "out") or proc.poll() is not None,
            timeout,
            "worker banner",
        )
        if proc.poll() is not None:
            pytest.fail(f"worker exited ({proc.returncode}):\n{self.output(proc)[-4000:]}")

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL, and prove it: the process died by that signal, not by itself."""
        assert proc.poll() is None, f"worker already exited:\n{self.output(proc)[-4000:]}"
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL, "the worker did not die by SIGKILL"

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def worker_env(temporal_address: str, shop_path: Path, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": temporal_address,
        "SAGACITY_SHOP_PATH": str(shop_path),
        "PYTHONUNBUFFERED": "1",
    }
    env.update(extra)
    return env


# ---- a store that counts failures ---------------------------------------------------------


class CountingStore(JournalStore):
    """Delegates to a real store and counts the exceptions each method raised: the proof
    that an outage really made appends fail (and that they were retried)."""

    def __init__(self, inner: JournalStore) -> None:
        super().__init__(inner.clock)
        self.inner = inner
        self.url = inner.url
        self.failures: Counter[str] = Counter()
        self.errors: list[str] = []
        self.calls: Counter[str] = Counter()

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self.calls[name] += 1
        try:
            return getattr(self.inner, name)(*args, **kwargs)
        except Exception as exc:
            self.failures[name] += 1
            self.errors.append(f"{name}: {type(exc).__name__}: {exc}")
            raise

    def append(self, draft: EntryDraft) -> JournalEntry:
        return self._call("append", draft)  # type: ignore[no-any-return]

    def begin_step(self, draft: EntryDraft) -> StepClaim:
        return self._call("begin_step", draft)  # type: ignore[no-any-return]

    def entries(self, saga_id: str, *, after_seq: int = 0) -> Iterator[JournalEntry]:
        self.calls["entries"] += 1
        try:
            return iter(list(self.inner.entries(saga_id, after_seq=after_seq)))
        except Exception as exc:
            self.failures["entries"] += 1
            self.errors.append(f"entries: {type(exc).__name__}: {exc}")
            raise

    def head(self, saga_id: str) -> JournalEntry | None:
        return self._call("head", saga_id)  # type: ignore[no-any-return]

    def sagas(self) -> Iterator[str]:
        return iter(list(self.inner.sagas()))

    def step_entries(self, saga_id: str, step: int) -> list[JournalEntry]:
        return self._call("step_entries", saga_id, step)  # type: ignore[no-any-return]

    def registry_marks(self) -> list[JournaledMark]:
        return self._call("registry_marks")  # type: ignore[no-any-return]

    def fence(self, saga_id: str, step: int) -> None:
        self._call("fence", saga_id, step)

    def is_fenced(self, saga_id: str, step: int) -> bool:
        return self._call("is_fenced", saga_id, step)  # type: ignore[no-any-return]

    def checkpoint_log(self, signer: NoteSigner | None = None) -> CheckpointLog:
        """The inner store's log: checkpoints are written beside the journal, as the
        worker's default log key has them (their writes are not the outage's subject)."""
        return self.inner.checkpoint_log(signer)

    def close(self) -> None:
        self.inner.close()
