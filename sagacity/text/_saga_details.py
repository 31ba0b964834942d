"""What a person reads about a saga at a glance: the markdown of its current details.

The Temporal UI renders a workflow's current details as markdown. A person opening a saga
there must see, without opening any JSON, where it stands, what it waits for (the exact
payload an approver is asked to approve, its SHA-256 and how to decide), what is dirty and
how to resolve it, and each step. Every value shown comes from a caller, a model or a tool
and is hostile: it is shown in a code span (literal in every markdown renderer), cut with
"…", with control and invisible characters as `\\uXXXX` escapes, so a payload cannot draw a
link, a heading, HTML or a fake instruction into the page. Pure functions: the workflow
calls them on every change.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sagacity.journal._bounds import cut
from sagacity.journal._canonical import canonical_text
from sagacity.text._visible import escape, hidden_in, visible
from sagacity.tools._toolbox import call_summary

__all__ = [
    "HEADLINES",
    "MAX_STEPS",
    "md_code",
    "md_text",
    "saga_details",
    "start_details",
    "start_summary",
]

HEADLINES: dict[str, str] = {
    "RUNNING": "running its steps",
    "AWAITING_APPROVAL": "waits for a person to approve a step",
    "COMPENSATING": "failed; undoing its executed steps, newest first",
    "NEEDS_HUMAN": "failed, and waits for a person: some state is dirty",
    "COMPLETED": "completed: every step ran",
    "COMPENSATED": "FAILED; its executed steps were undone",
    "REFUSED": "FAILED: refused before any step ran, nothing was done",
    "ACCEPTED": "FAILED; a person accepted the state it left",
    "UNRESOLVED": "FAILED; nobody resolved its dirty state before the deadline",
}
"""Per saga status, what it means: the first thing the details say."""

MAX_FIELDS = 40
"""Payload fields listed one per row; the rest are in the canonical payload below."""
MAX_CANONICAL = 4_000
MAX_STEPS = 50

_MARKDOWN = set("\\`*_{}[]()#+-.!|~<>&")
"""Characters markdown or HTML give a meaning to, backslash-escaped. Used for labels only
(field names, numbers, statuses): the Temporal UI's renderer honours fewer escapes than
CommonMark (it shows `\\=` as written) and turns a bare URL into a link, so every value a
caller, a model or a tool controls is shown in a code span instead (md_code)."""


def md_text(value: object, limit: int = 200) -> str:
    """`value` as plain markdown text: cut to `limit` characters (ending "…"), invisible
    characters shown as escapes, markdown's own characters escaped."""
    text = cut("" if value is None else str(value), limit)
    out: list[str] = []
    for ch, concealed in hidden_in(text):
        if concealed:
            out.append("\\" + escape(ch))  # the escape's backslash, shown as itself
        elif ch in _MARKDOWN:
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def md_code(value: object, limit: int = 200) -> str:
    """`value` as an inline code span: shown literally (no link, no markup, no HTML, in
    every markdown renderer), cut, invisible characters escaped, fenced with more
    backticks than it holds."""
    raw = str(value)[: limit * 12 + 1]  # an escape is at most 12 characters long
    text = cut(visible(raw), limit)
    run = longest = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if longest else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _value(value: Any, limit: int = 120) -> str:
    """A payload value as a reader expects it: text as text, anything else as JSON."""
    if isinstance(value, str):
        return md_code(value, limit)
    try:
        return md_code(canonical_text(value), limit)
    except Exception:  # not canonical JSON (a float NaN, say): never fail the page
        return md_code(repr(value), limit)


def _code_block(text: str) -> list[str]:
    """A fenced block: nothing inside is markdown. Canonical JSON is one line that starts
    with `{`, so no line of it can close the fence; an invisible character in it is shown
    as its `\\uXXXX` escape, which is the same JSON."""
    shown = visible(cut(text, MAX_CANONICAL))  # JSON escapes too
    return ["```json", shown, "```"]


def _pending_lines(saga_id: str, pending: Mapping[str, Any]) -> list[str]:
    sid = shlex.quote(saga_id)  # a command to copy: the id is one word, whatever it holds
    step, tool = pending.get("step"), str(pending.get("tool", ""))
    digest = str(pending.get("payload_sha256", ""))
    payload = pending.get("payload") or {}
    lines = [
        f"**Waits for approval:** step {md_text(step, 12)}, {md_code(tool, 80)} — approve only "
        "this exact payload:",
        "",
    ]
    items = list(payload.items()) if isinstance(payload, Mapping) else []
    for key, value in items[:MAX_FIELDS]:
        lines.append(f"- **{md_text(key, 60)}**: {_value(value)}")
    if len(items) > MAX_FIELDS:
        lines.append(f"- … {len(items) - MAX_FIELDS} more fields, in the canonical payload")
    lines += ["", f"**SHA-256 of the canonical payload:** {md_code(digest, 64)}", ""]
    lines += _code_block(str(pending.get("canonical_payload", "")))
    needs = pending.get("needs")
    if needs:
        lines += ["", f"**Still needed:** {md_text(needs)}"]
    deadline = pending.get("deadline")
    if deadline:
        lines += ["", f"**Decide before:** {md_text(deadline, 40)} (then it is rejected)"]
    lines += [
        "",
        f"**Approve:** {md_code(f'sagacity approve {sid}')} (it shows the payload, "
        f"recomputes the hash and asks); **reject:** "
        f"{md_code(f'sagacity reject {sid} --reason TEXT')}.",
    ]
    if pending.get("signatures_required"):
        lines += [
            "",
            "Only signed decisions count here: decide with `sagacity approve --key KEY_FILE`; "
            "a signal sent from this page is refused and journaled.",
        ]
    else:
        signal = canonical_text(
            {
                "saga_id": saga_id,
                "step": step,
                "tool": tool,
                "payload_sha256": digest,
                "approver": "you@example.com",
                "approve": True,
            }
        )
        lines += [
            "",
            "Or, from this page: **Send a Signal** named `approve` with this input (your own "
            "name as approver); a wrong hash, step or saga is refused and journaled:",
            "",
            *_code_block(signal),
        ]
    return lines


