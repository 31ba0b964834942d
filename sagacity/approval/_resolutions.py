"""Resolving dirty state: what a person may do about a saga that needs a human, and the
judge that decides whether their action counts.

A saga is dirty when a step's outcome is unknown (INTENT journaled, no outcome: a worker
died mid-call, an attempt timed out) or when a compensation still failed after its
retries. Such a saga compensates what it knows, then waits for a person (status
NEEDS_HUMAN) instead of closing with a flag. The actions:

- `happened` (an unknown step): the effect took place — the step is recorded as done with
  the result the person reports, and compensated like any executed step (the saga is
  undoing its work) when its tool has a compensation;
- `did_not_happen` (an unknown step): nothing to undo;
- `retry_compensation` (a failed compensation): run it again, same idempotency key;
- `accept` (the saga): close with the remaining dirty steps recorded as accepted. The
  action names exactly the steps the person saw dirty, so an acceptance cannot cover a
  step that became dirty after they looked.

Every action names the saga and the person, and is judged here like an approval: against
what is dirty now, the saga's resolution policy (who may resolve, their groups, never the
saga's requester) and, where the worker has an approver registry, a signature over the
action's statement (a SignedAction of kind "resolution"): an Ed25519 signature, or a
passkey's WebAuthn assertion whose challenge is the SHA-256 of that statement
(sagacity.approval._passkey_signing), checked by the one check decisions use
(sagacity.approval._signed_checks.check_signed).
Pure: no I/O, no clock (times are passed in), so the workflow runs it deterministically.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sagacity._errors import SagacityError
from sagacity.approval._actors import APPROVER_MAX_CHARS, CONTROL_CHARACTERS
from sagacity.approval._models import (
    REASON_MAX_CHARS,
    SAGA_ID_MAX_CHARS,
    Refusal,
    RefusalReason,
    Verdict,
)
from sagacity.approval._policy import MAX_NAMES
from sagacity.approval._registry_file import KeyLookup
from sagacity.approval._signed_action import SignedAction
from sagacity.approval._signed_checks import check_person, check_signed
from sagacity.approval._statements import result_digest
from sagacity.journal._bounds import MAX_ARGS_BYTES, check_value
from sagacity.journal._canonical import canonical_bytes
from sagacity.text._lookalikes import skeleton

DEFAULT_DEADLINE_SECONDS = 30 * 24 * 3600
"""How long a dirty saga waits for a person before it closes UNRESOLVED."""
MAX_DEADLINE_SECONDS = 366 * 24 * 3600
MAX_STEP = 2**31
"""Steps are counted from 1 and bounded by max_steps (1,000): anything larger is junk."""

Action = Literal["happened", "did_not_happen", "retry_compensation", "accept"]
ACTIONS: tuple[Action, ...] = ("happened", "did_not_happen", "retry_compensation", "accept")


class DirtyKind(StrEnum):
    """Why a step needs a person. Stored in the journal, so the names are stable."""

    UNKNOWN_OUTCOME = "UNKNOWN_OUTCOME"
    """INTENT journaled and no outcome: the effect may or may not have taken place."""
    COMPENSATION_FAILED = "COMPENSATION_FAILED"
    """It ran, and its compensation still failed after its retries: its effect is live."""


APPLIES: dict[DirtyKind, tuple[Action, ...]] = {
    DirtyKind.UNKNOWN_OUTCOME: ("happened", "did_not_happen", "accept"),
    DirtyKind.COMPENSATION_FAILED: ("retry_compensation", "accept"),
}
"""The actions that apply to each kind of dirty step."""

_Names = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=256)]], Field(max_length=MAX_NAMES)
]


class ResolutionPolicy(BaseModel):
    """Who may resolve a saga's dirty state, and how long it waits for them."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    resolvers: _Names | None = None
    """Identities that may resolve. None: the saga's `approvers` when it lists them, else
    anyone the other rules allow (with an approver registry: anyone holding an enrolled,
    valid key)."""
    groups: _Names | None = None
    """Registry groups, one of which a resolver must be in (None: no group needed)."""
    separate_from_requester: bool = True
    """The saga's requester cannot resolve its dirty state (they would vouch for the
    outcome of their own request)."""
    deadline_seconds: Annotated[float, Field(gt=0, le=MAX_DEADLINE_SECONDS)] = (
        DEFAULT_DEADLINE_SECONDS
    )
    """How long the saga waits for a person once it needs one; then it closes
    UNRESOLVED (still flagged as needing a human)."""

    def effective(self, approvers: list[str] | None) -> ResolutionPolicy:
        """The policy with the saga's approvers as resolvers when none are named."""
        if self.resolvers is not None or approvers is None:
            return self
        return self.model_copy(update={"resolvers": list(approvers)})


