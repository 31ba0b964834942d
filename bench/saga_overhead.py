"""Benchmark 3: a saga of N no-op tools against a plain workflow of N no-op activities.

One dev server (worker.devserver.start_dev_server) and, in this process, workers with the
same settings: the saga worker built by `worker.app.new_worker` (journal on Postgres, the
no-op toolbox of bench.noop), a plain worker (bench.plain_worker) for `PlainWorkflow`,
and a diagnostic saga worker whose journal is in memory. All poll throughout; only one
kind of workflow runs at a time.

- Wall time: one workflow at a time, start to result, alternating saga and plain (ABBA);
  median wall-time ratio saga/plain.
- Throughput: 50 workflows started at once, first start to last result; sagas/s against
  plain workflows/s, rounds in rotating order. The in-memory-journal saga runs in the
  same rounds and splits the saga's extra cost into journal (Postgres) and workflow.
  CPU per workflow of this process, the dev server and PostgreSQL says where it goes.

Afterwards every saga must have completed and its journal chain must verify, closed,
with 2 + 2N entries (opened, INTENT and EXECUTED per tool, closed): nothing lost.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

from bench.common import (
    DEFAULT_POSTGRES_URL,
    CpuMeter,
    Report,
    Sizes,
    drop_schemas,
    fmt_ms,
    fmt_rate,
    fmt_ratios,
    median,
    pair_ratios,
    run_id,
    spread,
)

MEMORY = "saga-memory"
"""Diagnostic side of the throughput rounds: the same saga with its journal in memory, which
separates the journal's cost (Postgres) from the workflow's own (Temporal, pydantic)."""


async def _one(client: Any, kind: str, wf_id: str, tq: str, steps: int) -> tuple[float, Any]:
    from sagacity.workflows._models import SagaInput, SagaResult, ToolCall

    start = time.perf_counter()
    if kind != "plain":
        plan = [ToolCall(tool="noop", args={"i": i}) for i in range(steps)]
        handle = await client.start_workflow(
            "AgentSaga", SagaInput(plan=plan), id=wf_id, task_queue=tq, result_type=SagaResult
        )
    else:
        handle = await client.start_workflow(
            "BenchPlain", steps, id=wf_id, task_queue=tq, result_type=int
        )
    result = await handle.result()
    return time.perf_counter() - start, result


async def _batch(
    client: Any, kind: str, prefix: str, tq: str, steps: int, count: int
) -> tuple[float, list[Any]]:
    start = time.perf_counter()
    done = await asyncio.gather(
        *(_one(client, kind, f"{prefix}-{i}", tq, steps) for i in range(count))
    )
    return time.perf_counter() - start, [r for _t, r in done]


async def _measure(
    report: Report, sizes: Sizes, client: Any, queues: dict[str, str], tag: str
) -> dict[str, list[tuple[str, int]]]:
    """Returns (saga id, tools) of every recorded saga by journal, for the integrity check."""
    sagas: dict[str, list[tuple[str, int]]] = {"saga": [], MEMORY: []}
    results: list[Any] = []
    rows = []
    # warm-up: sandbox, caches, prepared statements, pools
    for i in range(3):
        for kind in ("saga", MEMORY, "plain"):
            await _one(client, kind, f"{tag}-warm-{kind}-{i}", queues[kind], 1)

    for steps in sizes.saga_tools:
        walls: dict[str, list[float]] = {"saga": [], "plain": []}
        for r in range(sizes.saga_runs):
            order = ["plain", "saga"] if r % 2 == 0 else ["saga", "plain"]
            for kind in order:
                wf_id = f"{tag}-{kind}-n{steps}-r{r}"
                tq = queues[kind]
                wall, result = await _one(client, kind, wf_id, tq, steps)
                walls[kind].append(wall)
                if kind == "saga":
                    sagas["saga"].append((wf_id, steps))
                    results.append(result)
        ratios = pair_ratios(walls["plain"], walls["saga"])
        ratio = median(walls["saga"]) / median(walls["plain"])
        rows.append(
            [
                f"{steps}",
                fmt_ms(median(walls["plain"]) * 1e3),
                fmt_ms(median(walls["saga"]) * 1e3),
                fmt_ms((median(walls["saga"]) - median(walls["plain"])) * 1e3),
                f"{ratio:.2f}", spread(ratios),
            ]
        )  # fmt: skip
        report.extra.setdefault("wall", {})[str(steps)] = {
            "walls_s": walls,
            "ratio": ratio,
            "pair_ratios": ratios,
        }
        if steps == sizes.concurrent_tools:
            report.target(f"saga wall time, {steps} tools", ratio, 1.15, "<=")
    report.table(
        f"Saga wall time — one at a time, {sizes.saga_runs} runs per side, alternating; "
        "ratio = median saga / median plain",
        ["tools", "plain ms (median)", "saga ms (median)", "extra ms", "ratio", "per-pair spread"],
        rows,
    )

    n = sizes.concurrent_sagas
    steps = sizes.concurrent_tools
    sides = ["plain", "saga", MEMORY]
    rates: dict[str, list[float]] = {kind: [] for kind in sides}
    cpu: dict[str, Counter[str]] = {kind: Counter() for kind in sides}
    meter = CpuMeter()
    for r in range(sizes.concurrent_rounds):
        for kind in sides[r % 3 :] + sides[: r % 3]:
            prefix = f"{tag}-{kind}-c{n}-r{r}"
            meter.start()
            elapsed, batch = await _batch(client, kind, prefix, queues[kind], steps, n)
            cpu[kind].update(meter.stop())
            rates[kind].append(n / elapsed)
            if kind != "plain":
                sagas[kind].extend((f"{prefix}-{i}", steps) for i in range(n))
                results.extend(batch)
    tratios = {kind: pair_ratios(rates["plain"], rates[kind]) for kind in sides}
    labels = {
        "plain": "plain workflow",
        "saga": "saga (journal on Postgres)",
        MEMORY: "diagnostic: saga, journal in memory",
    }
    report.table(
        f"Throughput — {n} concurrent workflows of {steps} no-op tools/activities, "
        f"{sizes.concurrent_rounds} rounds per side, rotating order; ratio = workflows/s over "
        "plain/s (median of per-round ratios, min-max)",
        ["side", "workflows/s (median)", "per round", "ratio (spread)"],
        [
            [
                labels[kind],
                fmt_rate(median(rates[kind])),
                _rounds(rates[kind]),
                "1.00" if kind == "plain" else fmt_ratios(tratios[kind]),
            ]
            for kind in sides
        ],
    )
    per = {
        kind: {k: v / (n * sizes.concurrent_rounds) * 1e3 for k, v in cpu[kind].items()}
        for kind in sides
    }
    cpu_rows = [
        [where, *(f"{per[kind][where]:.1f}" for kind in sides),
         f"{per['saga'][where] - per['plain'][where]:+.1f}"]
        for where in per["plain"]
    ]  # fmt: skip
    totals = {kind: sum(per[kind].values()) for kind in sides}
    cpu_rows.append(
        ["total", *(f"{totals[kind]:.1f}" for kind in sides),
         f"{totals['saga'] - totals['plain']:+.1f}"]
    )  # fmt: skip
    report.table(
        "CPU per workflow in the throughput rounds (ms, from /proc/<pid>/stat). The CPUs are "
        "saturated, so the throughput ratio follows the inverse ratio of these totals",
        ["where", "plain", "saga (Postgres)", "saga (memory)", "saga - plain"],
        cpu_rows,
    )
    report.extra["throughput"] = {
        "rates": rates,
        "ratios": tratios,
        "concurrent": n,
        "tools": steps,
        "cpu_ms_per_workflow": per,
    }
    report.target(f"saga throughput, {n} concurrent", median(tratios["saga"]), 0.85, ">=")

    from sagacity.journal._phases import SagaStatus

    bad = [r.saga_id for r in results if r.status is not SagaStatus.COMPLETED]
    report.check(
        not bad,
        f"{len(results)} sagas completed",
        f"{len(bad)} sagas did not complete: {bad[:3]}",
    )
    return sagas


def _rounds(values: list[float]) -> str:
    return ", ".join(f"{x:.1f}" for x in values)


def _check_journal(report: Report, store: Any, sagas: list[tuple[str, int]], kind: str) -> None:
    from sagacity.audit._export import verify_store

    problems = []
    entries = 0
    for saga_id, steps in sagas:
        verified = verify_store(store, saga_id)
        entries += verified.entries
        if not (verified.ok and verified.closed and verified.entries == 2 + 2 * steps):
            problems.append(f"{verified.describe()} (expected {2 + 2 * steps} entries, closed)")
    report.check(
        not problems,
        f"{len(sagas)} saga journals ({'Postgres' if kind == 'saga' else 'memory'}): "
        f"{entries:,} entries, none lost, every chain verifies and is closed",
        f"{len(problems)} saga journals wrong: {problems[:3]}",
    )


async def _run(sizes: Sizes, postgres_url: str) -> Report:
    from bench import noop
    from bench.plain_worker import plain_worker
    from sagacity.stores import MemoryJournalStore, open_store
    from sagacity.worker._app import new_worker
    from sagacity.worker._devserver import start_dev_server

    report = Report("saga_overhead", "Saga overhead: saga vs plain Temporal workflow", sizes)
    tag = f"b{run_id()}"
    schema = f"bench_{tag}_saga"
    store_url = f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={schema}"
    env = await start_dev_server()
    store = open_store(store_url)
    try:
        queues = {kind: f"{tag}-{kind}" for kind in ("saga", MEMORY, "plain")}
        memory = MemoryJournalStore()
        stores = {"saga": store, MEMORY: memory}
        async with (
            new_worker(env.client, store=store, toolbox=noop.toolbox(), task_queue=queues["saga"]),
            new_worker(env.client, store=memory, toolbox=noop.toolbox(), task_queue=queues[MEMORY]),
            plain_worker(env.client, queues["plain"]),
        ):
            sagas = await _measure(report, sizes, env.client, queues, tag)
        for kind, ids in sagas.items():
            await asyncio.to_thread(_check_journal, report, stores[kind], ids, kind)
    finally:
        store.close()
        await env.shutdown()
        drop_schemas(postgres_url, schema)
    return report


def run(sizes: Sizes, *, postgres_url: str = DEFAULT_POSTGRES_URL) -> Report:
    return asyncio.run(_run(sizes, postgres_url))
