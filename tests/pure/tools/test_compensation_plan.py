"""The pure compensation planner: reverse seq order, compensated steps skipped, unknown
outcomes reported and never planned for compensation."""

from __future__ import annotations

from datetime import UTC, datetime

from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import MemoryJournalStore
from sagacity.tools._compensation import plan_compensation

AT = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def journal(*rows: tuple[str, int, str]) -> MemoryJournalStore:
    store = MemoryJournalStore(clock=lambda: AT)
    store.append(EntryDraft.new("s", Phase.SAGA_OPENED))
    for phase, step, tool in rows:
        store.append(
            EntryDraft.new("s", phase, step=step, tool=tool, input={"n": step}, result={"r": step})
        )
    return store


TWO_EXECUTED = (("INTENT", 1, "a"), ("EXECUTED", 1, "a"), ("INTENT", 2, "b"), ("EXECUTED", 2, "b"))
"""Steps 1 (tool a) and 2 (tool b), both executed."""


def test_executed_steps_are_planned_in_reverse_seq_order() -> None:
    store = journal(*TWO_EXECUTED, ("INTENT", 3, "c"), ("FAILED", 3, "c"))
    plan = plan_compensation(store.entries("s"))
    assert [(s.step, s.tool) for s in plan.to_compensate] == [(2, "b"), (1, "a")]
    assert plan.to_compensate[0].input == {"n": 2} and plan.to_compensate[0].result == {"r": 2}
    assert plan.unknown == []


def test_compensated_steps_are_not_planned_again_but_failed_compensations_are() -> None:
    store = journal(*TWO_EXECUTED, ("COMPENSATED", 2, "b"), ("COMPENSATION_FAILED", 1, "a"))
    plan = plan_compensation(store.entries("s"))
    assert [s.step for s in plan.to_compensate] == [1]


def test_intent_without_outcome_is_unknown_and_not_compensated() -> None:
    store = journal(
        ("INTENT", 1, "a"), ("EXECUTED", 1, "a"),
        ("INTENT", 2, "charge"),
    )  # fmt: skip
    plan = plan_compensation(store.entries("s"))
    assert [s.step for s in plan.to_compensate] == [1]
    assert [(u.step, u.tool, u.intent_seq) for u in plan.unknown] == [(2, "charge", 4)]


def test_a_retried_attempt_that_executed_makes_the_step_known() -> None:
    store = MemoryJournalStore(clock=lambda: AT)
    store.append(EntryDraft.new("s", Phase.INTENT, step=1, attempt=1, tool="a"))
    store.append(EntryDraft.new("s", Phase.INTENT, step=1, attempt=2, tool="a"))
    store.append(EntryDraft.new("s", Phase.EXECUTED, step=1, attempt=2, tool="a"))
    plan = plan_compensation(store.entries("s"))
    assert [s.step for s in plan.to_compensate] == [1] and plan.unknown == []


def test_with_the_tools_kinds_a_plain_step_is_live_not_planned_for_undo() -> None:
    store = journal(
        ("INTENT", 1, "a"), ("EXECUTED", 1, "a"),
        ("INTENT", 2, "plain"), ("EXECUTED", 2, "plain"),
    )  # fmt: skip
    plan = plan_compensation(store.entries("s"), lambda name: name != "plain")
    assert [s.step for s in plan.to_compensate] == [1]
    assert [(s.step, s.tool) for s in plan.not_compensable] == [(2, "plain")]
    assert [s.step for s in plan_compensation(store.entries("s")).to_compensate] == [2, 1]
