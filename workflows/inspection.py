"""What a saga shows in the Temporal UI: activity summaries, current details, search
attributes. Pure functions, safe in workflow code."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey

with workflow.unsafe.imports_passed_through():
    from sagacity.toolbox import call_summary

SAGA_STATUS = SearchAttributeKey.for_keyword("SagaStatus")
SAGA_NEEDS_HUMAN = SearchAttributeKey.for_bool("SagaNeedsHuman")
SEARCH_ATTRIBUTES = (SAGA_STATUS, SAGA_NEEDS_HUMAN)
"""Register these before any saga runs (an unregistered one makes workflow tasks fail)."""

__all__ = ["SAGA_NEEDS_HUMAN", "SAGA_STATUS", "SEARCH_ATTRIBUTES", "call_summary", "steps_markdown"]


def _cell(value: object, limit: int = 60) -> str:
    text = "" if value is None else str(value)
    text = text.replace("\n", " ")
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return text.replace("|", "\\|")


def steps_markdown(
    status: str,
    rows: Iterable[Mapping[str, Any]],
    dirty: Iterable[Mapping[str, Any]] = (),
    saga_id: str = "",
) -> str:
    """The saga's current details: status, what needs a person (and how to act), and a
    markdown table of steps."""
    lines = [f"**Saga status:** {status}", ""]
    waiting = list(dirty)
    if waiting:
        lines += ["**Needs a human:**", "", "| step | call | dirty | known |", "|---:|---|---|---|"]
        for row in waiting:
            lines.append(
                f"| {row['step']} | {_cell(call_summary(row['tool'], row.get('args') or {}, 60))} "
                f"| {_cell(row['kind'])} | {_cell(row.get('known'), 240)} |"
            )
        lines += [
            "",
            f"Resolve: `sagacity dirty`, then `sagacity resolve {saga_id} STEP --happened` or "
            f"`--did-not-happen`, `sagacity retry-compensation {saga_id} STEP`, or "
            f"`sagacity close {saga_id} --accept REASON`.",
            "",
        ]
    lines += ["| step | call | status | seq | hash |", "|---:|---|---|---:|---|"]
    for row in rows:
        digest = row.get("hash") or ""
        lines.append(
            f"| {row['step']} | {_cell(call_summary(row['tool'], row.get('args') or {}, 60))} "
            f"| {_cell(row['status'])} | {_cell(row.get('seq'))} | {_cell(digest[:12])} |"
        )
    return "\n".join(lines)
