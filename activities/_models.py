"""Inputs and outputs of the saga activities: one pydantic model in, one out.

These cross Temporal's data converter (pydantic) and are recorded in workflow history,
so every journal write an activity makes comes back as an EntryRef: history then holds
the seq and hash of each step, a second witness beside the journal.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sagacity.approval._policy import ApprovalRequirement
from sagacity.journal._phases import Phase
from sagacity.tools._decorators import ToolKind
from sagacity.tools._payload import Payload


class _Model(BaseModel):
    """Extra fields are ignored, not refused: these models are recorded in workflow
    history, and a replay of an older history must still decode after a field is retired."""

    model_config = ConfigDict(frozen=True, extra="ignore")


TOOL_FAILED = "ToolFailed"
"""ApplicationError type of a run_tool activity whose tool failed: its first detail is the
step's ToolOutcome."""

INVALID_ARGUMENTS_KEY = "__invalid_json__"
"""Key under which a model adapter passes arguments that were not a JSON object, so the
runner refuses the call with a message the model can act on (and the raw text is kept)."""
REFUSED_ARGUMENTS_KEY = "__refused_arguments__"
"""Key under which a model turn's arguments over the saga's bounds (too deep, too large)
are replaced by the reason, so the runner refuses the call and the workflow never has to
decode or carry the oversized value."""


class WorkerBound(BaseModel):
    """An activity input that names the worker identity its saga is pinned to (None: any,
    as in histories from before sagas were pinned)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    worker: str | None = None


class ToolCall(_Model):
    """One call of a tool as the model or a plan asked for it (arguments unvalidated)."""

    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    call_id: str | None = None
    """The model's id for this call, echoed back with the result."""


class EntryRef(_Model):
    """Where a journal entry landed."""

    seq: int
    hash: str
    phase: Phase
    checkpoint: str | None = None
    """For a saga's close on a worker with a log key: the signed checkpoint of the chain
    (sagacity.tlog._checkpoint), so the saga's Temporal result carries it too."""


class OutcomeKind(StrEnum):
    EXECUTED = "EXECUTED"
    FAILED = "FAILED"
    REFUSED = "REFUSED"
    """Invalid call (unknown tool, bad arguments): nothing ran."""
    NEEDS_APPROVAL = "NEEDS_APPROVAL"
    """Irreversible tool without an approval: nothing ran, AWAITING_APPROVAL journaled."""
    UNKNOWN = "UNKNOWN"
    """An earlier attempt journaled INTENT but no outcome: not run again, needs a human."""
    FENCED = "FENCED"
    """The step was fenced off by compensation: a late attempt that must not apply."""


class RunToolInput(WorkerBound):
    saga_id: str
    step: int
    call: ToolCall
    allowed_tools: list[str] | None = None
    approved_sha256: str | None = None
    """Set once a human approved: the activity re-checks it against the payload it runs."""
    model_result_limit: int = 16_000
    """Tool results longer than this (canonical characters) are cut for the model; the
    journal always keeps the full result."""


class ToolOutcome(_Model):
    """What one attempt at a step came to (sagacity.run_tool's result)."""

    kind: OutcomeKind
    tool: str
    """The tool as the call named it (cut: a refused call's name may be anything)."""
    step: int
    tool_kind: ToolKind | None = None
    payload: Payload | None = None
    """The call's one value: exactly what ran or is to be approved, with its hash (None
    when the call was refused before it validated)."""
    result: Any = None
    """The result for the model (possibly cut; see result_truncated)."""
    result_truncated: bool = False
    result_unjournalable: bool = False
    """The tool ran but its result could not be journaled (not JSON, too large): it is
    journaled EXECUTED with a stand-in, so it is compensated, and the saga fails."""
    error: str | None = None
    intent: EntryRef | None = None
    outcome: EntryRef | None = None
    replayed: bool = False
    """True when a retry found the outcome already journaled and did not run the tool."""
    approval: ApprovalRequirement | None = None
    """What the tool's policy needs before this call may run (NEEDS_APPROVAL only)."""

    @model_validator(mode="after")
    def _approvable(self) -> Self:
        """A call waits for approval of a payload: one that names none is refused (no
        approver could be shown what would run)."""
        if self.kind is OutcomeKind.NEEDS_APPROVAL and self.payload is None:
            raise ValueError("a NEEDS_APPROVAL outcome must carry the payload to approve")
        return self


