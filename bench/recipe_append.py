"""Benchmark 2, section 5: appending with recipe v1 against recipe v2.

Each store (memory, SQLite, PostgreSQL) is opened once for recipe 1 and once for recipe
2 (docs/hash-chain.md section 7), and one writer appends the same tool-call entries
through each, all six sides in rotated rounds. Reported by wall time (SQLite and
PostgreSQL appends wait for their commit to reach the disk, which the shared machine's
other sessions make noisy) and by this process's CPU time per append, which is what the
recipe changes: v2 seals the entry's bytes once and stores them, v1 stores the fields.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import Report, Sizes, fmt_rate, median, pair_ratios, run_id


def _rotate(rounds: int, sides: dict[str, Callable[[], float]]) -> dict[str, list[float]]:
    from bench.verify import _rotate as rotate

    return rotate(rounds, sides)


def _ratio(ratios: list[float]) -> str:
    from bench.verify import _ratio as ratio

    return ratio(ratios)


def _append_drafts(saga_id: str, n: int) -> list[Any]:
    from sagacity.entry import EntryDraft
    from sagacity.phases import Phase

    drafts = [EntryDraft.new(saga_id, Phase.SAGA_OPENED, input={"plan": ["reserve"] * 3})]
    for seq in range(2, n + 1):
        args = {"sku": "widget", "qty": seq % 7 + 1, "order": f"ord-{seq:06d}"}
        phase = Phase.INTENT if seq % 2 == 0 else Phase.EXECUTED
        result = {"reservation": f"res-{seq:06d}"} if phase is Phase.EXECUTED else None
        drafts.append(
            EntryDraft.new(
                saga_id, phase, step=seq // 2, tool="reserve_inventory", input=args, result=result
            )
        )
    return drafts


def measure(report: Report, sizes: Sizes, postgres_url: str, workdir: Path) -> None:
    """One writer appending tool-call entries (sagas of 20) through each store opened
    for recipe 1 and for recipe 2, both in rotated rounds: what sealing and storing the
    v2 bytes costs an append, next to the v1 recipe the release before wrote."""
    import psycopg

    from sagacity.stores import open_store

    per_side = max(200, sizes.verify_entries // 50)
    sep = "&" if "?" in postgres_url else "?"
    tag = f"b{run_id()}_append"
    urls = {
        "memory": "memory://",
        "SQLite": f"sqlite:///{workdir / 'append-{recipe}.db'}",
        "PostgreSQL": f"{postgres_url}{sep}schema={tag}_v{{recipe}}",
    }
    stores = {
        (backend, recipe): open_store(url.replace("{recipe}", str(recipe)), recipe=recipe)
        for backend, url in urls.items()
        for recipe in (1, 2)
    }
    counter = iter(range(10**9))

    def appending(store: Any) -> Callable[[], None]:
        def run() -> None:
            done = 0
            while done < per_side:
                saga = f"append-{next(counter):08d}"
                for draft in _append_drafts(saga, 20):
                    store.append(draft)
                done += 20

        return run

    cpu: dict[str, list[float]] = {}

    def both(name: str, fn: Callable[[], None]) -> Callable[[], float]:
        def run() -> float:
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            cpu.setdefault(name, []).append(time.process_time() - start_cpu)
            return time.perf_counter() - start

        return run

    try:
        sides = {f"{b} v{r}": appending(store) for (b, r), store in stores.items()}
        times = _rotate(sizes.verify_rounds, {k: both(k, f) for k, f in sides.items()})
        for (backend, recipe), store in stores.items():
            sagas = list(store.sagas())
            ok = all(e.recipe == recipe for s in sagas[:3] for e in store.entries(s))
            report.check(ok, f"append {backend} v{recipe}: entries sealed in v{recipe}",
                         f"append {backend} v{recipe}: an entry in another recipe")  # fmt: skip
    finally:
        for store in stores.values():
            store.close()
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            for recipe in (1, 2):
                admin.execute(f'DROP SCHEMA IF EXISTS "{tag}_v{recipe}" CASCADE')
    rates = {k: [per_side / t for t in v] for k, v in times.items()}
    rows = []
    for backend in urls:
        ratios = pair_ratios(rates[f"{backend} v1"], rates[f"{backend} v2"])
        cpu_ratios = pair_ratios(cpu[f"{backend} v2"], cpu[f"{backend} v1"])
        report.extra.setdefault("append", {})[backend] = {
            "rates": rates,
            "ratios": ratios,
            "cpu_ratios": cpu_ratios,
        }
        us = {r: median(cpu[f"{backend} v{r}"]) / per_side * 1e6 for r in (1, 2)}
        rows.append(
            [backend, fmt_rate(median(rates[f"{backend} v1"])),
             fmt_rate(median(rates[f"{backend} v2"])), _ratio(ratios),
             f"{us[1]:.0f} / {us[2]:.0f}", _ratio(cpu_ratios)]
        )  # fmt: skip
    report.table(
        f"Append, one writer, recipe v1 against v2 — {per_side:,} entries per side per "
        f"round, {sizes.verify_rounds} rotated rounds; ratio = v2 entries/s over v1's "
        "(wall), and v1's client CPU per append over v2's (CPU: above 1 means v2 costs less)",
        ["store", "v1 entries/s", "v2 entries/s", "v2 / v1 wall (spread)",
         "client CPU µs v1 / v2", "CPU ratio (spread)"],
        rows,
    )  # fmt: skip
