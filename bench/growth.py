"""Benchmark (issue 16): how cost grows. Append and verify rates with 10 k, 100 k and 1 M
entries already in the journal table, and saga throughput with 1, 2 and 4 worker
processes.

Journal growth (PostgreSQL; SQLite too): one journal per size, bulk-filled before the
rounds (bench.journal_fill: sealed 50-entry sagas, COPY then ANALYZE, which is the
fixture). Every round visits every size in ten short blocks, each block taking the sizes
in a rotating order (a burst of load from other sessions lands on every size alike), and
measures, on each:

- append: one writer appends to fresh sagas (20 entries each, through `store.append`,
  committed one by one), entries per second;
- verify: `verify_store` over a fixed sample of the filled sagas spread over the whole
  table (every k-th saga id), entries per second.

The ratio of each size to the smallest is taken per round (the sizes share the round's
noise) and its median reported; the target is 1 M within 0.8x of 10 k.

Worker processes: one dev server, a journal on PostgreSQL, and 1, 2 or 4 production
worker processes (`python -m sagacity.worker worker --tools bench.noop:toolbox`) on a
fresh task queue per round; N sagas of 3 no-op tools started at once (at most 50
waiting at a time) and awaited; sagas per second, worker start excluded. The CPU
seconds of the workers, the dev server and PostgreSQL show where the time went.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import (
    DEFAULT_POSTGRES_URL,
    RESULTS_DIR,
    ROOT,
    Report,
    Sizes,
    cpu_seconds,
    drop_schemas,
    find_pids,
    fmt_rate,
    fmt_ratios,
    median,
    pair_ratios,
    run_id,
)

PER_SAGA = 50
APPEND_SAGA = 20
TOOLS = 3
BLOCKS = 10
"""Blocks per round: each size appends and verifies a tenth of its share in turn, so a
burst of load from elsewhere lands on every size alike."""


@dataclass(frozen=True)
class Scale:
    levels: tuple[int, ...]
    sqlite_levels: tuple[int, ...]
    rounds: int
    appends: int
    verify_sagas: int
    sagas: int
    worker_rounds: int
    workers: tuple[int, ...] = (1, 2, 4)

    @classmethod
    def of(cls, sizes: Sizes) -> Scale:
        if sizes.mode == "full":
            return cls((10_000, 100_000, 1_000_000), (10_000, 100_000, 1_000_000), 5, 600, 200,
                       200, 2)  # fmt: skip
        if sizes.mode == "quick":
            return cls((10_000, 100_000), (10_000, 100_000), 3, 300, 100, 60, 1)
        return cls((500, 2_000), (500,), 2, 40, 10, 4, 1, (1, 2))


def _saga_ids(n_entries: int) -> list[str]:
    return [f"grow-{i:07d}" for i in range(max(1, n_entries // PER_SAGA))]


def _sample(ids: list[str], k: int) -> list[str]:
    """k saga ids spread evenly over the table (never the same k for every size)."""
    step = max(1, len(ids) // k)
    return ids[::step][:k]


class _Journal:
    """One filled journal: its store, the sample to verify, the sagas appended."""

    def __init__(self, url: str, ids: list[str], k: int) -> None:
        from sagacity.stores import open_store

        self.store = open_store(url)
        self.sample = _sample(ids, k)
        self.appended: list[str] = []

    def append(self, n: int) -> float:
        """Seconds to append `n` entries, one by one, to fresh sagas."""
        from sagacity.journal._entry import EntryDraft
        from sagacity.journal._phases import Phase

        drafts = []
        for i in range(n):
            if i % APPEND_SAGA == 0:
                saga = f"app-{uuid.uuid4().hex[:12]}"
                self.appended.append(saga)
            args = {"sku": "widget", "qty": i % 7 + 1, "order": f"ord-{i:06d}"}
            drafts.append(
                EntryDraft.new(saga, Phase.INTENT, step=i + 1, tool="reserve", input=args)
            )
        start = time.perf_counter()
        for draft in drafts:
            self.store.append(draft)
        return time.perf_counter() - start

    def verify(self, sagas: list[str]) -> tuple[float, int, bool]:
        """(seconds, entries, all intact and closed) for verifying `sagas`."""
        from sagacity.audit._export import verify_store

        start = time.perf_counter()
        entries, ok = 0, True
        for saga in sagas:
            got = verify_store(self.store, saga)
            entries += got.entries
            ok = ok and got.ok and got.closed
        return time.perf_counter() - start, entries, ok


def _levels(
    report: Report,
    scale: Scale,
    backend: str,
    levels: tuple[int, ...],
    journals: dict[int, _Journal],
) -> dict[str, Any]:
    rates: dict[str, dict[int, list[float]]] = {"append": {}, "verify": {}}
    verified: dict[int, set[tuple[int, bool]]] = {n: set() for n in levels}
    for n in levels:  # warm-up, not counted: connections, prepared statements, cache
        journals[n].append(20)
        journals[n].verify(journals[n].sample)
    for r in range(scale.rounds):
        spent = {n: [0.0, 0.0, 0] for n in levels}  # append s, verify s, entries verified
        intact = dict.fromkeys(levels, True)
        for b in range(BLOCKS):  # short blocks, each size in turn: they share the noise
            turn = (r + b) % len(levels)
            for n in levels[turn:] + levels[:turn]:
                spent[n][0] += journals[n].append(scale.appends // BLOCKS)
                seconds, entries, ok = journals[n].verify(journals[n].sample[b::BLOCKS])
                spent[n][1] += seconds
                spent[n][2] += entries
                intact[n] = intact[n] and ok
        for n in levels:
            append_s, verify_s, entries = spent[n]
            rates["append"].setdefault(n, []).append(scale.appends // BLOCKS * BLOCKS / append_s)
            rates["verify"].setdefault(n, []).append(entries / verify_s)
            verified[n].add((int(entries), intact[n]))
    base = levels[0]
    rows = []
    for n in levels:
        row = [f"{n:,}"]
        for what in ("append", "verify"):
            ratios = pair_ratios(rates[what][base], rates[what][n])
            row += [fmt_rate(median(rates[what][n])), fmt_ratios(ratios, "x")]
            if n == levels[-1] and n != base:
                report.target(
                    f"{what} at {n:,} entries vs {base:,} ({backend})", median(ratios), 0.8, ">="
                )
        rows.append(row)
    report.table(
        f"{backend}: one writer; verify of {scale.verify_sagas} filled sagas spread over the "
        f"table; {scale.rounds} rounds, sizes in rotating order",
        ["entries in the table", "append /s", f"vs {base:,}", "verify entries/s", f"vs {base:,}"],
        rows,
    )
    for n in levels:
        good = verified[n] == {(len(journals[n].sample) * PER_SAGA, True)}
        report.check(
            good,
            f"{backend} {n:,}: the verified sample ({len(journals[n].sample) * PER_SAGA:,} "
            "entries) is whole, closed and intact in every round",
            f"{backend} {n:,}: verify sample results {verified[n]}",
        )
        problems = _appended_problems(journals[n])
        report.check(
            not problems,
            f"{backend} {n:,}: {len(journals[n].appended)} appended sagas all verify (none lost)",
            f"{backend} {n:,}: appended sagas wrong: {problems[:3]}",
        )
    return {what: {str(n): v for n, v in by.items()} for what, by in rates.items()}


def _appended_problems(journal: _Journal) -> list[str]:
    from sagacity.audit._export import verify_store

    problems = []
    for saga in journal.appended:
        got = verify_store(journal.store, saga)
        if not got.ok or got.entries == 0:
            problems.append(got.describe())
    return problems


def _postgres(report: Report, scale: Scale, postgres_url: str, tag: str) -> None:
    from bench.journal_fill import copy_postgres, saga_rows
    from sagacity.stores import open_store

    schemas = {n: f"bench_{tag}_grow_{n}" for n in scale.levels}
    journals: dict[int, _Journal] = {}
    try:
        fill: dict[str, float] = {}
        for n, schema in schemas.items():
            url = f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={schema}"
            open_store(url).close()
            start = time.perf_counter()
            ids = _saga_ids(n)
            copy_postgres(postgres_url, schema, saga_rows(ids, PER_SAGA))
            fill[str(n)] = time.perf_counter() - start
            journals[n] = _Journal(url, ids, scale.verify_sagas)
        report.extra["postgres"] = _levels(report, scale, "PostgreSQL", scale.levels, journals)
        report.extra["postgres"]["fill_seconds"] = fill
    finally:
        for journal in journals.values():
            journal.store.close()
        drop_schemas(postgres_url, *schemas.values())


def _sqlite(report: Report, scale: Scale) -> None:
    from bench.journal_fill import fill_sqlite, saga_rows
    from sagacity.stores import open_store

    with tempfile.TemporaryDirectory(prefix="bench-growth-") as tmp:
        journals: dict[int, _Journal] = {}
        try:
            for n in scale.sqlite_levels:
                db = Path(tmp) / f"journal-{n}.db"
                url = f"sqlite:///{db}"
                open_store(url).close()
                ids = _saga_ids(n)
                fill_sqlite(db, saga_rows(ids, PER_SAGA))
                journals[n] = _Journal(url, ids, scale.verify_sagas)
            report.extra["sqlite"] = _levels(report, scale, "SQLite", scale.sqlite_levels, journals)
        finally:
            for journal in journals.values():
                journal.store.close()


# ---- worker processes -----------------------------------------------------------------------


def _start_workers(count: int, address: str, task_queue: str, store_url: str) -> list[Any]:
    from bench.parked import WorkerProcess

    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    env.update(
        TEMPORAL_ADDRESS=address,
        SAGACITY_TASK_QUEUE=task_queue,
        SAGACITY_JOURNAL_URL=store_url,
        SAGACITY_TOOLS="bench.noop:toolbox",
    )
    logs = RESULTS_DIR / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "sagacity.worker", "worker", "--tools", "bench.noop:toolbox"]
    workers = [
        WorkerProcess(cmd, env, "sagacity worker:", logs / f"{task_queue}-{i}.log")
        for i in range(count)
    ]
    try:
        for worker in workers:
            worker.wait_ready()
    except BaseException:
        for worker in workers:
            worker.stop()
        raise
    return workers


async def _saga_batch(client: Any, task_queue: str, prefix: str, count: int) -> list[Any]:
    from sagacity.worker.client._client import saga_result
    from sagacity.workflows._models import SagaInput, SagaResult, ToolCall

    gate = asyncio.Semaphore(50)

    async def one(i: int) -> Any:
        async with gate:
            plan = [ToolCall(tool="noop", args={"i": t}) for t in range(TOOLS)]
            handle = await client.start_workflow(
                "AgentSaga", SagaInput(plan=plan), id=f"{prefix}-{i}", task_queue=task_queue,
                result_type=SagaResult,
            )  # fmt: skip
            return await saga_result(handle)

    return await asyncio.gather(*(one(i) for i in range(count)), return_exceptions=True)


async def _workers(report: Report, scale: Scale, postgres_url: str, tag: str) -> None:
    from sagacity.audit._export import verify_store
    from sagacity.journal._phases import SagaStatus
    from sagacity.stores import open_store
    from sagacity.worker._devserver import start_dev_server

    schema = f"bench_{tag}_grow_workers"
    store_url = f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={schema}"
    open_store(store_url).close()
    env = await start_dev_server()
    address = env.client.service_client.config.target_host
    server = (find_pids("temporal", parent=os.getpid()) or [0])[0]
    rates: dict[int, list[float]] = {k: [] for k in scale.workers}
    cpu: dict[int, list[dict[str, float]]] = {k: [] for k in scale.workers}
    ids: list[str] = []
    failures: list[str] = []
    try:
        for r in range(scale.worker_rounds):
            order = list(scale.workers) if r % 2 == 0 else list(reversed(scale.workers))
            for k in order:
                tq = f"{tag}-w{k}-r{r}"
                workers = await asyncio.to_thread(_start_workers, k, address, tq, store_url)
                try:
                    await _saga_batch(env.client, tq, f"{tq}-warm", 2)  # warm-up, not counted
                    pids = [w.proc.pid for w in workers]
                    before = _cpu(pids, server)
                    start = time.perf_counter()
                    results = await _saga_batch(env.client, tq, tq, scale.sagas)
                    rates[k].append(scale.sagas / (time.perf_counter() - start))
                    after = _cpu(pids, server)
                    cpu[k].append({name: after[name] - before[name] for name in after})
                finally:
                    await asyncio.to_thread(lambda ws=workers: [w.stop() for w in ws])
                for i, result in enumerate(results):
                    if (
                        isinstance(result, BaseException)
                        or result.status is not SagaStatus.COMPLETED
                    ):
                        failures.append(f"{tq}-{i}: {result!r}"[:200])
                ids += [f"{tq}-{i}" for i in range(scale.sagas)]
    finally:
        await env.shutdown()
    store = open_store(store_url)
    try:
        wrong = []
        for saga in ids:
            got = verify_store(store, saga)
            if not (got.ok and got.closed and got.entries == 2 + 2 * TOOLS):
                wrong.append(got.describe())
    finally:
        store.close()
        drop_schemas(postgres_url, schema)
    report.check(
        not failures and not wrong,
        f"{len(ids)} sagas completed; every journal verifies, closed, {2 + 2 * TOOLS} entries",
        f"{len(failures)} sagas failed ({failures[:2]}), {len(wrong)} journals wrong ({wrong[:2]})",
    )
    rows = []
    for k in scale.workers:
        ratios = pair_ratios(rates[1], rates[k])
        used = {name: median([c[name] for c in cpu[k]]) for name in cpu[k][0]}
        total = sum(used.values())
        rows.append(
            [str(k), fmt_rate(median(rates[k])), fmt_ratios(ratios, "x")]
            + [f"{used[name]:.1f} s ({used[name] / total:.0%})" for name in used]
        )
    report.table(
        f"Sagas of {TOOLS} no-op tools per second, {scale.sagas} per round, "
        f"{scale.worker_rounds} round(s), order reversed every other round",
        ["worker processes", "sagas/s", "vs 1 worker", "CPU: workers", "dev server", "PostgreSQL"],
        rows,
    )
    report.extra["workers"] = {
        "rates": {str(k): v for k, v in rates.items()},
        "cpu": {str(k): v for k, v in cpu.items()},
    }


def _cpu(workers: list[int], server: int) -> dict[str, float]:
    return {
        "workers": sum(cpu_seconds(pid) for pid in workers),
        "dev server": cpu_seconds(server) if server else 0.0,
        "PostgreSQL": sum(cpu_seconds(p) for p in find_pids("postgres")),
    }


async def _run(sizes: Sizes, postgres_url: str, parts: tuple[str, ...]) -> Report:
    report = Report("growth", "How cost grows: journal size and worker processes", sizes)
    scale = Scale.of(sizes)
    tag = f"b{run_id()}"
    steps: dict[str, Callable[[], Any]] = {
        "postgres": lambda: asyncio.to_thread(_postgres, report, scale, postgres_url, tag),
        "sqlite": lambda: asyncio.to_thread(_sqlite, report, scale),
        "workers": lambda: _workers(report, scale, postgres_url, tag),
    }
    for part in parts:
        started = time.perf_counter()
        await steps[part]()
        report.extra.setdefault("seconds", {})[part] = round(time.perf_counter() - started, 1)
    report.extra["load_average"] = os.getloadavg()
    report.notes.append(
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end (shared "
        "machine: other sessions' tests ran meanwhile)"
    )
    return report


def run(
    sizes: Sizes,
    *,
    postgres_url: str = DEFAULT_POSTGRES_URL,
    parts: tuple[str, ...] = ("postgres", "sqlite", "workers"),
) -> Report:
    return asyncio.run(_run(sizes, postgres_url, parts))