class JournalEventInput(WorkerBound):
    saga_id: str
    phase: Phase
    step: int = 0
    attempt: int = 1
    tool: str = ""
    input: Any = None
    result: Any = None
    error: str | None = None
    actor: str | None = None


class CompensateInput(WorkerBound):
    """Which step to undo. Nothing else: the activity reads what ran (arguments, result)
    from the journal's EXECUTED entry, never from the workflow."""

    saga_id: str
    step: int
    tool: str


class FenceInput(WorkerBound):
    saga_id: str
    step: int


class CompensationOutcome(_Model):
    """A compensation that finished (a failing one raises, and the workflow journals
    COMPENSATION_FAILED when its retries run out)."""

    step: int
    tool: str
    entry: EntryRef


class ChatMessage(_Model):
    """A chat-completions style message kept in workflow state."""

    role: str
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None


class ModelSettings(_Model):
    provider: str = "scripted"
    """'scripted' plays `script`; 'openai' calls an OpenAI-compatible server."""
    model: str | None = None
    base_url: str | None = None
    script: list[ModelTurn] = Field(default_factory=list)
    temperature: float | None = None


class ModelTurn(_Model):
    """What the model answered: tool calls to run in order, or a final answer."""

    tool_calls: list[ToolCall] = Field(default_factory=list)
    final: str | None = None
    waits_for_approval: list[str] = Field(default_factory=list)
    """Tools called here that wait for approval (irreversible): for honest activity
    summaries only; the tool runner decides."""


class ModelTurnInput(WorkerBound):
    saga_id: str
    settings: ModelSettings
    messages: list[ChatMessage]
    allowed_tools: list[str] | None = None
    turn: int = 0
    """How many model calls this saga made before this one (a scripted model's index)."""


class CheckPlanInput(WorkerBound):
    """A whole plan, checked before its first step runs."""

    saga_id: str
    plan: list[ToolCall]
    allowed_tools: list[str] | None = None


class KeyLookupInput(WorkerBound):
    """The key a decision (or a start's requester claim) names; None asks only whether
    the worker has an approver registry."""

    key_id: str | None = None


class ResumeCheckInput(WorkerBound):
    """A saga's state handed to a new run, checked against the journal before it is used."""

    saga_id: str
    head_seq: int | None = None
    head_hash: str | None = None


class PlanProblem(_Model):
    index: int
    """0-based position in the plan."""
    tool: str
    error: str


class PlanCheck(_Model):
    problems: list[PlanProblem] = Field(default_factory=list)
    waits_for_approval: list[str] = Field(default_factory=list)
    """Tools of the plan that wait for approval (for activity summaries, as in ModelTurn)."""


ModelSettings.model_rebuild()


class ResolveStepInput(WorkerBound):
    """A person's resolution of a step whose outcome is unknown, to record in the journal:
    RESOLVED with their statement, then the outcome they vouch for (EXECUTED with the
    result they report, or FAILED for an effect that did not take place)."""

    saga_id: str
    step: int
    tool: str
    happened: bool
    attempt: int
    """The RESOLVED entry's attempt: one more than the step's resolutions so far."""
    actor: str
    statement: dict[str, Any]
    signature: str | None = None
    result: Any = None
    reason: str = ""
    evidence: dict[str, Any] = Field(default_factory=dict)
    """The registry version and key the action was judged with, journaled with it."""
    passkey: dict[str, Any] | None = None
    """The passkey's WebAuthn assertion, when the statement was signed with one
    (journaled beside the statement, in place of `signature`)."""


class ResolveStepOutcome(_Model):
    resolved: EntryRef | None = None
    """The RESOLVED entry (None when the journal disagreed: nothing was written)."""
    outcome: EntryRef | None = None
    """The outcome now in the journal: the one written for the person, or the one that
    was already there."""
    disagrees: str | None = None
    """Set when the journal already held an outcome the saga did not know of (an append
    that landed late), or holds no INTENT for a step said to have happened: what it
    holds. The person's resolution is not applied."""
    compensable: bool | None = None
    """Whether the step's tool declares a compensation (the worker's toolbox says)."""
