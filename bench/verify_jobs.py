"""Benchmark (issue 16): `sagacity verify --all --jobs 2` beside `--jobs 1`.

A journal of sealed, closed sagas (bench.journal_fill: COPY into PostgreSQL, one
transaction into SQLite) is verified by the real command, `python -m sagacity.worker
verify --all --jobs N`, each run a fresh process, in alternating rounds. The ratio is the
one-process time over the two-process time (above 1: parallel is faster); it includes
everything a user waits for (interpreter start, the fork server importing sagacity, the
workers' connections). `--jobs 2` is this process and one worker process, which starts
in the background while the main process checks the first sagas itself. A second
measurement runs the walk in this process (`evidence_walk.check_all` against
`verify_parallel.check_all_parallel`, fork server already running): the verification
work without the command's own start.

On a shared, loaded machine wall time follows the scheduler's share more than the work,
so the in-process walk also reports the CPU seconds of its busiest process (one process:
all of it; two: the larger of this process and the worker): the speedup the walk would
show with a CPU per process, PostgreSQL's own work not counted.

Integrity: every run exits 0 with the same output, naming every saga verified and
closed. Peak RSS of the command's main process (GNU time) shows it holding a window of
reports, not the journal.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import (
    DEFAULT_POSTGRES_URL,
    ROOT,
    Report,
    Sizes,
    drop_schemas,
    fmt_bytes,
    fmt_rate,
    median,
    pair_ratios,
    run_id,
    spread,
)

PER_SAGA = 50


@dataclass(frozen=True)
class Scale:
    entries: int
    rounds: int
    sqlite: bool = True

    @classmethod
    def of(cls, sizes: Sizes) -> Scale:
        if sizes.mode == "full":
            return cls(entries=200_000, rounds=4)
        if sizes.mode == "quick":
            return cls(entries=100_000, rounds=2)
        return cls(entries=2_000, rounds=1, sqlite=False)


@dataclass
class _Run:
    seconds: float
    code: int
    stdout: str
    peak_rss: int


def _command(url: str, jobs: int, home: Path) -> _Run:
    """One `verify --all` run under GNU time, which reports the command's peak RSS (its
    main process: the one that must not hold the journal)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAGACITY_")}
    env |= {"SAGACITY_JOURNAL_URL": url, "SAGACITY_HOME": str(home), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "sagacity.worker", "verify", "--all", "--jobs", str(jobs)]
    with tempfile.TemporaryDirectory() as tmp:
        rss = Path(tmp) / "rss"
        start = time.perf_counter()
        done = subprocess.run(
            ["/usr/bin/time", "-f", "%M", "-o", str(rss), *cmd],
            env=env, cwd=ROOT, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        seconds = time.perf_counter() - start
        peak = int(rss.read_text().split()[-1]) * 1024
    return _Run(seconds, done.returncode, done.stdout, peak)


@dataclass
class _Walk:
    seconds: float
    verified: int
    cpu: float
    """CPU seconds of the longest-working process (one process: all of it)."""


def _in_process(url: str, jobs: int) -> _Walk:
    """Walk every saga here (one process, or this one and `jobs - 1` workers)."""
    from sagacity.audit._decisions import DecisionAudit
    from sagacity.audit._evidence_walk import audit_log, check_all
    from sagacity.stores import open_store
    from sagacity.worker.cli._verify_parallel import check_all_parallel

    with open_store(url) as store:
        log = store.checkpoint_log()
        sagas = sum(1 for _ in store.sagas())
        start, cpu = time.perf_counter(), time.process_time()
        audit = audit_log(log, None)
        workers: dict[int, float] = {}
        if jobs == 1:
            walk = check_all(store, log, None, DecisionAudit().observe, audit=audit)
        else:
            walk = check_all_parallel(
                store, url, log, None, DecisionAudit(), None, jobs=jobs, sagas=sagas,
                audit=audit, workers=workers,
            )  # fmt: skip
        ok = sum(1 for s in walk if s.report is not None and s.report.ok and s.report.closed)
        seconds, mine = time.perf_counter() - start, time.process_time() - cpu
        others = [used for pid, used in workers.items() if pid != os.getpid()]
        return _Walk(seconds, ok, max([mine, *others]))


def _backend(report: Report, scale: Scale, name: str, url: str, home: Path, sagas: int) -> None:
    runs: dict[int, list[_Run]] = {1: [], 2: []}
    for r in range(scale.rounds):
        for jobs in (1, 2) if r % 2 == 0 else (2, 1):
            runs[jobs].append(_command(url, jobs, home))
    one = [run.seconds for run in runs[1]]
    two = [run.seconds for run in runs[2]]
    speedups = pair_ratios(two, one)  # one-process time / two-process time
    inner: dict[int, list[float]] = {1: [], 2: []}
    critical: dict[int, list[float]] = {1: [], 2: []}
    verified: list[int] = []
    _in_process(url, 2)  # warm-up: the fork server is started once per process
    for r in range(scale.rounds):
        for jobs in (1, 2) if r % 2 == 0 else (2, 1):
            walk = _in_process(url, jobs)
            inner[jobs].append(walk.seconds)
            critical[jobs].append(walk.cpu)
            verified.append(walk.verified)
    inner_speedups = pair_ratios(inner[2], inner[1])
    cpu_speedups = pair_ratios(critical[2], critical[1])
    entries = scale.entries
    report.table(
        f"{name}: verify --all of {sagas:,} sagas ({entries:,} entries), "
        f"{scale.rounds} alternating rounds",
        ["measured", "1 process", "2 processes", "speedup (1 / 2)", "spread"],
        [
            [
                "the command, end to end (s)",
                f"{median(one):.2f}",
                f"{median(two):.2f}",
                f"{median(speedups):.2f}x",
                spread(speedups),
            ],
            [
                "entries/s, end to end",
                fmt_rate(entries / median(one)),
                fmt_rate(entries / median(two)),
                "",
                "",
            ],
            [
                "the walk alone, in process (s)",
                f"{median(inner[1]):.2f}",
                f"{median(inner[2]):.2f}",
                f"{median(inner_speedups):.2f}x",
                spread(inner_speedups),
            ],
            [
                "CPU of the busiest process, in process (s)",
                f"{median(critical[1]):.2f}",
                f"{median(critical[2]):.2f}",
                f"{median(cpu_speedups):.2f}x",
                spread(cpu_speedups),
            ],
            [
                "peak RSS of the command's main process",
                fmt_bytes(max(r.peak_rss for r in runs[1])),
                fmt_bytes(max(r.peak_rss for r in runs[2])),
                "",
                "",
            ],
        ],
    )
    report.target(f"verify --all 2 processes vs 1 ({name})", median(speedups), 1.7, ">=")
    outputs = {run.stdout for run in runs[1] + runs[2]}
    codes = {run.code for run in runs[1] + runs[2]}
    summary = f"verified {sagas} sagas, {entries} entries: {sagas} closed, 0 open"
    report.check(
        codes == {0} and len(outputs) == 1 and summary in next(iter(outputs)),
        f"{name}: every run exits 0 with the same output ({summary}); the walks in "
        f"process verified {sagas:,} closed chains every time",
        f"{name}: runs differ or fail: exit codes {codes}, {len(outputs)} distinct outputs",
    )
    report.check(
        set(verified) == {sagas},
        f"{name}: in-process walks: {sagas:,} closed chains verified in every round",
        f"{name}: in-process walks verified {sorted(set(verified))} of {sagas} chains",
    )
    report.extra[name] = {
        "one": one,
        "two": two,
        "speedups": speedups,
        "in_process": inner,
        "in_process_speedups": inner_speedups,
        "busiest_cpu": critical,
        "busiest_cpu_speedups": cpu_speedups,
        "load_average": os.getloadavg(),
    }


def run(sizes: Sizes, *, postgres_url: str = DEFAULT_POSTGRES_URL) -> Report:
    from bench.journal_fill import copy_postgres, fill_sqlite, saga_rows
    from sagacity.stores import open_store

    report = Report("verify_jobs", "verify --all in 2 processes against 1", sizes)
    scale = Scale.of(sizes)
    ids = [f"jobs-{i:06d}" for i in range(scale.entries // PER_SAGA)]
    schema = f"bench_b{run_id()}_jobs"
    store_url = f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={schema}"
    with tempfile.TemporaryDirectory(prefix="bench-verify-jobs-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        db = Path(tmp) / "journal.db"
        try:
            open_store(store_url).close()
            copy_postgres(postgres_url, schema, saga_rows(ids, PER_SAGA))
            _backend(report, scale, "PostgreSQL", store_url, home, len(ids))
        finally:
            drop_schemas(postgres_url, schema)
        if scale.sqlite:
            url = f"sqlite:///{db}"
            open_store(url).close()
            fill_sqlite(db, saga_rows(ids, PER_SAGA))
            _backend(report, scale, "SQLite", url, home, len(ids))
    report.notes.append(
        f"{os.cpu_count()} CPUs; load average at the end {os.getloadavg()[0]:.1f}: the two "
        "worker processes share the CPUs with the main process, PostgreSQL's backends and "
        "everything else running"
    )
    return report
