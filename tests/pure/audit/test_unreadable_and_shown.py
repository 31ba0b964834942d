"""Text no sagacity worker writes, read by the verifiers without servers: payloads that
are not JSON or nested too deep are an `unreadable` entry of their saga (the other sagas
are still verified), and every outside character that could forge or restyle a line is
shown as an escape."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sagacity._errors import UnreadableEntryError
from sagacity.audit._decisions import DecisionAudit
from sagacity.audit._export import verify_jsonl, verify_store
from sagacity.audit._export_writer import entry_line
from sagacity.journal._chain import GENESIS, BreakReason, reseal
from sagacity.journal._entry import MAX_STORED_DEPTH, EntryDraft, JournalEntry
from sagacity.journal._phases import Phase
from sagacity.stores import MemoryJournalStore
from sagacity.stores._base import utc_now
from sagacity.text._saga_details import md_text
from sagacity.text._visible import visible
from sagacity.worker.cli._render import shown


def _sealed(saga_id: str, phase: Phase, **texts: str) -> JournalEntry:
    entry = JournalEntry(
        saga_id, 1, 0, 1, "", phase, texts.get("input", "null"), texts.get("result", "null"),
        "null", texts.get("actor", "null"), utc_now(), GENESIS, "", b"",
    )  # fmt: skip
    return reseal(entry)


@pytest.mark.parametrize(
    ("field", "text", "why"),
    [
        ("input", "{", "not JSON"),
        ("result", "[1,", "not JSON"),
        ("actor", "{x", "not JSON"),
        ("input", "[" * 100_000 + "]" * 100_000, "nested too deep to read"),
        ("input", "[" * (MAX_STORED_DEPTH + 1) + "]" * (MAX_STORED_DEPTH + 1), "nested more"),
    ],
)
def test_a_payload_no_worker_writes_is_unreadable(field: str, text: str, why: str) -> None:
    entry = _sealed("s", Phase.SAGA_OPENED, **{field: text})
    with pytest.raises(UnreadableEntryError, match=f"its {field} is {why}") as raised:
        getattr(entry, field)
    assert raised.value.seq == 1


def test_the_deepest_payload_a_worker_writes_is_read() -> None:
    depth = MAX_STORED_DEPTH
    entry = _sealed("s", Phase.SAGA_OPENED, input="[" * depth + "]" * depth)
    assert entry.input is not None


def test_an_unreadable_line_breaks_its_saga_and_the_file_goes_on() -> None:
    bad = _sealed("bad", Phase.SAGA_OPENED, input="{")
    lines = [entry_line(bad), entry_line(_sealed("good", Phase.SAGA_OPENED))]
    audit = DecisionAudit()
    reports = {r.saga_id: r for r in verify_jsonl(lines, audit.observe)}
    assert reports["bad"].reason is BreakReason.UNREADABLE
    assert (reports["bad"].entries, reports["bad"].first_broken_seq) == (1, 1)
    assert reports["bad"].detail.startswith("line 1: its input is not JSON")
    assert reports["good"].ok


def test_a_saga_whose_first_entry_is_unreadable_is_a_saga_with_a_break() -> None:
    """It once counted 0 entries, and verify --all took it for no saga at all."""
    store = MemoryJournalStore()
    store.append(EntryDraft.new("s", Phase.SAGA_OPENED))
    audit = DecisionAudit()

    def observe(entry: JournalEntry) -> None:
        audit.observe(replace(entry, input_json="{"))

    report = verify_store(store, "s", observe)
    assert (report.ok, report.entries, report.reason) == (False, 1, BreakReason.UNREADABLE)


@pytest.mark.parametrize(
    ("text", "seen"),
    [
        ("order-7f3a", "order-7f3a"),
        ("a b", "a b"),
        ("zz\nverified 9 sagas", "zz\\u000averified 9 sagas"),
        ("x\x1b[8m", "x\\u001b[8m"),
        ("gpj.\u202eexe", "gpj.\\u202eexe"),
        ("zero\u200bwidth", "zero\\u200bwidth"),
        ("line\u2028sep", "line\\u2028sep"),
        ("filler\u3164", "filler\\u3164"),
        ("tag\U000e0041", "tag\\udb40\\udc41"),
        ("Zoë 😀", "Zoë 😀"),
    ],
)
def test_outside_text_is_shown_with_escapes(text: str, seen: str) -> None:
    assert visible(text) == seen


def test_shown_escapes_markup_too_and_the_ui_keeps_its_escapes() -> None:
    assert shown("[conceal]x\n") == "\\[conceal]x\\u000a"
    assert shown(None) == ""
    assert md_text("a\u202eb") == "a\\\\u202eb"  # the UI page: the same escape, shown
