"""Export format 1 against format 2, side by side: `export_jsonl` from PostgreSQL to a file
and `verify-file`'s reading of that file (verify_jsonl over the file's bytes, with the
decision audit and the evidence checks it runs), for each format in alternating rounds.

Format 2 writes payloads as JSON values, so the export parses each stored text and checks
it is its own RFC 8785 form, and the verifier writes each value's RFC 8785 form again and
holds the line to its exact exported bytes; format 1 copies the text. A third, diagnostic
side runs format 2 with the canonical-JSON fast path off (every value through the
pure-Python rfc8785 package), one round, to show what the fast path buys.

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


def _one(store: Any, path: Path, export_format: int) -> dict[str, Any]:
    """Export in `export_format`, then read the file back as verify-file does."""
    from sagacity.audit import export_jsonl, export_lines, verify_jsonl
    from sagacity.decision_audit import DecisionAudit
    from sagacity.entry import JournalEntry
    from sagacity.file_evidence import FileEvidence

    t0 = time.perf_counter()
    with path.open("w", encoding="utf-8", newline="\n") as out:
        entries = export_jsonl(store, out, format=export_format)
    t1 = time.perf_counter()
    decisions, evidence = DecisionAudit(), FileEvidence(None)

    def observe(entry: JournalEntry) -> None:
        decisions.observe(entry)
        evidence.observe(entry)

    with path.open("rb") as raw:
        reports = verify_jsonl(export_lines(raw), observe, evidence.evidence)
    t2 = time.perf_counter()
    findings = evidence.finish(reports)
    return {
        "entries": entries,
        "verified": sum(r.entries for r in reports if r.ok),
        "broken": sum(not r.ok for r in reports) + len(findings) + len(decisions.problems),
        "export_s": t1 - t0,
        "verify_s": t2 - t1,
        "file_bytes": path.stat().st_size,
    }


def measure(report: Report, sizes: Sizes, store_url: str, n: int, workdir: Path) -> None:
    """Add the formats table to `report`, from the journal at `store_url` (n entries)."""
    from sagacity.stores import open_store

    store = open_store(store_url)
    runs: dict[str, list[dict[str, Any]]] = {"1": [], "2": [], "2 slow": []}
    try:
        _one(store, workdir / "warm-up.jsonl", 2)  # imports, prepared statements
        for r in range(max(4, sizes.export_rounds * 2)):
            for side in ("1", "2") if r % 2 == 0 else ("2", "1"):
                path = workdir / f"format-{side}.jsonl"
                runs[side].append(_one(store, path, int(side)))
                path.unlink()
        with _without_fast_path():
            runs["2 slow"].append(_one(store, workdir / "format-2-slow.jsonl", 2))
    finally:
        store.close()
    every = [x for xs in runs.values() for x in xs]
    report.check(
        all(x["entries"] == x["verified"] == n and not x["broken"] for x in every),
        f"export formats: {n:,} entries exported and verified in format 1 and in format 2",
        f"export formats: {[(x['entries'], x['verified'], x['broken']) for x in every]}",
    )
    rates = {
        side: {step: [n / x[f"{step}_s"] for x in xs] for step in ("export", "verify")}
        for side, xs in runs.items()
    }
    rows = []
    for side, label in (
        ("1", "format 1: payloads as canonical text"),
        ("2", "format 2: payloads as JSON values"),
        ("2 slow", "format 2 without the fast path (diagnostic, 1 round)"),
    ):
        row: list[Any] = [label]
        for step in ("export", "verify"):
            mine, base = rates[side][step], rates["1"][step]
            if side == "2 slow":  # one round: against format 1's median
                ratio = f"{median(mine) / median(base):.2f}"
            else:
                ratios = pair_ratios(base, mine)
                ratio = f"{median(ratios):.2f} ({spread(ratios)})"
            row += [fmt_rate(median(mine)), ratio]
        row.append(fmt_bytes(median([x["file_bytes"] for x in runs[side]])))
        rows.append(row)
    report.table(
        f"Export formats — {n:,} entries from PostgreSQL, "
        f"{len(runs['1'])} alternating rounds per format; ratio = entries/s over format 1's "
        "(median, min-max)",
        ["side", "export entries/s", "ratio", "verify-file entries/s", "ratio", "file"],
        rows,
    )
    report.extra["formats"] = {"entries": n, "runs": runs, "rates": rates}
    for step in ("export", "verify"):
        ratio = median(pair_ratios(rates["1"][step], rates["2"][step]))
        report.notes.append(
            f"format 2 {step} runs at {ratio:.2f}x format 1's rate; without the fast path "
            f"at {median(rates['2 slow'][step]) / median(rates['1'][step]):.2f}x"
        )
