"""Benchmark 4: sagas parked waiting for approval on one worker, then all approved.

The worker runs in its own process so its memory is its own: the production entry point
`python -m sagacity.worker worker --tools bench.noop:toolbox` with SAGACITY_ settings (journal on
Postgres). The baseline is a plain workflow that waits for a validated `decide` update
carrying its payload hash and then runs one no-op activity (bench.plain), served by
`python -m bench.plain_worker` with the same worker settings.

Per side and round: a fresh worker process, a short warm-up (a few workflows approved to
completion, so imports and caches are paid before the idle reading), idle RSS, start N
workflows, poll their pending-approval query until all are parked, parked RSS, then
approve every one (saga: `worker.client.decide` with the hash from `pending_approval`;
plain: its `decide` update) and wait for every result. Per-workflow bytes =
(parked - idle) / N.

A worker keeps at most `max_cached_workflows` runs (Temporal's default, 1,000) in memory;
beyond that, parked runs are evicted and replayed from history when their decision
arrives, so worker memory is bounded by the cache, not by the number of parked sagas.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import (
    DEFAULT_POSTGRES_URL,
    RESULTS_DIR,
    ROOT,
    Report,
    Sizes,
    drop_schemas,
    fmt_bytes,
    fmt_rate,
    median,
    rss_bytes,
    run_id,
)

WARM_UP = 5
CONCURRENCY = 50
EXPECTED_ENTRIES = 6
"""SAGA_OPENED, AWAITING_APPROVAL, APPROVED, INTENT, EXECUTED, SAGA_CLOSED."""


class WorkerProcess:
    """A worker subprocess: started, read until ready, measured, stopped by its pid."""

    def __init__(self, cmd: list[str], env: dict[str, str], ready: str, log: Path) -> None:
        self.log = log.open("w")
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=self.log, text=True
        )
        self.ready = ready

    def wait_ready(self, timeout: float = 60.0) -> None:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if self.ready in line:
                return
            if not line and self.proc.poll() is not None:
                break
        raise RuntimeError(
            f"worker did not become ready (exit {self.proc.poll()}); see {self.log.name}"
        )

    @property
    def rss(self) -> int:
        return rss_bytes(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.log.close()


async def _gather_bounded(coros: list[Any], limit: int = CONCURRENCY) -> list[Any]:
    gate = asyncio.Semaphore(limit)

    async def one(coro: Any) -> Any:
        async with gate:
            return await coro

    return await asyncio.gather(*(one(c) for c in coros), return_exceptions=True)


class _Side:
    """How to start, inspect and approve one kind of parked workflow."""

    def __init__(self, kind: str, client: Any, task_queue: str) -> None:
        self.kind = kind
        self.client = client
        self.task_queue = task_queue

    async def start(self, wf_id: str, i: int) -> Any:
        if self.kind == "saga":
            from sagacity.workflows._models import SagaInput, SagaResult, ToolCall

            plan = [ToolCall(tool="noop_irreversible", args={"ref": f"wire-{i:06d}"})]
            return await self.client.start_workflow(
                "AgentSaga", SagaInput(plan=plan), id=wf_id, task_queue=self.task_queue,
                result_type=SagaResult,
            )  # fmt: skip
        return await self.client.start_workflow(
            "BenchPlainApproval", {"ref": f"wire-{i:06d}"}, id=wf_id,
            task_queue=self.task_queue, result_type=str,
        )  # fmt: skip

    async def pending(self, handle: Any) -> Any:
        """The pending request (saga: PendingApproval; plain: the hash), or None."""
        if self.kind == "saga":
            from sagacity.workflows._models import PendingApproval

            return await handle.query(
                "pending_approval",
                result_type=PendingApproval | None,
            )
        return await handle.query("pending", result_type=str | None)

    async def approve(self, handle: Any, pending: Any) -> None:
        if self.kind == "saga":
            from sagacity.worker.client._actions import decide

            await decide(
                handle,
                step=pending.step,
                payload_sha256=pending.payload_sha256,
                approver="bench-approver",
                approve=True,
            )
        else:
            await handle.execute_update("decide", {"payload_sha256": pending}, result_type=bool)

    def completed(self, result: Any) -> bool:
        if self.kind == "saga":
            from sagacity.journal._phases import SagaStatus

            return bool(result.status is SagaStatus.COMPLETED)
        return bool(result == "COMPLETED")


async def _park_all(side: _Side, handles: list[Any]) -> dict[int, Any]:
    """Poll pending queries until every workflow is parked; returns index -> pending."""
    parked: dict[int, Any] = {}
    while len(parked) < len(handles):
        todo = [i for i in range(len(handles)) if i not in parked]
        answers = await _gather_bounded([side.pending(handles[i]) for i in todo])
        for i, answer in zip(todo, answers, strict=True):
            if answer is not None and not isinstance(answer, BaseException):
                parked[i] = answer
        if len(parked) < len(handles):
            await asyncio.sleep(0.5)
    return parked


async def _one_round(side: _Side, worker: WorkerProcess, n: int, prefix: str) -> dict[str, Any]:
    # warm-up: imports, sandbox, pools, prepared statements
    warm = await _gather_bounded([side.start(f"{prefix}-warm-{i}", i) for i in range(WARM_UP)])
    pend = await _park_all(side, warm)
    await _gather_bounded([side.approve(warm[i], p) for i, p in pend.items()])
    await _gather_bounded([h.result() for h in warm])
    await asyncio.sleep(1.0)
    idle = worker.rss

    t0 = time.perf_counter()
    started = await _gather_bounded([side.start(f"{prefix}-{i}", i) for i in range(n)])
    errors = [repr(h) for h in started if isinstance(h, BaseException)]
    handles = [h for h in started if not isinstance(h, BaseException)]
    pending = await _park_all(side, handles)
    t1 = time.perf_counter()
    await asyncio.sleep(2.0)
    parked_rss = worker.rss

    t2 = time.perf_counter()
    approvals = await _gather_bounded([side.approve(handles[i], p) for i, p in pending.items()])
    t_decided = time.perf_counter()
    results = await _gather_bounded([h.result() for h in handles], limit=len(handles) or 1)
    t3 = time.perf_counter()
    approval_errors = [repr(a) for a in approvals if isinstance(a, BaseException)]
    errors += [repr(r) for r in results if isinstance(r, BaseException)]
    not_completed = [
        r for r in results if not isinstance(r, BaseException) and not side.completed(r)
    ]
    await asyncio.sleep(2.0)
    after = worker.rss
    return {
        "n": n,
        "idle_rss": idle,
        "parked_rss": parked_rss,
        "after_rss": after,
        "per_workflow_bytes": (parked_rss - idle) / n if n else 0.0,
        "park_s": t1 - t0,
        "approve_all_s": t3 - t2,
        "decide_all_s": t_decided - t2,
        "errors": errors,
        "approval_errors": approval_errors,
        "not_completed": len(not_completed),
        "ids": [h.id for h in handles],
    }


def _start_worker(
    kind: str, address: str, task_queue: str, store_url: str, logdir: Path
) -> WorkerProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    if kind == "saga":
        env.update(
            TEMPORAL_ADDRESS=address,
            SAGACITY_TASK_QUEUE=task_queue,
            SAGACITY_JOURNAL_URL=store_url,
            SAGACITY_TOOLS="bench.noop:toolbox",
        )
        cmd = [sys.executable, "-m", "sagacity.worker", "worker", "--tools", "bench.noop:toolbox"]
        ready = "sagacity worker:"
    else:
        cmd = [
            sys.executable, "-m", "bench.plain_worker", "--address", address,
            "--task-queue", task_queue,
        ]  # fmt: skip
        ready = "plain worker ready"
    worker = WorkerProcess(cmd, env, ready, logdir / f"{task_queue}.log")
    try:
        worker.wait_ready()
    except BaseException:
        worker.stop()
        raise
    return worker


async def _run(sizes: Sizes, postgres_url: str) -> Report:
    from sagacity.audit._export import verify_store
    from sagacity.stores import open_store
    from sagacity.worker._devserver import start_dev_server

    report = Report("parked", "Parked sagas: worker memory and approving them all", sizes)
    tag = f"b{run_id()}"
    schema = f"bench_{tag}_parked"
    store_url = f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={schema}"
    n = sizes.parked_sagas
    env = await start_dev_server()
    address = env.client.service_client.config.target_host
    open_store(store_url).close()  # migrate before the worker starts
    runs: dict[str, list[dict[str, Any]]] = {"plain": [], "saga": []}
    logs = RESULTS_DIR / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    try:
        for r in range(sizes.parked_rounds):
            order = ["plain", "saga"] if r % 2 == 0 else ["saga", "plain"]
            for kind in order:
                tq = f"{tag}-{kind}-r{r}"
                worker = await asyncio.to_thread(_start_worker, kind, address, tq, store_url, logs)
                try:
                    side = _Side(kind, env.client, tq)
                    runs[kind].append(await _one_round(side, worker, n, tq))
                finally:
                    await asyncio.to_thread(worker.stop)
    finally:
        await env.shutdown()

    store = open_store(store_url)
    try:
        problems = []
        for run in runs["saga"]:
            for saga_id in run["ids"]:
                verified = verify_store(store, saga_id)
                if not (verified.ok and verified.closed and verified.entries == EXPECTED_ENTRIES):
                    problems.append(verified.describe())
        total = sum(len(run["ids"]) for run in runs["saga"])
        report.check(
            not problems,
            f"{total:,} approved sagas: every journal verifies, closed, "
            f"{EXPECTED_ENTRIES} entries each (none lost)",
            f"{len(problems)} saga journals wrong: {problems[:3]}",
        )
    finally:
        store.close()
        drop_schemas(postgres_url, schema)

    for kind in ("plain", "saga"):
        errors = [e for run in runs[kind] for e in run["errors"]]
        incomplete = sum(run["not_completed"] for run in runs[kind])
        report.check(
            not errors and not incomplete,
            f"{kind}: every workflow started, parked and completed after its approval",
            f"{kind}: {len(errors)} errors, {incomplete} not completed: {errors[:3]}",
        )
    refused = {kind: [e for run in runs[kind] for e in run["approval_errors"]] for kind in runs}
    report.target(
        "approval calls that failed (count)",
        float(len(refused["saga"])),
        0.0,
        "<=",
        note="; ".join(refused["saga"][:2])[:300],
        unit="",
    )
    if refused["saga"] or refused["plain"]:
        report.notes.append(
            f"approval calls that raised: saga {len(refused['saga'])}, plain "
            f"{len(refused['plain'])} of {n * sizes.parked_rounds:,}; every workflow still "
            "completed (checked above), so a raised call is a client-side timeout of a "
            "decision that was applied"
        )
    rows = []
    for kind, label in (
        ("plain", "plain workflow + update"),
        ("saga", "saga (irreversible no-op)"),
    ):
        xs = runs[kind]
        rows.append(
            [
                label, f"{n:,}",
                fmt_bytes(median([x["idle_rss"] for x in xs])),
                fmt_bytes(median([x["parked_rss"] for x in xs])),
                fmt_bytes(median([x["per_workflow_bytes"] for x in xs])),
                fmt_bytes(median([x["after_rss"] for x in xs])),
                f"{median([x['park_s'] for x in xs]):.1f}",
                f"{median([x['approve_all_s'] for x in xs]):.1f}",
                fmt_rate(n / median([x["approve_all_s"] for x in xs])),
            ]
        )  # fmt: skip
    mem_ratio = median([x["per_workflow_bytes"] for x in runs["saga"]]) / max(
        1.0, median([x["per_workflow_bytes"] for x in runs["plain"]])
    )
    time_ratio = median([x["approve_all_s"] for x in runs["saga"]]) / median(
        [x["approve_all_s"] for x in runs["plain"]]
    )
    rows.append(
        ["ratio saga/plain", "", "", "", f"{mem_ratio:.2f}", "", "", f"{time_ratio:.2f}",
         f"{1 / time_ratio:.2f}"]
    )  # fmt: skip
    # Per-round ratios (saga and plain of one round ran back to back, ABBA across rounds).
    pairs = list(zip(runs["saga"], runs["plain"], strict=True))
    mem_rounds = [s["per_workflow_bytes"] / max(1.0, p["per_workflow_bytes"]) for s, p in pairs]
    rate_rounds = [p["approve_all_s"] / s["approve_all_s"] for s, p in pairs]
    decide_rounds = [p["decide_all_s"] / s["decide_all_s"] for s, p in pairs]
    report.target(
        "parked memory per workflow, saga/plain",
        median(mem_rounds),
        1.5,
        "<=",
        note=f"per round {', '.join(f'{r:.2f}' for r in mem_rounds)}",
    )
    report.target(
        "approving parked sagas, saga/plain rate (decided and completed)",
        median(rate_rounds),
        0.8,
        ">=",
        note=f"per round {', '.join(f'{r:.2f}' for r in rate_rounds)}",
    )
    report.notes.append(
        "decisions answered per second (the update returned, its APPROVED entry journaled), "
        "saga/plain per round: " + ", ".join(f"{r:.2f}" for r in decide_rounds)
    )
    report.table(
        f"Parked — {n:,} workflows waiting on one worker process ({sizes.parked_rounds} "
        "round(s) per side); RSS from /proc/<pid>/status",
        ["side", "parked", "idle RSS", "parked RSS", "per workflow", "RSS after all done",
         "park s", "approve-all s", "approved/s"],
        rows,
    )  # fmt: skip
    for kind in runs:
        for run in runs[kind]:
            run.pop("ids")
    report.extra = {"runs": runs, "memory_ratio": mem_ratio, "approve_time_ratio": time_ratio}
    report.notes.append(
        "memory is bounded: a worker caches at most max_cached_workflows runs (1,000 by "
        "default) and replays evicted ones from history on their next task"
    )
    return report


def run(sizes: Sizes, *, postgres_url: str = DEFAULT_POSTGRES_URL) -> Report:
    return asyncio.run(_run(sizes, postgres_url))
