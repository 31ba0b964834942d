"""The saga's public contract: its input, result, queries and decisions.

Clients (the CLI, user code, tests) import these to start sagas and read results; they
are pydantic models carried by Temporal's pydantic data converter.

Compatibility rule: every model here ignores fields it does not know. They are decoded
from workflow history on replay (an older or newer version's fields must not fail a
replay) and by clients of other versions (a result with one more field must still
decode). Strictness lives at the door instead: a saga's first run refuses unknown start
fields, internal state and values over the bounds of sagacity.journal._bounds (see
workflows.start_input), with an error naming the field.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sagacity.activities._models import ChatMessage, EntryRef, ModelSettings, ModelTurn, ToolCall
from sagacity.approval._policy import ApprovalRequirement
from sagacity.approval._registry_marks import RegistryMark
from sagacity.approval._resolutions import DirtyKind, ResolutionPolicy
from sagacity.journal._phases import SagaStatus, StepStatus
from sagacity.tools._decorators import ToolKind

__all__ = [
    "ChatMessage",
    "CompensationReport",
    "DecisionResult",
    "DirtyStep",
    "ModelSettings",
    "ModelTurn",
    "PendingApproval",
    "RequesterClaim",
    "ResolutionPolicy",
    "ResolutionReport",
    "ResolutionResult",
    "SagaCarry",
    "SagaInput",
    "SagaOptions",
    "SagaResult",
    "SagaState",
    "SagaView",
    "StepReport",
    "StepStatus",
    "ToolCall",
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class SagaOptions(_Model):
    """How a saga runs its steps: limits, timeouts, retries and who may approve. The
    saga API (workflows.saga) takes these; `SagaInput` adds what AgentSaga's own loop
    needs.

    Every limit has an upper bound: the saga's state (step reports, the conversation)
    travels in Temporal payloads, which are capped at about 2 MB, and a timeout beyond a
    datetime's range would fail the workflow task instead of the saga."""

    allowed_tools: list[str] | None = None
    """Tools this saga may call (None: every tool of the worker's toolbox)."""
    approval_timeout_seconds: float = Field(default=7 * 24 * 3600, gt=0, le=366 * 24 * 3600)
    approvers: list[str] | None = None
    """Allow-list of approver identities; None allows any non-empty identity."""
    approval: ApprovalRequirement | None = None
    """Tightens every irreversible tool's approval policy for this saga (allow-lists
    intersected, the larger quorum, the shorter expiry); it can never loosen one."""
    requester: RequesterClaim | None = None
    """Who asks for this saga (they cannot approve its steps). Where the worker has an
    approver registry it must be signed by the requester's key (see
    sagacity.decision_statement.signed_request), or the saga is refused."""
    max_steps: int = Field(default=50, ge=1, le=1_000)
    tool_timeout_seconds: float = Field(default=300, gt=0, le=7 * 24 * 3600)
    tool_heartbeat_timeout_seconds: float = Field(default=30, gt=0, le=24 * 3600)
    tool_attempts: int = Field(default=10, ge=1, le=1_000)
    """Attempts for infrastructure failures (journal unreachable); a tool's own failure is
    never retried: it fails the saga."""
    compensation_attempts: int = Field(default=5, ge=1, le=1_000)
    model_result_limit: int = Field(default=16_000, ge=100, le=200_000)
    continue_as_new_after_steps: int = Field(default=100, ge=1, le=1_000)
    """Steps per workflow run before the saga continues as new with its state."""
    resolution: ResolutionPolicy | None = None
    """Who may resolve the saga's dirty state (an unknown outcome, a failed compensation)
    and how long it waits for them (default: 30 days, the saga's approvers if it lists
    them, never its requester)."""


class RequesterClaim(_Model):
    """The requester of a saga, and (signed) the proof that they asked for it."""

    requester: str = Field(min_length=1, max_length=256)
    saga_id: str | None = Field(default=None, max_length=256)
    issued_at: str | None = Field(default=None, max_length=32)
    key_id: str | None = Field(default=None, max_length=16)
    signature: str | None = Field(default=None, max_length=128)


