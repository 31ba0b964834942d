"""Compensation planning, pure: which steps to undo and which need a human.

Derived from the journal alone, so the workflow, the CLI and an auditor reach the same
answer from the same evidence.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sagacity.canonical import JsonValue
from sagacity.entry import JournalEntry
from sagacity.phases import LIFECYCLE_STEP, Phase


@dataclass(frozen=True, slots=True)
class ExecutedStep:
    """A step whose effect is live: what its compensation needs."""

    step: int
    tool: str
    seq: int
    input: JsonValue
    result: JsonValue


@dataclass(frozen=True, slots=True)
class UnknownStep:
    """A step with INTENT but neither EXECUTED nor FAILED: its effect may or may not have
    happened, so it is never compensated blindly."""

    step: int
    tool: str
    intent_seq: int


@dataclass(frozen=True, slots=True)
class CompensationPlan:
    to_compensate: list[ExecutedStep] = field(default_factory=list)
    """EXECUTED steps without COMPENSATED, in reverse seq order."""
    unknown: list[UnknownStep] = field(default_factory=list)
    """Steps needing a human, in seq order."""


@dataclass
class _StepState:
    tool: str = ""
    intent_seq: int | None = None
    executed: JournalEntry | None = None
    failed: bool = False
    compensated: bool = False


def plan_compensation(entries: Iterable[JournalEntry]) -> CompensationPlan:
    """Plan from a saga's entries (any order; streamed once).

    COMPENSATION_FAILED does not count as compensated: a later run (after a human fixed
    the cause) may try again. Entries of step 0 (lifecycle) are ignored.
    """
    steps: dict[int, _StepState] = {}
    for entry in entries:
        if entry.step == LIFECYCLE_STEP:
            continue
        state = steps.setdefault(entry.step, _StepState())
        state.tool = state.tool or entry.tool
        if entry.phase is Phase.INTENT and state.intent_seq is None:
            state.intent_seq = entry.seq
        elif entry.phase is Phase.EXECUTED:
            state.executed = entry
        elif entry.phase is Phase.FAILED:
            state.failed = True
        elif entry.phase is Phase.COMPENSATED:
            state.compensated = True
    executed = [
        ExecutedStep(s.executed.step, s.tool, s.executed.seq, s.executed.input, s.executed.result)
        for s in steps.values()
        if s.executed is not None and not s.compensated
    ]
    executed.sort(key=lambda e: e.seq, reverse=True)
    unknown = [
        UnknownStep(step, s.tool, s.intent_seq)
        for step, s in sorted(steps.items())
        if s.intent_seq is not None and s.executed is None and not s.failed
    ]
    return CompensationPlan(executed, unknown)
