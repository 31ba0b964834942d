"""What a saga shows in the Temporal UI: activity summaries, current details, search
attributes. Pure functions, safe in workflow code."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from temporalio.common import SearchAttributeKey

SAGA_STATUS = SearchAttributeKey.for_keyword("SagaStatus")
SAGA_NEEDS_HUMAN = SearchAttributeKey.for_bool("SagaNeedsHuman")
SEARCH_ATTRIBUTES = (SAGA_STATUS, SAGA_NEEDS_HUMAN)
"""Register these before any saga runs (an unregistered one makes workflow tasks fail)."""

SUMMARY_LIMIT = 80


def call_summary(tool: str, args: Mapping[str, Any] | Any, limit: int = SUMMARY_LIMIT) -> str:
    """`charge_card(amount=100, currency='EUR')`, cut with an ellipsis at `limit`."""
    if isinstance(args, Mapping):
        inner = ", ".join(f"{key}={value!r}" for key, value in args.items())
    else:
        inner = repr(args)
    text = f"{tool}({inner})"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cell(value: object) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")[:60]


def steps_markdown(status: str, rows: Iterable[Mapping[str, Any]]) -> str:
    """The saga's current details: status and a markdown table of steps."""
    lines = [
        f"**Saga status:** {status}",
        "",
        "| step | call | status | seq | hash |",
        "|---:|---|---|---:|---|",
    ]
    for row in rows:
        digest = row.get("hash") or ""
        lines.append(
            f"| {row['step']} | {_cell(call_summary(row['tool'], row.get('args') or {}, 60))} "
            f"| {_cell(row['status'])} | {_cell(row.get('seq'))} | {_cell(digest[:12])} |"
        )
    return "\n".join(lines)