class SagaInput(SagaOptions):
    """How to run one AgentSaga: the saga options plus its goal (for the model) or its
    plan. The saga id is the workflow id."""

    goal: str | None = None
    """The prompt for the model; ignored when `plan` is given."""
    plan: list[ToolCall] | None = None
    """A fixed list of tool calls, run in order without any model."""
    model: ModelSettings = Field(default_factory=ModelSettings)
    system_prompt: str | None = None
    max_invalid_calls: int = Field(default=3, ge=1, le=100)
    """Consecutive invalid model calls (unknown tool, bad arguments) that fail the saga."""
    max_conversation_chars: int = Field(default=400_000, ge=10_000, le=1_000_000)
    """Budget of the conversation sent to the model (and carried across continue-as-new),
    in UTF-8 bytes despite the name (kept for compatibility): payload limits are bytes."""


class StepReport(_Model):
    """One tool call as the saga saw it, with the journal entries that record it."""

    step: int
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    tool_kind: ToolKind | None = None
    status: StepStatus
    intent_seq: int | None = None
    intent_hash: str | None = None
    seq: int | None = None
    hash: str | None = None
    error: str | None = None
    payload_sha256: str | None = None
    """The hash of the payload approval was asked for: an irreversible step's only."""
    approver: str | None = None
    result: Any = None
    replayed: bool = False
    dirty_since: datetime | None = None
    """When the step became dirty (its outcome unknown, or its compensation failed)."""
    resolved_by: str | None = None
    """Who resolved the step's dirty state, if anyone did."""


class CompensationReport(_Model):
    step: int
    tool: str
    ok: bool
    seq: int | None = None
    hash: str | None = None
    error: str | None = None


class PendingApproval(_Model):
    """What an approver must see: the exact payload, its canonical form and its hash."""

    saga_id: str
    step: int
    tool: str
    payload: dict[str, Any]
    canonical_payload: str
    payload_sha256: str
    requested_at: datetime
    deadline: datetime | None = None
    requirement: ApprovalRequirement | None = None
    """What the step's approval policy needs (None in sagas from before policies)."""
    approvals: list[str] = Field(default_factory=list)
    """Who has approved so far (towards the quorum)."""
    needs: str | None = None
    """What is still needed, in words: "1 of 2 approvals from finance"."""
    signatures_required: bool = False
    """The worker has an approver registry: only signed decisions count."""


class DirtyStep(_Model):
    """A step that needs a person: what it is, what is known, since when, what applies."""

    step: int
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    kind: DirtyKind
    known: str
    """What the journal says, in words (INTENT at seq 5 and no outcome; the refund failed
    after 5 attempts: ...)."""
    since: datetime | None = None
    intent_seq: int | None = None
    seq: int | None = None
    """The step's latest journal entry that made it dirty (COMPENSATION_FAILED), if any."""
    actions: list[str] = Field(default_factory=list)
    """What may be done about it: happened, did_not_happen, retry_compensation, accept."""


class SagaView(_Model):
    saga_id: str
    status: SagaStatus
    needs_human: bool
    steps: int
    first_failure: str | None = None
    pending_approval: PendingApproval | None = None
    dirty: list[DirtyStep] = Field(default_factory=list)
    """Steps that need a person (listed while the saga waits for one, and after)."""
    human_deadline: datetime | None = None
    """When a saga waiting for a person closes UNRESOLVED if nobody resolved it."""


class ResolutionReport(_Model):
    """One accepted action on the saga's dirty state: what, by whom, with what effect."""

    action: str
    step: int | None = None
    """The step acted on (None for an acceptance, which names `steps`)."""
    steps: list[int] = Field(default_factory=list)
    actor: str
    reason: str = ""
    outcome: str
    """What it did: compensated, compensation failed again, recorded as done, nothing to
    undo, accepted."""
    seq: int | None = None
    hash: str | None = None
    """The RESOLVED entry that records it."""
    at: datetime | None = None


