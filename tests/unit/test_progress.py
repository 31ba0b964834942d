"""The pieces of `start --wait`'s live progress, without a server: escaping what a tool
controls, journal entries and step reports turned into events (each once, in order), and
the lines the renderer prints for each kind of event."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from rich.console import Console

from sagacity.approvals import approval_hash
from sagacity.entry import EntryDraft, JournalEntry
from sagacity.phases import Phase, SagaStatus, StepStatus
from sagacity.stores import MemoryJournalStore
from sagacity.worker.progress import (
    ApprovalShown,
    JournalTracker,
    ProgressEvent,
    WorkflowTracker,
    entry_event,
)
from sagacity.worker.progress_view import (
    VALUE_CHARS,
    ProgressPrinter,
    event_lines,
    waiting_for,
)
from sagacity.worker.terminal_safe import json_line, neutralized, printable
from sagacity.workflows.models import (
    DirtyStep,
    PendingApproval,
    SagaResult,
    SagaView,
    StepReport,
)

SAGA = "saga-1"
WIRE_ARGS = {"iban": "DE89", "amount": 5, "currency": "EUR"}
WIRE_SHA = approval_hash("send_wire_transfer", WIRE_ARGS)
HOSTILE = "\x1b[2J\x1b[H\rok\x08\x7f\x9b31m\u202eevil\u200b\u2028\ud800"
UNSAFE = ["\x1b", "\r", "\n", "\x08", "\x7f", "\x9b", "\u202e", "\u200b", "\u2028", "\ud800"]


# ---- escaping ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2J", "\\x1b[2J"),
        ("a\rb\nc\td", "a\\rb\\nc\\td"),
        ("\x00\x08\x7f", "\\x00\\x08\\x7f"),
        ("\x9b31m", "\\x9b31m"),  # a one-character CSI
        ("pay\u202eevil", "pay\\u202eevil"),  # a bidi override
        ("zero\u200bwidth", "zero\\u200bwidth"),
        ("line\u2028sep", "line\\u2028sep"),
        ("\ud800", "\\ud800"),  # a lone surrogate cannot even be encoded
        ("tag\U000e0041", "tag\\U000e0041"),
    ],
)
def test_printable_escapes_what_could_act_on_a_terminal(raw: str, shown: str) -> None:
    assert printable(raw) == shown


@pytest.mark.parametrize("text", ["plain ascii", "café", "Привет", "漢字かな", "😀 ✓ €", ""])
def test_printable_leaves_readable_text_alone(text: str) -> None:
    assert printable(text) == text


def test_json_line_parses_back_to_the_same_value_with_nothing_raw_in_it() -> None:
    value = {"result": HOSTILE, "name": "café", HOSTILE: ["\U000e0041"]}
    line = json_line(value)
    assert json.loads(line) == value
    assert not any(char in line for char in [*UNSAFE, "\U000e0041"])
    assert "café" in line and "\n" not in line  # readable, one line


def test_neutralized_escapes_every_string_keys_included() -> None:
    value = {"a\x1b": ["\r", {"k": "\x9b"}], "n": 3, "none": None}
    assert neutralized(value) == {"a\\x1b": ["\\r", {"k": "\\x9b"}], "n": 3, "none": None}


# ---- journal entries -----------------------------------------------------------------------


def chain(*drafts: dict[str, Any]) -> list[JournalEntry]:
    store = MemoryJournalStore()
    return [store.append(EntryDraft.new(SAGA, **draft)) for draft in drafts]


def test_entry_events_say_what_each_phase_needs() -> None:
    entries = chain(
        {"phase": Phase.SAGA_OPENED},
        {"phase": Phase.INTENT, "step": 1, "tool": "charge_card", "input": {"amount": 1}},
        {"phase": Phase.EXECUTED, "step": 1, "tool": "charge_card", "result": {"charge": "c1"}},
        {
            "phase": Phase.AWAITING_APPROVAL,
            "step": 2,
            "tool": "send_wire_transfer",
            "input": {"tool": "send_wire_transfer", "args": WIRE_ARGS},
            "result": {
                "payload_sha256": WIRE_SHA,
                "deadline": "2026-12-14T02:14:24+00:00",
                "approval": {"quorum": 2},
            },
        },
        {
            "phase": Phase.APPROVED,
            "step": 2,
            "tool": "send_wire_transfer",
            "actor": "ann",
            "result": {"reason": "ok", "quorum": 2, "approvals": ["ann"], "quorum_met": False},
        },
        {"phase": Phase.FAILED, "step": 3, "tool": "ship_order", "error": "carrier refused"},
        {
            "phase": Phase.COMPENSATED,
            "step": 1,
            "tool": "charge_card",
            "input": {"compensation": "refund_card"},
        },
        {
            "phase": Phase.NEEDS_HUMAN,
            "input": {"dirty": [{"step": 3, "tool": "ship_order", "kind": "UNKNOWN_OUTCOME"}]},
            "result": {"deadline": "2027-01-01T00:00:00+00:00"},
        },
        {"phase": Phase.SAGA_CLOSED, "result": {"status": "UNRESOLVED", "first_failure": "x"}},
    )
    opened, intent, executed, awaiting, approved, failed, undone, human, closed = map(
        entry_event, entries
    )
    assert (opened.phase, opened.seq, opened.source) == ("SAGA_OPENED", 1, "journal")
    assert (intent.step, intent.tool, intent.args) == (1, "charge_card", {"amount": 1})
    assert executed.result == {"charge": "c1"}
    assert awaiting.approval == ApprovalShown(
        tool="send_wire_transfer",
        args=WIRE_ARGS,
        payload=(
            '{"args":{"amount":5,"currency":"EUR","iban":"DE89"},"tool":"send_wire_transfer"}'
        ),
        sha256=WIRE_SHA,
        matches=True,
        deadline="2026-12-14T02:14:24+00:00",
        needs="2 approvals",
    )
    assert (approved.actor, approved.reason) == ("ann", "ok")
    assert approved.detail == "1 of 2 approvals, quorum not met yet"
    assert failed.error == "carrier refused"
    assert undone.compensation == "refund_card"
    assert human.dirty == [{"step": 3, "tool": "ship_order", "kind": "UNKNOWN_OUTCOME"}]
    assert (human.status, human.deadline) == ("NEEDS_HUMAN", "2027-01-01T00:00:00+00:00")
    assert (closed.status, closed.detail) == ("UNRESOLVED", "x")


def test_an_approval_whose_payload_does_not_hash_to_its_sha256_is_flagged() -> None:
    (entry,) = chain(
        {
            "phase": Phase.AWAITING_APPROVAL,
            "step": 1,
            "tool": "send_wire_transfer",
            "input": {"tool": "send_wire_transfer", "args": WIRE_ARGS},
            "result": {"payload_sha256": "0" * 64},
        }
    )
    approval = entry_event(entry).approval
    assert approval is not None and approval.matches is False


def test_the_journal_tracker_gives_each_entry_once_in_seq_order() -> None:
    entries = chain(*({"phase": Phase.INTENT, "step": n, "tool": "t"} for n in range(1, 6)))
    tracker = JournalTracker()
    first = tracker.feed(reversed(entries[:3]))
    again = tracker.feed(entries[1:])  # overlapping reads
    assert [e.seq for e in first] == [1, 2, 3]
    assert [e.seq for e in again] == [4, 5]
    assert tracker.feed(entries) == []
    assert tracker.seen == {(n, "INTENT") for n in range(1, 6)}


# ---- step reports ----------------------------------------------------------------------------


def report(step: int, tool: str, status: StepStatus, **more: Any) -> StepReport:
    return StepReport(step=step, tool=tool, status=status, **more)


def pending(step: int = 2) -> PendingApproval:
    return PendingApproval(
        saga_id=SAGA,
        step=step,
        tool="send_wire_transfer",
        payload=WIRE_ARGS,
        canonical_payload="(canonical)",
        payload_sha256=WIRE_SHA,
        requested_at=datetime(2026, 1, 1, tzinfo=UTC),
        needs="1 of 1 approval",
    )


def view(status: SagaStatus, **more: Any) -> SagaView:
    return SagaView(saga_id=SAGA, status=status, needs_human=False, steps=2, **more)


def phases(events: list[ProgressEvent]) -> list[tuple[str, int]]:
    return [(e.phase, e.step) for e in events]


def test_the_workflow_tracker_shows_the_phases_a_report_implies_once_and_in_order() -> None:
    tracker = WorkflowTracker(SAGA)
    reserved = report(1, "reserve", StepStatus.EXECUTED, intent_seq=2, seq=3, result={"r": 1})
    waiting = report(2, "send_wire_transfer", StepStatus.AWAITING_APPROVAL, args=WIRE_ARGS)
    first = tracker.update(
        [reserved, waiting], view(SagaStatus.AWAITING_APPROVAL, pending_approval=pending())
    )
    assert phases(first) == [("INTENT", 1), ("EXECUTED", 1), ("AWAITING_APPROVAL", 2)]
    assert [e.seq for e in first] == [2, 3, None]
    approval = first[2].approval
    assert approval is not None and approval.needs == "1 of 1 approval" and approval.matches
    assert tracker.update([reserved, waiting], view(SagaStatus.AWAITING_APPROVAL)) == []

    closed = tracker.closed(
        SagaResult(
            saga_id=SAGA,
            status=SagaStatus.COMPENSATED,
            first_failure="step 3 failed",
            head_seq=12,
            steps=[
                report(1, "reserve", StepStatus.COMPENSATED, intent_seq=2, seq=11),
                report(
                    2,
                    "send_wire_transfer",
                    StepStatus.NOT_COMPENSABLE,
                    payload_sha256=WIRE_SHA,
                    approver="ann",
                    intent_seq=6,
                    seq=7,
                ),
                report(3, "ship", StepStatus.FAILED, intent_seq=8, seq=9, error="refused"),
            ],
        )
    )
    assert phases(closed) == [
        ("APPROVED", 2),
        ("INTENT", 2),
        ("EXECUTED", 2),
        ("INTENT", 3),
        ("FAILED", 3),
        ("NOT_COMPENSABLE", 2),
        ("COMPENSATED", 1),
        ("SAGA_CLOSED", 0),
    ]
    assert closed[2].seq == 7 and closed[5].seq is None  # seq 7 is the EXECUTED entry
    assert closed[4].error == "refused"
    assert (closed[-1].status, closed[-1].detail, closed[-1].seq) == (
        "COMPENSATED",
        "step 3 failed",
        12,
    )
    assert all(e.source == "workflow" for e in closed)


def test_compensations_come_after_the_failure_newest_step_first() -> None:
    tracker = WorkflowTracker(SAGA)
    events = tracker.update(
        [
            report(1, "a", StepStatus.COMPENSATED),
            report(2, "b", StepStatus.COMPENSATED),
            report(3, "wire", StepStatus.REJECTED, payload_sha256=WIRE_SHA, approver="bo"),
        ],
        None,
    )
    assert phases(events) == [
        ("EXECUTED", 1),
        ("EXECUTED", 2),
        ("AWAITING_APPROVAL", 3),
        ("REJECTED", 3),
        ("COMPENSATED", 2),
        ("COMPENSATED", 1),
    ]


def test_a_tracker_taking_over_from_the_journal_skips_what_it_showed() -> None:
    tracker = WorkflowTracker(SAGA, seen={(1, "INTENT"), (1, "EXECUTED")})
    done = report(1, "a", StepStatus.COMPENSATED, intent_seq=2, seq=5)
    assert phases(tracker.update([done], None)) == [("COMPENSATED", 1)]


def test_needs_human_is_shown_once_with_the_dirty_steps() -> None:
    tracker = WorkflowTracker(SAGA)
    dirty = DirtyStep(step=2, tool="charge", kind="COMPENSATION_FAILED", known="refund failed")
    waiting = view(
        SagaStatus.NEEDS_HUMAN, dirty=[dirty], human_deadline=datetime(2027, 1, 1, tzinfo=UTC)
    )
    (event,) = tracker.update([], waiting)
    assert event.phase == "NEEDS_HUMAN" and event.deadline == "2027-01-01T00:00:00+00:00"
    assert event.dirty == [
        {"step": 2, "tool": "charge", "kind": "COMPENSATION_FAILED", "known": "refund failed"}
    ]
    assert tracker.update([], waiting) == []


# ---- the lines printed -----------------------------------------------------------------------


def event(phase: str, **more: Any) -> ProgressEvent:
    return ProgressEvent(saga_id=SAGA, phase=phase, source="journal", **more)


def plain(e: ProgressEvent) -> list[str]:
    return [line.plain for line in event_lines(e)]


def test_an_intent_shows_its_arguments_cut_with_an_ellipsis() -> None:
    (line,) = plain(event("INTENT", seq=2, step=1, tool="export", args={"rows": "x" * 500}))
    assert line.startswith('   #2  INTENT              step 1 export: args {"rows": "xxx')
    assert line.endswith("…") and len(line.split(": args ", 1)[1]) == VALUE_CHARS


def test_a_hostile_result_error_and_tool_name_are_escaped() -> None:
    lines = plain(event("EXECUTED", seq=3, step=1, tool="echo\u202e", result=HOSTILE))
    lines += plain(event("FAILED", seq=4, step=2, tool="fail", error=HOSTILE))
    assert lines[0].endswith(
        'step 1 echo\\u202e: → "\\u001b[2J\\u001b[H\\rok\\b\\x7f\\x9b31m\\u202eevil\\u200b'
        '\\u2028\\ud800"'
    )
    assert lines[1].endswith(
        "step 2 fail: \\x1b[2J\\x1b[H\\rok\\x08\\x7f\\x9b31m\\u202eevil\\u200b\\u2028\\ud800"
    )
    assert not any(char in line for line in lines for char in UNSAFE)


def test_an_awaiting_approval_shows_the_payload_hash_and_the_commands() -> None:
    approval = ApprovalShown(
        tool="send_wire_transfer",
        args={"payee": "\u0440\u0430\u0443"},  # Cyrillic letters that read as "pay"
        payload='{"args":{"payee":"\u0440\u0430\u0443"},"tool":"send_wire_transfer"}',
        sha256="ab" * 32,
        matches=True,
        deadline="2026-12-14T02:14:24+00:00",
        needs="2 approvals",
    )
    shown = ProgressEvent(
        saga_id="my saga",
        phase="AWAITING_APPROVAL",
        source="journal",
        seq=4,
        step=2,
        tool="send_wire_transfer",
        approval=approval,
    )
    lines = plain(shown)
    assert lines[0] == "   #4  AWAITING_APPROVAL   step 2 send_wire_transfer"
    assert lines[1].split() == ["payload", approval.payload]
    assert lines[2].split() == ["sha256", "ab" * 32]
    assert any(line.split()[0] == "text" and "CYRILLIC" in line for line in lines)
    assert "until 2026-12-14 02:14:24 UTC, 2 approvals" in lines[-3]
    assert lines[-2].split(None, 1) == [
        "approve",
        f"sagacity approve 'my saga' --hash {'ab' * 32}",
    ]
    assert lines[-1].split(None, 1) == [
        "reject",
        f"sagacity reject 'my saga' --hash {'ab' * 32} --reason 'WHY'",
    ]
    assert not any("does not hash" in line for line in lines)

    forged = ApprovalShown("t", {}, "{}", "cd" * 32, matches=False)
    warned = plain(event("AWAITING_APPROVAL", step=1, tool="t", approval=forged))
    assert any("does not hash to the sha256 above: do not approve" in line for line in warned)


@pytest.mark.parametrize(
    ("shown", "expected"),
    [
        (
            event("APPROVED", seq=5, step=2, tool="w", actor="ann", reason="fine", detail="1 of 2"),
            "   #5  APPROVED            step 2 w: by ann, reason: fine, 1 of 2",
        ),
        (
            event("REJECTED", step=2, tool="w", actor="approval-timeout", error="timed out"),
            "   #-  REJECTED            step 2 w: by approval-timeout, reason: timed out",
        ),
        (
            event("COMPENSATED", seq=9, step=1, tool="charge", compensation="refund_card"),
            "   #9  COMPENSATED         step 1 charge: undone by refund_card",
        ),
        (
            event("COMPENSATION_FAILED", seq=9, step=1, tool="charge", error="provider down"),
            "   #9  COMPENSATION_FAILED step 1 charge: provider down",
        ),
        (
            event("NOT_COMPENSABLE", step=3, tool="wire"),
            "   #-  NOT_COMPENSABLE     step 3 wire: ran and cannot be undone",
        ),
        (
            event("SAGA_CLOSED", seq=14, status="COMPENSATED", detail="step 4 failed"),
            "  #14  SAGA_CLOSED         COMPENSATED: step 4 failed",
        ),
        (event("SAGA_OPENED", seq=1), "   #1  SAGA_OPENED"),
        (
            event("CALL_REFUSED", seq=3, step=1, tool="nope", args={}, error="unknown tool"),
            "   #3  CALL_REFUSED        step 1 nope: args {}: unknown tool",
        ),
        (
            event("APPROVAL_REFUSED", seq=6, step=2, tool="w", error="HASH_MISMATCH"),
            "   #6  APPROVAL_REFUSED    step 2 w: HASH_MISMATCH",
        ),
        (
            event("RESOLVED", seq=20, step=2, tool="charge", detail="retry compensation: ok"),
            "  #20  RESOLVED            step 2 charge: retry compensation: ok",
        ),
    ],
)
def test_each_phase_has_its_line(shown: ProgressEvent, expected: str) -> None:
    assert plain(shown) == [expected]


def test_needs_human_names_the_dirty_steps_and_what_resolves_them() -> None:
    lines = plain(
        event(
            "NEEDS_HUMAN",
            seq=12,
            dirty=[{"step": 2, "tool": "charge_card", "kind": "COMPENSATION_FAILED"}],
            deadline="2027-01-01T02:00:00+02:00",
        )
    )
    assert lines[0] == (
        "  #12  NEEDS_HUMAN         a person must resolve step 2 charge_card "
        "COMPENSATION_FAILED; waits until 2027-01-01 00:00:00 UTC, then UNRESOLVED"
    )
    assert "sagacity retry-compensation saga-1 STEP" in lines[1]
    assert "sagacity close saga-1 --accept REASON" in lines[1]


@pytest.mark.parametrize(
    ("deadline", "shown"),
    [("not a time\x1b", "not a time\\x1b"), ("2027-01-01T00:00:00", "2027-01-01T00:00:00")],
)
def test_a_deadline_that_is_no_aware_timestamp_is_shown_as_given(deadline: str, shown: str) -> None:
    approval = ApprovalShown("t", {}, "{}", "ab" * 32, matches=True, deadline=deadline)
    lines = plain(event("AWAITING_APPROVAL", step=1, tool="t", approval=approval))
    assert f"waits    until {shown}" in "\n".join(lines)


def test_the_spinner_says_what_the_saga_waits_for() -> None:
    assert waiting_for(None, SAGA) == "saga saga-1: waiting for its first step"
    awaiting = event("AWAITING_APPROVAL", step=2, tool="wire")
    assert waiting_for(awaiting, SAGA) == "saga saga-1: waiting for a decision on step 2 (wire)"
    assert waiting_for(event("INTENT", step=1, tool="x\x1b"), SAGA) == (
        "saga saga-1: step 1 (x\\x1b) running"
    )
    assert waiting_for(event("FAILED", step=1), SAGA) == "saga saga-1: compensating"
    assert "a person" in waiting_for(event("NEEDS_HUMAN"), SAGA)


def test_off_a_terminal_the_printer_writes_plain_lines_and_no_spinner() -> None:
    out = io.StringIO()
    printer = ProgressPrinter(Console(file=out, force_terminal=False, width=80), SAGA)
    with printer.live():
        assert printer._status is None
        printer.show(event("FAILED", seq=3, step=1, tool="t", error="x" * 300))
    text = out.getvalue()
    assert "\x1b" not in text
    assert text.count("\n") == 1  # one event, one line, however long: never folded


def test_on_a_terminal_the_spinner_runs_while_the_saga_does() -> None:
    out = io.StringIO()
    printer = ProgressPrinter(Console(file=out, force_terminal=True, width=80), SAGA)
    with printer.live():
        assert printer._status is not None
        printer.show(event("EXECUTED", seq=3, step=1, tool="t", result=1))
    assert printer._status is None and "EXECUTED" in out.getvalue()


def test_with_json_the_printer_writes_one_object_per_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    printer = ProgressPrinter(Console(file=io.StringIO()), SAGA, as_json=True)
    printer.started("q")
    printer.show(event("EXECUTED", seq=3, step=1, tool="t", result=HOSTILE))
    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert first == {"event": "started", "saga_id": SAGA, "task_queue": "q"}
    assert second["event"] == "progress" and second["result"] == HOSTILE
    assert (second["phase"], second["seq"], second["step"]) == ("EXECUTED", 3, 1)
