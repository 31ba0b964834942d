"""The CLI's journal table (issue 36): INTENT and EXECUTED rows show the step's
arguments (bounded, escaped), an APPROVAL_REFUSED row the approver it claimed (marked as
a claim: it is not a proven actor), and the time a saga waits until as UTC to the
second, not raw ISO."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from rich.console import Console

from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import MemoryJournalStore
from sagacity.worker.cli._render import DETAIL_CHARS, journal_table

WHEN = datetime(2026, 12, 14, 2, 14, 24, 123456, tzinfo=UTC)


def rows(*drafts: EntryDraft) -> list[str]:
    """The printed table of a saga opened, then `drafts`."""
    store = MemoryJournalStore(clock=lambda: WHEN)
    for draft in (EntryDraft.new("s1", Phase.SAGA_OPENED), *drafts):
        store.append(draft)
    console = Console(width=1000, record=True, color_system=None)
    console.print(journal_table("s1", store.entries("s1")))
    return console.export_text().splitlines()


def row_of(lines: list[str], phase: str) -> str:
    [row] = [line for line in lines if f" {phase} " in line]
    return row


def test_intent_and_executed_rows_show_the_arguments() -> None:
    args = {"sku": "widget", "qty": 2}
    lines = rows(
        EntryDraft.new("s1", Phase.INTENT, step=1, tool="reserve_inventory", input=args),
        EntryDraft.new(
            "s1", Phase.EXECUTED, step=1, tool="reserve_inventory", input=args, result={"ok": 1}
        ),
    )
    for phase in ("INTENT", "EXECUTED"):
        assert 'args {"qty": 2, "sku": "widget"}' in row_of(lines, phase)


def test_hostile_or_long_arguments_are_escaped_and_bounded() -> None:
    args = {"note": "\x1b[2Jok\u202e" + "x" * 500}
    lines = rows(
        EntryDraft.new("s1", Phase.INTENT, step=1, tool="t", input=args),
    )
    row = row_of(lines, "INTENT")
    assert "\x1b" not in row and "\u202e" not in row
    assert "\\u001b[2Jok\\u202e" in row
    detail = row[row.index("args") :].rsplit("…", 1)[0]
    assert len(detail) < DETAIL_CHARS + 20 and "…" in row


def test_a_refused_decision_shows_the_approver_it_claimed() -> None:
    lines = rows(
        EntryDraft.new(
            "s1",
            Phase.APPROVAL_REFUSED,
            step=1,
            tool="send_wire_transfer",
            input={"approver": "mallory", "step": 1},
            error="APPROVER_NOT_ALLOWED: no",
        ),
    )
    assert "mallory (claimed)" in row_of(lines, "APPROVAL_REFUSED")


def test_the_wait_deadline_is_utc_to_the_second() -> None:
    lines = rows(
        EntryDraft.new(
            "s1",
            Phase.NEEDS_HUMAN,
            input={"dirty": [{"step": 2}]},
            result={"deadline": "2026-12-15T03:00:00.5+01:00"},
        ),
    )
    text = "\n".join(lines)
    assert "waits until 2026-12-15 02:00:00 UTC" in row_of(lines, "NEEDS_HUMAN")
    assert not re.search(r"\d\dT\d\d:", text), text  # no raw ISO anywhere
