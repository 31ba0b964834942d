"""`python -m bench.plots [RESULTS]`: draw the growth benchmark (bench/results/growth.json)
as the PNGs docs/benchmarks.md shows, in docs/benchmarks/ (matplotlib, the bench extra).

- growth-journal.png: append and verify rates against entries already in the table
  (log scale), per backend; each point the median of the rounds, bars their min-max.
- growth-workers.png: sagas per second with 1, 2 and 4 worker processes, and where the
  CPU went.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from bench.common import RESULTS_DIR

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks"


def _spread(values: list[float]) -> tuple[float, float, float]:
    mid = statistics.median(values)
    return mid, mid - min(values), max(values) - mid


def journal_plot(data: dict[str, Any], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, what, unit in zip(
        axes, ("append", "verify"), ("appends/s (one writer)", "entries/s"), strict=True
    ):
        for backend, label in (("postgres", "PostgreSQL"), ("sqlite", "SQLite")):
            if backend not in data:
                continue
            by_size = data[backend][what]
            sizes = sorted(by_size, key=int)
            mids, lows, highs = zip(*(_spread(by_size[s]) for s in sizes), strict=True)
            ax.errorbar(
                [int(s) for s in sizes], mids, yerr=[lows, highs], marker="o", capsize=4,
                label=label,
            )  # fmt: skip
        ax.set_xscale("log")
        ax.set_ylim(bottom=0)
        ax.set_xlabel("entries already in the journal table")
        ax.set_ylabel(unit)
        ax.set_title(f"{what} rate as the journal grows")
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def workers_plot(data: dict[str, Any], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = data["rates"]
    counts = sorted(rates, key=int)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    mids, lows, highs = zip(*(_spread(rates[k]) for k in counts), strict=True)
    left.bar(counts, mids, yerr=[lows, highs], capsize=4, color="tab:blue")
    left.set_xlabel("worker processes")
    left.set_ylabel("sagas/s (3 no-op tools each)")
    left.set_title("saga throughput, one dev server, 2 CPUs")
    left.grid(True, axis="y", alpha=0.3)
    parts = list(data["cpu"][counts[0]][0])
    bottom = [0.0] * len(counts)
    for part in parts:
        used = [statistics.median(c[part] for c in data["cpu"][k]) for k in counts]
        right.bar(counts, used, bottom=bottom, label=part)
        bottom = [b + u for b, u in zip(bottom, used, strict=True)]
    right.set_xlabel("worker processes")
    right.set_ylabel("CPU seconds per round")
    right.set_title("where the CPU went")
    right.legend()
    right.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else RESULTS_DIR / "growth.json"
    extra = json.loads(path.read_text())["extra"]
    drawn = []
    if "postgres" in extra or "sqlite" in extra:
        drawn.append(journal_plot(extra, DOCS / "growth-journal.png"))
    if "workers" in extra:
        drawn.append(workers_plot(extra["workers"], DOCS / "growth-workers.png"))
    for out in drawn:
        print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
