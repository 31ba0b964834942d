"""`python -m bench [--quick] [--only NAME ...]` — run the benchmarks, print their tables,
write JSON results to bench/results/, and end with a summary of the targets.

The exit status reflects integrity only (entries lost, chains that do not verify, errors
while approving): 1 if any benchmark found such a failure, 0 otherwise. Missed timing
targets are reported, never turned into a failure.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rich.table import Table

from bench import BENCHMARKS
from bench.common import DEFAULT_POSTGRES_URL, RESULTS_DIR, Report, Sizes, console, machine

_MODULES = {"saga": "saga_overhead"}
"""Benchmarks whose module is not named like the benchmark."""


def _runner(name: str) -> Callable[..., Report]:
    """The benchmark's `run`, its module imported only when that benchmark runs."""
    run: Callable[..., Report] = importlib.import_module(f"bench.{_MODULES.get(name, name)}").run
    return run


def _postgres_problem(url: str) -> str | None:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:  # any failure to connect: say why and stop
        return f"{type(exc).__name__}: {exc}".strip()
    return None


def summary(reports: list[Report]) -> Table:
    table = Table(title="Targets (ratios measured side by side in this run)", title_justify="left")
    for column in ("benchmark", "target", "measured", "bound", "verdict"):
        table.add_column(column)
    for report in reports:
        for target in report.targets:
            verdict = "[green]met[/]" if target.met else "[red]missed[/]"
            table.add_row(
                report.name,
                target.name,
                target.measured,
                target.wanted,
                verdict,
            )
        integrity = "[green]ok[/]" if report.ok else "[bold red]FAILED[/]"
        table.add_row(report.name, "integrity (nothing lost, chains verify)", "", "", integrity)
    return table


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="CI-sized run (about 3 minutes)")
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, help="run only these")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL, help="%(default)s")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="JSON output folder")
    args = parser.parse_args(argv)

    problem = _postgres_problem(args.postgres_url)
    if problem is not None:
        console.print(
            f"[bold red]error:[/] PostgreSQL at {args.postgres_url} is unreachable ({problem}); "
            "start it or pass --postgres-url (SAGACITY_BENCH_POSTGRES_URL)"
        )
        return 2
    sizes = Sizes.quick() if args.quick else Sizes.full()
    info = machine()
    console.rule(f"[bold]sagacity benchmarks — {sizes.mode} mode[/]")
    console.print(
        f"{info['nproc']} CPUs ({info['cpu']}), {info['memory_gib']} GiB, Python {info['python']}, "
        f"PostgreSQL {info['postgres']}, SQLite {info['sqlite']}, {info['temporal_cli']}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    reports: list[Report] = []
    started = time.perf_counter()
    for name in args.only or BENCHMARKS:
        t0 = time.perf_counter()
        report = _runner(name)(sizes, postgres_url=args.postgres_url)
        report.extra["load_average_after"] = os.getloadavg()
        report.print()
        path = report.write(args.results)
        console.print(f"  [dim]{name}: {time.perf_counter() - t0:.0f}s, results in {path}[/]")
        reports.append(report)
    console.print(summary(reports))
    console.print(f"total {time.perf_counter() - started:.0f}s")
    failed = [r.name for r in reports if not r.ok]
    if failed:
        console.print(f"[bold red]integrity failures in: {', '.join(failed)}[/]")
    return 1 if failed else 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: the Temporal SDK can crash there after finishing
    # (sdk-python issue 300), and the exit status must be the benchmarks', not the crash's.
    os._exit(code)
