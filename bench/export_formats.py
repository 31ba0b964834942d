"""Export format 1 against format 2, side by side: `export_jsonl` from PostgreSQL to a file
and `verify-file`'s reading of that file (verify_jsonl over the file's bytes, with the
decision audit and the evidence checks it runs), for each format in alternating rounds.

Format 2 writes payloads as JSON values, so the export parses each stored text and checks
it is its own RFC 8785 form, and the verifier writes each value's RFC 8785 form again and
holds the line to its exact exported bytes; format 1 copies the text. A third, diagnostic
side runs format 2 with the canonical-JSON fast path off (every value through the
pure-Python rfc8785 package), to show what the fast path buys. Ratios are given by wall
time and by this process's CPU time: on a shared machine the second is the steadier.

Called by bench.verify on the journal it loaded for its streamed section (sagas of 100
entries: SAGA_OPENED, INTENT/EXECUTED pairs, SAGA_CLOSED).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.common import Report, Sizes, fmt_bytes, fmt_rate, median, pair_ratios, spread


@contextlib.contextmanager
def _without_fast_path() -> Iterator[None]:
    """Every canonical form through rfc8785, as before the fast path existed."""
    import sagacity.canonical as canonical
    import sagacity.export_lines as export_lines

    saved = canonical.fast_text, export_lines.fast_text
    canonical.fast_text = export_lines.fast_text = lambda value: None
    try:
        yield
    finally:
        canonical.fast_text, export_lines.fast_text = saved


def _one(store: Any, path: Path, side: str) -> dict[str, Any]:
    """Export in the side's format, then read the file back as verify-file does; wall
    and CPU seconds of each step (this process's CPU: the difference between the formats
    is all here, and it is what a shared machine's other load does not inflate)."""
    from sagacity.audit import export_jsonl, export_lines, verify_jsonl
    from sagacity.decision_audit import DecisionAudit
    from sagacity.entry import JournalEntry
    from sagacity.file_evidence import FileEvidence

    slow = _without_fast_path() if side == SLOW else contextlib.nullcontext()
    with slow:
        t0, c0 = time.perf_counter(), time.process_time()
        with path.open("w", encoding="utf-8", newline="\n") as out:
            entries = export_jsonl(store, out, format=int(side[0]))
        t1, c1 = time.perf_counter(), time.process_time()
        decisions, evidence = DecisionAudit(), FileEvidence(None)

        def observe(entry: JournalEntry) -> None:
            decisions.observe(entry)
            evidence.observe(entry)

        with path.open("rb") as raw:
            reports = verify_jsonl(export_lines(raw), observe, evidence.evidence)
        t2, c2 = time.perf_counter(), time.process_time()
    findings = evidence.finish(reports)
    size = path.stat().st_size
    path.unlink()
    return {
        "entries": entries,
        "verified": sum(r.entries for r in reports if r.ok),
        "broken": sum(not r.ok for r in reports) + len(findings) + len(decisions.problems),
        "export_s": t1 - t0,
        "verify_s": t2 - t1,
        "export_cpu_s": c1 - c0,
        "verify_cpu_s": c2 - c1,
        "file_bytes": size,
    }


SLOW = "2 slow"
SIDES = {
    "1": "format 1: payloads as canonical text",
    "2": "format 2: payloads as JSON values",
    SLOW: "format 2 without the fast path (diagnostic)",
}


def measure(report: Report, sizes: Sizes, store_url: str, n: int, workdir: Path) -> None:
    """Add the formats table to `report`, from the journal at `store_url` (n entries):
    the three sides in rotated order, each round starting with another."""
    from sagacity.stores import open_store

    store = open_store(store_url)
    names = list(SIDES)
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in names}
    try:
        _one(store, workdir / "warm-up.jsonl", "2")  # imports, prepared statements
        for r in range(max(3, sizes.export_rounds + 1)):
            for side in names[r % 3 :] + names[: r % 3]:
                runs[side].append(_one(store, workdir / "export.jsonl", side))
    finally:
        store.close()
    every = [x for xs in runs.values() for x in xs]
    report.check(
        all(x["entries"] == x["verified"] == n and not x["broken"] for x in every),
        f"export formats: {n:,} entries exported and verified in format 1 and in format 2",
        f"export formats: {[(x['entries'], x['verified'], x['broken']) for x in every]}",
    )
    rates = {
        side: {
            key: [n / x[f"{key}_s"] for x in xs]
            for key in ("export", "verify", "export_cpu", "verify_cpu")
        }
        for side, xs in runs.items()
    }
    rows = []
    for side, label in SIDES.items():
        row: list[Any] = [label]
        for step in ("export", "verify"):
            row.append(fmt_rate(median(rates[side][step])))
            for key in (step, f"{step}_cpu"):
                ratios = pair_ratios(rates["1"][key], rates[side][key])
                row.append(f"{median(ratios):.2f} ({spread(ratios)})")
        row.append(fmt_bytes(median([x["file_bytes"] for x in runs[side]])))
        rows.append(row)
    report.table(
        f"Export formats — {n:,} entries from PostgreSQL, {len(runs['1'])} rotated rounds; "
        "ratio = entries/s over format 1's per round (median, min-max), by wall time and by "
        "this process's CPU time",
        ["side", "export entries/s", "wall ratio", "CPU ratio", "verify-file entries/s",
         "wall ratio", "CPU ratio", "file"],
        rows,
    )  # fmt: skip
    report.extra["formats"] = {"entries": n, "runs": runs, "rates": rates}
    for step in ("export", "verify"):
        fast, slow = (
            median(pair_ratios(rates["1"][f"{step}_cpu"], rates[side][f"{step}_cpu"]))
            for side in ("2", SLOW)
        )
        report.notes.append(
            f"format 2 {step} takes {1 / fast:.2f}x the CPU of format 1; without the "
            f"canonical fast path {1 / slow:.2f}x"
        )
