"""`python -m bench.markdown [RESULTS_DIR]`: the JSON results as Markdown tables, the form
docs/benchmarks.md quotes them in."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bench import BENCHMARKS
from bench.common import RESULTS_DIR

FILES = {"append": "append", "verify": "verify", "saga": "saga_overhead", "parked": "parked"}


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|")


def render(data: dict[str, Any]) -> str:
    out = [f"### {data['title']}", ""]
    out.append(f"Mode {data['mode']}, started {data['started']}, took {data['duration_s']:.0f} s.")
    out.append("")
    for table in data["tables"]:
        out.append(f"**{table['title']}**")
        out.append("")
        out.append("| " + " | ".join(map(_cell, table["columns"])) + " |")
        out.append("|" + "|".join(["---"] + ["---:"] * (len(table["columns"]) - 1)) + "|")
        for row in table["rows"]:
            out.append("| " + " | ".join(map(_cell, row)) + " |")
        out.append("")
    for target in data["targets"]:
        verdict = "met" if target["met"] else "**missed**"
        unit = target.get("unit", "x")
        measured = f"{target['ratio']:.2f}x" if unit == "x" else f"{target['ratio']:g}{unit}"
        out.append(
            f"- Target {target['name']}: {measured} "
            f"(target {target['kind']} {target['bound']:g}{unit}): {verdict}"
        )
    for check in data["integrity_checks"]:
        out.append(f"- Integrity: {check}")
    for failure in data["integrity_failures"]:
        out.append(f"- **Integrity failure**: {failure}")
    for note in data["notes"]:
        out.append(f"- Note: {note}")
    out.append("")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else RESULTS_DIR
    for name in BENCHMARKS:
        path = folder / f"{FILES[name]}.json"
        if path.exists():
            print(render(json.loads(path.read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
