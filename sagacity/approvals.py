"""Approvals bound to the payload, and the judge that decides whether a decision counts.

An irreversible step waits for a human who has seen its exact payload. What is hashed is
the RFC 8785 canonical JSON of `{"tool": <tool name>, "args": <validated JSON args>}`
(`approval_payload`), SHA-256, lowercase hex (`approval_hash`): the tool name is inside
the hash so an approval of `refund(amount=5)` cannot authorise `wire(amount=5)`, and the
args are the validated, defaults-filled dump that will actually run.

Everything here is pure (no I/O, no clock: times are passed in) so the workflow can call it
deterministically and tests can cover every path. The judge fails closed: a decision is
accepted only when every check passes, and a refusal says what was wrong and what to do.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Self

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from sagacity.canonical import JsonValue, payload_sha256
from sagacity.lookalikes import may_read_as, skeleton

APPROVER_MAX_CHARS = 256
RESERVED_ACTOR_PREFIX = "sagacity:"
"""Actors the saga itself uses (`sagacity:timeout`, `sagacity:cancelled`...). No human
decision may carry one, so the journal never shows a person's decision as the system's."""
_RESERVED_WORD = RESERVED_ACTOR_PREFIX.rstrip(":")


def is_reserved_actor(name: str) -> bool:
    """Whether `name` reads as one of the saga's own actors: compared by its skeleton, so
    fullwidth letters, a Cyrillic "a" (U+0430) or a zero-width space does not get through."""
    if skeleton(name).startswith(RESERVED_ACTOR_PREFIX):
        return True
    # Written with anything outside ASCII, a name whose letters could read as "sagacity"
    # is refused whatever follows them: look-alike colons and letters are too many to
    # list (U+A4FD, U+0903, a Latin script g...). ASCII names keep the exact rule, so
    # "sagacity-ops" stays a person's name.
    return not name.isascii() and may_read_as(name, _RESERVED_WORD)


REASON_MAX_CHARS = 2_000
SAGA_ID_MAX_CHARS = 256

_HEX64 = re.compile(r"[0-9a-f]{64}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def approval_payload(tool: str, args: JsonValue) -> dict[str, Any]:
    """The value an approval hash covers: the tool name and its validated JSON args."""
    return {"tool": tool, "args": args}


def approval_hash(tool: str, args: JsonValue) -> str:
    """SHA-256 (lowercase hex) of the canonical `approval_payload(tool, args)`; what a CLI
    recomputes to show an approver the hash of the payload on screen."""
    return payload_sha256(approval_payload(tool, args))


def _hash_or_empty(value: str) -> str:
    # Empty means "no hash given": it parses, and the judge refuses it as MISSING_HASH,
    # which tells the approver what they actually forgot.
    if not value.strip():
        return ""
    if not _HEX64.fullmatch(value):
        raise ValueError("must be 64 lowercase hex characters, as shown by the pending request")
    return value


def _identifier(value: str) -> str:
    # Approvers and saga ids are journaled as actors/ids, which refuse control characters.
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters")
    return _text(value)


def _text(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text (no lone surrogates)") from None
    return value


_SagaId = Annotated[str, Field(max_length=SAGA_ID_MAX_CHARS), AfterValidator(_identifier)]
_Hash = Annotated[str, Field(max_length=64), AfterValidator(_hash_or_empty)]
_Approver = Annotated[str, Field(max_length=APPROVER_MAX_CHARS), AfterValidator(_identifier)]
_Reason = Annotated[str, Field(max_length=REASON_MAX_CHARS), AfterValidator(_text)]


class ApprovalRequest(BaseModel):
    """A pending approval: one irreversible step of one saga, with the payload and the
    hash a decision must carry. Its hash is checked against its payload on construction,
    so a request can never show one payload and accept approvals for another."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    saga_id: Annotated[str, Field(min_length=1, max_length=SAGA_ID_MAX_CHARS)]
    step: Annotated[int, Field(ge=1)]
    tool: Annotated[str, Field(min_length=1, max_length=256)]
    payload: dict[str, Any]
    payload_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    requested_at: AwareDatetime
    deadline: AwareDatetime | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.payload_sha256 != approval_hash(self.tool, self.payload):
            raise ValueError(
                "payload_sha256 is not the hash of {tool, args}; build requests with "
                "ApprovalRequest.for_call"
            )
        if self.deadline is not None and self.deadline < self.requested_at:
            raise ValueError("deadline is before requested_at")
        return self

    @classmethod
    def for_call(
        cls,
        saga_id: str,
        step: int,
        tool: str,
        payload: dict[str, Any],
        requested_at: datetime,
        deadline: datetime | None = None,
    ) -> ApprovalRequest:
        """The request for running `tool` with `payload` (its validated JSON args)."""
        return cls(
            saga_id=saga_id,
            step=step,
            tool=tool,
            payload=payload,
            payload_sha256=approval_hash(tool, payload),
            requested_at=requested_at,
            deadline=deadline,
        )

    def expired(self, now: datetime) -> bool:
        """True when `now` (an aware datetime the caller read) is past the deadline."""
        return self.deadline is not None and now >= self.deadline


