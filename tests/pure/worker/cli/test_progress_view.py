"""The lines `start --wait` prints for each kind of event (worker.progress_view), every
value escaped and cut, and the printer: plain lines off a terminal, a spinner on one,
JSON Lines with --json."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from rich.console import Console

from sagacity.worker.cli._progress_view import (
    VALUE_CHARS,
    ProgressPrinter,
    event_lines,
    waiting_for,
)
from sagacity.worker.client._progress import ApprovalShown, ProgressEvent
from tests.pure.text.test_terminal_safe import HOSTILE, UNSAFE

SAGA = "saga-1"


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