class ResolutionResult(ResolutionReport):
    """Answer of the `resolve` update once the action is applied and journaled."""

    dirty: list[int] = Field(default_factory=list)
    """Steps still dirty afterwards."""
    status: SagaStatus | None = None


class DecisionResult(_Model):
    """Answer of the `decide` update once the decision is journaled."""

    accepted: bool
    step: int
    approve: bool
    seq: int | None = None
    hash: str | None = None
    approver: str | None = None
    """The identity the decision was recorded under (the key's owner when signed)."""
    approvals: int | None = None
    quorum: int | None = None
    needs: str | None = None
    """What the step still needs after this approval (None once decided)."""


class SagaResult(_Model):
    saga_id: str
    status: SagaStatus
    final_answer: str | None = None
    steps: list[StepReport] = Field(default_factory=list)
    compensations: list[CompensationReport] = Field(default_factory=list)
    unknown_outcome_steps: list[int] = Field(default_factory=list)
    first_failure: str | None = None
    needs_human: bool = False
    head_seq: int | None = None
    head_hash: str | None = None
    checkpoint: str | None = None
    """The worker's signed checkpoint of the closed chain (a C2SP note), when the worker
    holds a log key: evidence of the journal's end kept in Temporal, outside the database."""
    dirty: list[DirtyStep] = Field(default_factory=list)
    """Steps still dirty at the close (UNRESOLVED), or accepted as dirty (ACCEPTED)."""
    resolutions: list[ResolutionReport] = Field(default_factory=list)
    """What people did about the saga's dirty state, in order, and who."""
    reports_compacted: bool = False
    """True when step reports were shortened (arguments, results and errors left out of
    the oldest ones) to keep the result within Temporal's payload limit; the journal has
    every step whole."""


class SagaState(_Model):
    """What a saga hands to the next run of its workflow on continue-as-new: enough to
    go on, and to compensate. Results are not carried (the journal has them;
    compensations read the EXECUTED entry), which keeps it small however long the saga
    runs."""

    next_step: int
    steps: list[StepReport] = Field(default_factory=list)
    """Every step as reported: the saga's one record of its steps (what compensation
    plans from, what needs a human)."""
    decided_steps: list[int] = Field(default_factory=list)
    refusals: dict[int, int] = Field(default_factory=dict)
    head: EntryRef | None = None
    worker: str | None = None
    """The worker identity (toolbox and journal) the saga is pinned to."""
    from_run: str | None = None
    """The run that handed this state over: the next run takes it only if Temporal says
    that run is the one it continues (a state in a starter's input cannot name a run id
    that did not exist when it was written)."""
    requester: str | None = None
    """The requester as checked at the saga's start (kept: later runs do not re-check)."""
    resolution_refusals: dict[int, int] = Field(default_factory=dict)
    """Refused resolutions counted per bucket (their journal attempt numbers go on)."""
    registry_seen: RegistryMark | None = None
    """The newest approver registry (version, SHA-256) the saga has seen, also in answers
    no entry records (the registry a refused decision was judged with): the next run
    refuses an older one, so a registry file put back after continue-as-new cannot undo
    a revocation. Bounded by RegistryMark. A forged lower value cannot help: every
    registry answer also carries the newest registry the journal records."""


class SagaCarry(SagaState):
    """AgentSaga's state across continue-as-new: the saga's, plus its loop's."""

    plan_index: int = 0
    model_turns: int = 0
    invalid_in_a_row: int = 0
    messages: list[ChatMessage] = Field(default_factory=list)


class SagaRunInput(SagaInput):
    """What the workflow run itself takes: the public input plus the state a saga hands
    to its own next run. Internal: a first run refuses a carry (it must come from
    continue-as-new, which Temporal records and no caller can set)."""

    carry: SagaCarry | None = None


SagaRunInput.model_rebuild()