def _dirty_lines(saga_id: str, dirty: list[Mapping[str, Any]]) -> list[str]:
    sid = shlex.quote(saga_id)
    lines = ["**Needs a human:**", ""]
    for row in dirty:
        lines.append(
            f"- step **{md_text(row.get('step'), 12)}** {md_code(row.get('tool'), 60)}: "
            f"**{md_text(row.get('kind'), 40)}** — {md_code(row.get('known'), 240)}"
        )
    lines += [
        "",
        f"Resolve: `sagacity dirty`, then {md_code(f'sagacity resolve {sid} STEP --happened')} "
        f"or `--did-not-happen`, {md_code(f'sagacity retry-compensation {sid} STEP')}, or "
        f"{md_code(f'sagacity close {sid} --accept REASON')}.",
    ]
    return lines


def _steps_lines(rows: list[Mapping[str, Any]], total: int) -> list[str]:
    """One list item per step: a table renders as run-together columns in the Temporal UI,
    a list reads the same everywhere."""
    lines: list[str] = []
    if total > len(rows):
        lines.append(f"- … {total - len(rows)} earlier steps: `sagacity journal`")
    for row in rows:
        call = call_summary(str(row.get("tool")), row.get("args") or {}, 170)
        where = ""
        if row.get("seq") is not None:
            where = f", seq {md_text(row.get('seq'), 12)} {md_text((row.get('hash') or '')[:12])}"
        lines.append(
            f"- step **{md_text(row.get('step'), 12)}** "
            f"{md_code(call, 170)}: "
            f"**{md_text(row.get('status'), 30)}**{where}"
        )
    return lines


def saga_details(
    *,
    saga_id: str,
    status: str,
    steps: Iterable[Mapping[str, Any]],
    failure: str | None = None,
    pending: Mapping[str, Any] | None = None,
    dirty: Iterable[Mapping[str, Any]] = (),
    step_count: int | None = None,
) -> str:
    """The saga's current details: a headline with its status and what it means, the
    first failure, the approval it waits for (payload, hash, how to decide), its dirty
    steps (and how to resolve them), then its newest steps (`step_count` of them in all,
    when only the newest are given)."""
    meaning = HEADLINES.get(status, "")
    lines = [f"## {md_text(status, 40)}", "", f"Saga {md_code(saga_id)} {meaning}."]
    if failure:
        lines += ["", f"**First failure:** {md_code(failure, 500)}"]
    if pending is not None:
        lines += ["", *_pending_lines(saga_id, pending)]
    waiting = list(dirty)
    if waiting:
        lines += ["", *_dirty_lines(saga_id, waiting)]
    every = list(steps)
    total = max(step_count or 0, len(every))
    lines += ["", "**Steps** (newest last):", "", *_steps_lines(every[-MAX_STEPS:], total)]
    return "\n".join(lines)


def start_summary(plan: list[str] | None, goal: str | None) -> str:
    """The one line the Temporal UI shows for a saga from its start (its static summary):
    what it was asked to do, cut with "…"; its status is in the details. The UI renders
    it as markdown too, so the plan's tool names and the goal are a code span."""
    if plan is not None:
        return f"saga: plan of {len(plan)} step(s): " + md_code(" → ".join(plan), 160)
    return "saga: goal: " + md_code(" ".join((goal or "").split()), 180)


def start_details(plan: Sequence[tuple[str, Mapping[str, Any]]] | None, goal: str | None) -> str:
    """The saga's static details in the Temporal UI: its plan, one call per line, or its
    goal, escaped like the current details and bounded (the first 30 calls)."""
    if plan is None:
        return f"**Goal:** {md_code(goal or '', 2_000)}"
    lines = [f"**Plan** ({len(plan)} steps):", ""]
    for index, (tool, args) in enumerate(plan[:30], start=1):
        lines.append(f"{index}. {md_code(call_summary(tool, args, 170), 170)}")
    if len(plan) > 30:
        lines.append(f"- … {len(plan) - 30} more")
    return "\n".join(lines)
