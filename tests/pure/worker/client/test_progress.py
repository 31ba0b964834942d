"""The events of `start --wait`'s live progress, without a server: journal entries and
step reports turned into events, each once and in the order it happened."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sagacity.approval._judge import approval_hash
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase, SagaStatus, StepStatus
from sagacity.stores import MemoryJournalStore
from sagacity.worker.client._progress import (
    ApprovalShown,
    JournalTracker,
    ProgressEvent,
    WorkflowTracker,
    entry_event,
)
from sagacity.workflows._models import DirtyStep, PendingApproval, SagaResult, SagaView, StepReport

SAGA = "saga-1"
WIRE_ARGS = {"iban": "DE89", "amount": 5, "currency": "EUR"}
WIRE_SHA = approval_hash("send_wire_transfer", WIRE_ARGS)


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