class ApprovalDecision(BaseModel):
    """A human's answer to a pending request. Strict types: a security decision is not
    coerced ("yes" is not True, "3" is not step 3)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    saga_id: _SagaId | None = None
    step: Annotated[int, Field(ge=1)]
    payload_sha256: _Hash = ""
    approver: _Approver = ""
    approve: bool
    reason: _Reason = ""


class RefusalReason(StrEnum):
    """Why a decision did not count. Stored in the journal, so the names are stable."""

    MALFORMED = "MALFORMED"
    NO_PENDING_REQUEST = "NO_PENDING_REQUEST"
    WRONG_SAGA = "WRONG_SAGA"
    WRONG_STEP = "WRONG_STEP"
    MISSING_HASH = "MISSING_HASH"
    HASH_MISMATCH = "HASH_MISMATCH"
    EMPTY_APPROVER = "EMPTY_APPROVER"
    APPROVER_NOT_ALLOWED = "APPROVER_NOT_ALLOWED"
    ALREADY_DECIDED = "ALREADY_DECIDED"
    RESERVED_APPROVER = "RESERVED_APPROVER"


class Refusal(BaseModel):
    """A refused decision: evidence to journal, and a sentence for the person who sent it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: RefusalReason
    detail: str


class Verdict(BaseModel):
    """The judge's answer: accepted, or refused with a reason. Never both."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    accepted: bool
    refusal: Refusal | None = None

    @model_validator(mode="after")
    def _one_of(self) -> Self:
        if self.accepted == (self.refusal is not None):
            raise ValueError("a verdict is either accepted or carries a refusal")
        return self

    @classmethod
    def accept(cls) -> Verdict:
        return cls(accepted=True)

    @classmethod
    def refuse(cls, reason: RefusalReason, detail: str) -> Verdict:
        return cls(accepted=False, refusal=Refusal(reason=reason, detail=detail))


_DECISION_SHAPE = (
    "send a JSON object with step (int), payload_sha256 (64 lowercase hex), approver "
    "(non-empty string), optional saga_id and reason"
)


def parse_decision(raw: object, *, approve: bool | None) -> ApprovalDecision | Refusal:
    """Turn a raw signal body into a decision, or a MALFORMED refusal naming the field.

    Signals are taken as raw JSON because a body the converter could not decode would be
    dropped, and a dropped decision leaves no evidence. `approve` is the verb of the signal
    (approve/reject) when it has one; None means the body must say `"approve": true|false`.
    A body that contradicts its signal's verb is malformed. A missing or empty hash or
    approver parses, so the judge can refuse it with the precise reason.
    """
    if isinstance(raw, ApprovalDecision):
        raw = raw.model_dump()
    if not isinstance(raw, Mapping):
        return Refusal(
            reason=RefusalReason.MALFORMED,
            detail=f"the decision is a {type(raw).__name__}, not a JSON object; {_DECISION_SHAPE}",
        )
    data = dict(raw)
    if approve is not None:
        given = data.get("approve", approve)
        if given is not approve:
            verb = "approve" if approve else "reject"
            return Refusal(
                reason=RefusalReason.MALFORMED,
                detail=f"field 'approve' is {given!r} but the decision was sent as {verb}; "
                f"send it as the signal you mean, without a contradicting 'approve' field",
            )
        data["approve"] = approve
    try:
        return ApprovalDecision.model_validate(data)
    except ValidationError as exc:
        problems = [
            f"field {'.'.join(str(p) for p in e['loc']) or '(body)'!r}: {e['msg']}"
            for e in exc.errors(include_url=False, include_input=False)[:5]
        ]
        return Refusal(
            reason=RefusalReason.MALFORMED,
            detail=f"malformed decision: {'; '.join(problems)}; {_DECISION_SHAPE}",
        )


def judge(
    pending: ApprovalRequest | None,
    decision: ApprovalDecision,
    *,
    allowed_approvers: frozenset[str] | None = None,
    already_decided: bool = False,
) -> Verdict:
    """Accept `decision` only if it names the pending request exactly. Fail closed.

    Checks, in order: not already decided; a request is pending; the saga (when named) and
    the step match; a hash is given and equals the request's byte for byte; the approver
    is non-empty and, when `allowed_approvers` is set, in it (an empty set allows nobody).
    Rejections go through the same checks as approvals: a rejection of a request the
    sender has not seen (wrong step, stale hash) is refused too, so that nobody can cancel
    a saga's step with a decision about something else. A refused decision leaves the
    request pending; the caller journals the refusal.
    """
    if already_decided:
        return Verdict.refuse(
            RefusalReason.ALREADY_DECIDED,
            "this approval was already decided; a duplicate or late decision changes nothing",
        )
    if pending is None:
        return Verdict.refuse(
            RefusalReason.NO_PENDING_REQUEST,
            f"no approval is pending, so the decision for step {decision.step} was ignored; "
            "query the saga's pending approval and decide once one is shown",
        )
    if decision.saga_id is not None and decision.saga_id != pending.saga_id:
        return Verdict.refuse(
            RefusalReason.WRONG_SAGA,
            f"the decision names saga {decision.saga_id!r} but was sent to saga "
            f"{pending.saga_id!r}; send it to the saga it is about",
        )
    if decision.step != pending.step:
        return Verdict.refuse(
            RefusalReason.WRONG_STEP,
            f"the decision is for step {decision.step} but step {pending.step} "
            f"({pending.tool}) is pending; review that step's payload and decide on it",
        )
    if not decision.payload_sha256.strip():
        return Verdict.refuse(
            RefusalReason.MISSING_HASH,
            f"the decision carries no payload hash; review the pending payload of step "
            f"{pending.step} and send the payload_sha256 shown with it",
        )
    # Bytes, not str: compare_digest refuses non-ASCII str, and a refusal must not raise.
    given = decision.payload_sha256.encode("utf-8", "surrogatepass")
    if not hmac.compare_digest(given, pending.payload_sha256.encode("ascii")):
        # The expected hash is deliberately not echoed: copying it from an error message
        # would approve a payload nobody looked at.
        return Verdict.refuse(
            RefusalReason.HASH_MISMATCH,
            f"the payload hash {decision.payload_sha256[:12]}… does not match the pending "
            f"payload of step {pending.step}; it may have changed since it was reviewed. "
            "Review the pending payload and send its hash",
        )
    if not decision.approver.strip():
        return Verdict.refuse(
            RefusalReason.EMPTY_APPROVER,
            "the decision names no approver; send it with your approver identity",
        )
    if is_reserved_actor(decision.approver):
        return Verdict.refuse(
            RefusalReason.RESERVED_APPROVER,
            f"approver names that read as {RESERVED_ACTOR_PREFIX!r}… (whatever the characters "
            "used to write it) belong to the saga itself (timeouts, cancellations); send the "
            "decision with your own identity",
        )
    if allowed_approvers is not None and decision.approver not in allowed_approvers:
        return Verdict.refuse(
            RefusalReason.APPROVER_NOT_ALLOWED,
            f"approver {decision.approver!r} is not on this saga's list of allowed "
            "approvers; ask an allowed approver to decide",
        )
    return Verdict.accept()


__all__ = [
    "APPROVER_MAX_CHARS",
    "REASON_MAX_CHARS",
    "RESERVED_ACTOR_PREFIX",
    "ApprovalDecision",
    "ApprovalRequest",
    "Refusal",
    "RefusalReason",
    "Verdict",
    "approval_hash",
    "approval_payload",
    "is_reserved_actor",
    "judge",
    "parse_decision",
]