_SHAPE = (
    "send a JSON object with saga_id, action (one of happened, did_not_happen, "
    "retry_compensation, accept), step (int; for accept: steps, the list of dirty steps "
    "you accept, and a reason), actor (your identity), optional reason and, for happened, "
    "result; signed: issued_at, key_id and signature"
)


class Resolution(SignedAction):
    """A person's action on a saga's dirty state: a signed action of kind "resolution".
    Strict, like a decision: "2" is not step 2, and no field that is not listed is taken."""

    KIND: ClassVar[str] = "resolution"
    SIGNER: ClassVar[str] = "actor"
    SIGN_HOW: ClassVar[str] = (
        "resolve with `sagacity resolve --key YOUR_KEY_FILE` or SagaClient(signer=...)"
    )

    saga_id: Annotated[str, Field(max_length=SAGA_ID_MAX_CHARS)] | None = None
    action: Action
    step: Annotated[int, Field(ge=1, le=MAX_STEP)] | None = None
    steps: (
        Annotated[list[Annotated[int, Field(ge=1, le=MAX_STEP)]], Field(max_length=1_000)] | None
    ) = None
    result: Any = None
    reason: Annotated[str, Field(max_length=REASON_MAX_CHARS)] = ""
    actor: Annotated[str, Field(max_length=APPROVER_MAX_CHARS)] = ""

    def about(self) -> dict[str, Any]:
        """Which saga, which action on which step (or, to accept, exactly which steps the
        person saw dirty), the SHA-256 of the result they report (empty when none), why."""
        return {
            "saga_id": self.saga_id or "",
            "action": self.action,
            "step": self.step,
            "steps": self.steps,
            "result_sha256": result_digest(self.result),
            "reason": self.reason,
        }

    def shape_problem(self) -> str | None:
        if CONTROL_CHARACTERS.search(self.actor):
            return "field 'actor' must not contain control or bidirectional-control characters"
        if any(ord(c) < 32 or ord(c) == 127 for c in self.saga_id or ""):
            return "field 'saga_id' must not contain control characters"
        if self.action == "accept":
            if self.step is not None or self.steps is None:
                return "accept names `steps` (the dirty steps you accept), not `step`"
            if not self.reason.strip():
                return "accept needs a reason: it is journaled with the acceptance"
        elif self.step is None or self.steps is not None:
            return f"{self.action} names one `step`"
        if self.result is not None and self.action != "happened":
            return f"only `happened` reports a result, not {self.action}"
        return None


def parse_resolution(raw: object) -> Resolution | Refusal:
    """A raw signal or update body as a resolution, or a MALFORMED refusal naming the field."""
    if not isinstance(raw, Mapping):
        return _malformed(f"the resolution is a {type(raw).__name__}, not a JSON object")
    try:
        check_value(raw.get("result"), "field 'result'", max_bytes=MAX_ARGS_BYTES)
        # What is signed, hashed and journaled must have one canonical form (no NaN, no
        # integer beyond 2**53): refused here, never inside the statement.
        canonical_bytes(raw.get("result"), what="field 'result'")
        parsed = Resolution.model_validate(dict(raw))
    except SagacityError as exc:
        return _malformed(str(exc))
    except ValidationError as exc:
        problems = [
            f"field {'.'.join(str(p) for p in e['loc']) or '(body)'!r}: {e['msg']}"
            for e in exc.errors(include_url=False, include_input=False)[:5]
        ]
        return _malformed("; ".join(problems))
    problem = parsed.shape_problem()
    return parsed if problem is None else _malformed(problem)


def _malformed(detail: str) -> Refusal:
    return Refusal(
        reason=RefusalReason.MALFORMED, detail=f"malformed resolution: {detail}; {_SHAPE}"
    )


@dataclass(frozen=True)
class DeskView:
    """What the judge needs to know of the saga's dirty state, as the workflow holds it."""

    saga_id: str
    waiting_since: datetime | None
    """When the saga began waiting for a person (None: it is not waiting)."""
    dirty: Mapping[int, DirtyKind] = field(default_factory=dict)
    """Dirty steps now, by step."""
    resolved: Mapping[int, str] = field(default_factory=dict)
    """Steps already resolved, with who resolved them and how (for the refusal)."""
    in_progress: frozenset[int] = frozenset()
    """Steps with an accepted action the saga has not finished applying."""
    status: str = ""


@dataclass(frozen=True)
class ResolutionContext:
    now: datetime
    policy: ResolutionPolicy
    lookup: KeyLookup | None = None
    requester: str | None = None


