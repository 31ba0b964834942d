"""Compensation planning, pure: which steps to undo and which need a human.

One planner, `plan_steps`, over facts about steps. `plan_compensation` feeds it the
journal's entries (for auditors, the CLI and tests); the workflow's compensator feeds it
the outcomes it recorded. Both therefore agree on the set and the order: every EXECUTED
step of a compensable tool without a COMPENSATED entry, newest EXECUTED first; steps with
an INTENT and no outcome are reported as unknown and never compensated.

What the journal alone cannot say is a tool's kind (the entries name the tool, not
whether it can be undone): pass `compensable` (for instance `compensable_in(toolbox)`)
to get exactly the workflow's plan. Without it every executed tool is assumed
compensable. Nothing here imports Temporal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from sagacity.journal._canonical import JsonValue
from sagacity.journal._entry import JournalEntry
from sagacity.journal._phases import LIFECYCLE_STEP, Phase
from sagacity.tools._decorators import ToolKind
from sagacity.tools._toolbox import Toolbox

Compensable = Callable[[str], bool]
"""Whether the tool of this name declares a compensation."""


@dataclass(frozen=True, slots=True)
class StepFact:
    """One thing known about a tool step: a journal entry, or the workflow's record of an
    outcome. Only INTENT, EXECUTED, FAILED and COMPENSATED matter to the plan."""

    step: int
    tool: str
    phase: Phase
    seq: int | None = None
    """Where it was journaled (None: the recorder knows the fact but not the seq)."""
    compensable: bool | None = None
    """The tool's kind when the recorder knows it; None defers to `compensable`."""
    input: JsonValue = None
    result: JsonValue = None


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
    intent_seq: int | None
    """None only when planned from a workflow outcome that lost its INTENT reference."""


@dataclass(frozen=True, slots=True)
class CompensationPlan:
    to_compensate: list[ExecutedStep] = field(default_factory=list)
    """EXECUTED steps of compensable tools without COMPENSATED, in reverse seq order."""
    unknown: list[UnknownStep] = field(default_factory=list)
    """Steps needing a human, in step order."""
    not_compensable: list[ExecutedStep] = field(default_factory=list)
    """EXECUTED steps of tools that cannot be undone (their effect stays live), in step
    order."""


@dataclass
class _StepState:
    tool: str = ""
    intent: bool = False
    intent_seq: int | None = None
    executed: StepFact | None = None
    failed: bool = False
    compensated: bool = False


def compensable_in(toolbox: Toolbox) -> Compensable:
    """The kinds of a toolbox as a predicate; a tool it does not know is not compensable
    (its compensation could not run anyway)."""
    kinds = {spec.name: spec.kind for spec in toolbox}
    return lambda name: kinds.get(name) is ToolKind.COMPENSABLE


def plan_steps(
    facts: Iterable[StepFact], compensable: Compensable | None = None
) -> CompensationPlan:
    """The plan from facts in any order (streamed once).

    COMPENSATION_FAILED does not count as compensated: a later run (after a human fixed
    the cause) may try again. Facts of step 0 (lifecycle) are ignored. A step's kind is
    the fact's own when it has one, else `compensable(tool)`, else compensable.
    """
    steps: dict[int, _StepState] = {}
    for fact in facts:
        if fact.step == LIFECYCLE_STEP:
            continue
        state = steps.setdefault(fact.step, _StepState())
        state.tool = state.tool or fact.tool
        if fact.phase is Phase.INTENT and not state.intent:
            state.intent, state.intent_seq = True, fact.seq
        elif fact.phase is Phase.EXECUTED:
            state.executed = fact
        elif fact.phase is Phase.FAILED:
            state.failed = True
        elif fact.phase is Phase.COMPENSATED:
            state.compensated = True
    undo: list[ExecutedStep] = []
    live: list[ExecutedStep] = []
    for step, state in sorted(steps.items()):
        ran = state.executed
        if ran is None or state.compensated:
            continue
        executed = ExecutedStep(step, ran.tool, ran.seq or 0, ran.input, ran.result)
        kind = ran.compensable
        if kind is None:
            kind = compensable(ran.tool) if compensable is not None else True
        (undo if kind else live).append(executed)
    undo.sort(key=lambda e: (e.seq, e.step), reverse=True)
    unknown = [
        UnknownStep(step, s.tool, s.intent_seq)
        for step, s in sorted(steps.items())
        if s.intent and s.executed is None and not s.failed
    ]
    return CompensationPlan(undo, unknown, live)


def entry_fact(entry: JournalEntry) -> StepFact:
    """A journal entry as a fact (input and result are read only where the plan needs
    them: an EXECUTED entry is what its compensation receives)."""
    if entry.phase is Phase.EXECUTED:
        return StepFact(
            entry.step, entry.tool, entry.phase, entry.seq, input=entry.input, result=entry.result
        )
    return StepFact(entry.step, entry.tool, entry.phase, entry.seq)


def plan_compensation(
    entries: Iterable[JournalEntry], compensable: Compensable | None = None
) -> CompensationPlan:
    """Plan from a saga's journal entries (any order; streamed once). Pass `compensable`
    (e.g. `compensable_in(toolbox)`) for the workflow's exact plan; see `plan_steps`."""
    return plan_steps((entry_fact(e) for e in entries), compensable)