def judge_resolution(view: DeskView, action: Resolution, context: ResolutionContext) -> Verdict:
    """Accept `action` only if it applies to what is dirty now and its actor may take it.
    Fail closed; a refusal says what was wrong and what to do."""
    refusal = _check_target(view, action)
    if refusal is not None:
        return refusal
    refusal = check_person(action)
    if refusal is not None:
        return refusal
    assert view.waiting_since is not None
    signed = check_signed(
        action,
        context.lookup,
        now=context.now,
        not_before=view.waiting_since,
        after_what="the saga began waiting for a person",
    )
    if isinstance(signed, Verdict):
        return signed
    actor = signed.approver if signed is not None else action.actor
    policy = context.policy
    if policy.resolvers is not None and actor not in policy.resolvers:
        return Verdict.refuse(
            RefusalReason.RESOLVER_NOT_ALLOWED,
            f"{actor!r} may not resolve this saga (its resolvers: "
            f"{', '.join(policy.resolvers) or 'nobody'}); ask one of them",
        )
    if policy.groups is not None:
        groups = set(signed.groups) if signed is not None else set()
        if not groups & set(policy.groups):
            return Verdict.refuse(
                RefusalReason.NOT_IN_GROUP,
                f"{actor!r} is not in {' or '.join(policy.groups) or 'any allowed group'}, "
                "which resolving this saga needs",
            )
    requester = context.requester
    if (
        policy.separate_from_requester
        and requester is not None
        and skeleton(actor) == skeleton(requester)
    ):
        return Verdict.refuse(
            RefusalReason.REQUESTER_CANNOT_RESOLVE,
            f"{actor!r} requested this saga and cannot vouch for its outcome (separation of "
            "duties); ask another person",
        )
    return Verdict.accept(actor, signed)


def _check_target(view: DeskView, action: Resolution) -> Verdict | None:
    if action.saga_id is None or action.saga_id != view.saga_id:
        named = "names no saga" if action.saga_id is None else f"names saga {action.saga_id!r}"
        return Verdict.refuse(
            RefusalReason.WRONG_SAGA,
            f"the resolution {named} but was sent to saga {view.saga_id!r}; send it with the "
            "saga_id of the saga it is about",
        )
    if view.waiting_since is None:
        return Verdict.refuse(
            RefusalReason.NOT_WAITING,
            f"saga {view.saga_id!r} is not waiting for a person (status {view.status}); "
            "dirty steps can be resolved once it shows NEEDS_HUMAN (`sagacity dirty`)",
        )
    if action.action == "accept":
        seen = sorted(set(action.steps or []))
        dirty = sorted(view.dirty)
        if view.in_progress:
            return Verdict.refuse(
                RefusalReason.IN_PROGRESS,
                f"an action on step(s) {sorted(view.in_progress)} is being applied; wait for "
                "it, then look again (`sagacity dirty`) before accepting what is left",
            )
        if seen != dirty:
            return Verdict.refuse(
                RefusalReason.STALE_VIEW,
                f"the acceptance names steps {seen} but the dirty steps are now {dirty}; "
                "look again (`sagacity dirty`) and accept what it shows",
            )
        return None
    step = action.step
    assert step is not None
    if step in view.in_progress:
        return Verdict.refuse(
            RefusalReason.IN_PROGRESS,
            f"an action on step {step} is being applied; wait for it, then look again",
        )
    kind = view.dirty.get(step)
    if kind is None:
        if step in view.resolved:
            return Verdict.refuse(
                RefusalReason.ALREADY_RESOLVED,
                f"step {step} was already resolved ({view.resolved[step]}); a second "
                "resolution changes nothing",
            )
        return Verdict.refuse(
            RefusalReason.NOT_DIRTY,
            f"step {step} is not dirty (dirty: {sorted(view.dirty) or 'none'}); only a step "
            "whose outcome is unknown or whose compensation failed can be resolved",
        )
    if action.action not in APPLIES[kind]:
        fits = " or ".join(a.replace("_", "-") for a in APPLIES[kind] if a != "accept")
        return Verdict.refuse(
            RefusalReason.NOT_APPLICABLE,
            f"step {step} is dirty as {kind.value}, which {action.action.replace('_', '-')} "
            f"does not resolve; use {fits}, or accept it (close --accept)",
        )
    return None


__all__ = [
    "ACTIONS",
    "APPLIES",
    "DEFAULT_DEADLINE_SECONDS",
    "Action",
    "DeskView",
    "DirtyKind",
    "Resolution",
    "ResolutionContext",
    "ResolutionPolicy",
    "judge_resolution",
    "parse_resolution",
]
