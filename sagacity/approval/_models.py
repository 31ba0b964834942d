"""What approvals are made of: the request, the decision, a refusal, a verdict, and the
payload hash that binds them. Pure data; the judge is in sagacity.approval._judge."""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Self

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)

from sagacity.approval._actors import (
    APPROVER_MAX_CHARS,
    CONTROL_CHARACTERS,
    RESERVED_ACTOR_PREFIX,
    is_reserved_actor,
)
from sagacity.approval._registry import EnrolledKey
from sagacity.approval._signed_action import SignedAction
from sagacity.journal._canonical import JsonValue, payload_sha256

REASON_MAX_CHARS = 2_000
SAGA_ID_MAX_CHARS = 256

_HEX64 = re.compile(r"[0-9a-f]{64}")
_C0 = re.compile(r"[\x00-\x1f\x7f]")


def is_sha256_hex(value: str) -> bool:
    """Whether `value` is a SHA-256 as the saga spells it: 64 lowercase hex characters."""
    return _HEX64.fullmatch(value) is not None


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
    if not is_sha256_hex(value):
        raise ValueError("must be 64 lowercase hex characters, as shown by the pending request")
    return value


def _identifier(value: str) -> str:
    # Saga ids are journaled as ids, which refuse control characters (a saga's id is the
    # starter's; a decision must be able to name whatever id it was started with).
    if _C0.search(value):
        raise ValueError("must not contain control characters")
    return _text(value)


def _person(value: str) -> str:
    # Approvers are journaled as actors and shown to people: no name that displays as
    # another.
    if CONTROL_CHARACTERS.search(value):
        raise ValueError("must not contain control or bidirectional-control characters")
    return _text(value)


def _text(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text (no lone surrogates)") from None
    return value


_SagaId = Annotated[str, Field(max_length=SAGA_ID_MAX_CHARS), AfterValidator(_identifier)]
_Hash = Annotated[str, Field(max_length=64), AfterValidator(_hash_or_empty)]
_Approver = Annotated[str, Field(max_length=APPROVER_MAX_CHARS), AfterValidator(_person)]
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


class ApprovalDecision(SignedAction):
    """A human's answer to a pending request: a signed action of kind "decision".

    Signed decisions add `issued_at`, `key_id` and `signature` (or a passkey's
    assertion): the signature covers the statement rebuilt from these fields
    (SignedAction.statement), so every field that names what is decided is signed."""

    KIND: ClassVar[str] = "decision"
    SIGNER: ClassVar[str] = "approver"
    SIGN_HOW: ClassVar[str] = (
        "decide with `sagacity approve --key YOUR_KEY_FILE` or SagaClient(signer=...)"
    )

    saga_id: _SagaId | None = None
    step: Annotated[int, Field(ge=1)]
    tool: Annotated[str, Field(max_length=256)] | None = None
    payload_sha256: _Hash = ""
    approver: _Approver = ""
    approve: bool
    reason: _Reason = ""

    def about(self) -> dict[str, Any]:
        return {
            "saga_id": self.saga_id or "",
            "step": self.step,
            "tool": self.tool or "",
            "payload_sha256": self.payload_sha256,
            "decision": "approve" if self.approve else "reject",
            "reason": self.reason,
        }


class RefusalReason(StrEnum):
    """Why a decision (or a resolution of dirty state) did not count. Stored in the
    journal, so the names are stable."""

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
    WRONG_TOOL = "WRONG_TOOL"
    UNSIGNED = "UNSIGNED"
    UNKNOWN_KEY = "UNKNOWN_KEY"
    BAD_SIGNATURE = "BAD_SIGNATURE"
    KEY_NOT_VALID = "KEY_NOT_VALID"
    APPROVER_MISMATCH = "APPROVER_MISMATCH"
    STALE_STATEMENT = "STALE_STATEMENT"
    NOT_IN_GROUP = "NOT_IN_GROUP"
    DUPLICATE_APPROVER = "DUPLICATE_APPROVER"
    REQUESTER_CANNOT_APPROVE = "REQUESTER_CANNOT_APPROVE"
    REGISTRY_ROLLED_BACK = "REGISTRY_ROLLED_BACK"
    # Passkey (WebAuthn) decisions: what the assertion failed (sagacity.approval._passkey_check).
    PASSKEY_MALFORMED = "PASSKEY_MALFORMED"
    WRONG_KEY_KIND = "WRONG_KEY_KIND"
    WRONG_CREDENTIAL = "WRONG_CREDENTIAL"
    WRONG_CEREMONY = "WRONG_CEREMONY"
    WRONG_CHALLENGE = "WRONG_CHALLENGE"
    WRONG_ORIGIN = "WRONG_ORIGIN"
    WRONG_RP = "WRONG_RP"
    USER_NOT_PRESENT = "USER_NOT_PRESENT"
    # Resolutions of dirty state (sagacity.approval._resolutions) share the vocabulary above.
    NOT_WAITING = "NOT_WAITING"
    NOT_DIRTY = "NOT_DIRTY"
    ALREADY_RESOLVED = "ALREADY_RESOLVED"
    NOT_APPLICABLE = "NOT_APPLICABLE"
    IN_PROGRESS = "IN_PROGRESS"
    STALE_VIEW = "STALE_VIEW"
    RESOLVER_NOT_ALLOWED = "RESOLVER_NOT_ALLOWED"
    REQUESTER_CANNOT_RESOLVE = "REQUESTER_CANNOT_RESOLVE"
    TOO_MANY_ACTIONS = "TOO_MANY_ACTIONS"
    JOURNAL_DISAGREES = "JOURNAL_DISAGREES"
    """The journal holds an outcome the saga did not know of (an append that landed
    late): the step is not dirty, and the action is not applied."""


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
    approver: str | None = None
    """The identity the decision is recorded under: the registry's owner of the key for a
    signed decision, the declared name otherwise."""
    key: EnrolledKey | None = None

    @model_validator(mode="after")
    def _one_of(self) -> Self:
        if self.accepted == (self.refusal is not None):
            raise ValueError("a verdict is either accepted or carries a refusal")
        return self

    @classmethod
    def accept(cls, approver: str | None = None, key: EnrolledKey | None = None) -> Verdict:
        return cls(accepted=True, approver=approver, key=key)

    @classmethod
    def refuse(cls, reason: RefusalReason, detail: str) -> Verdict:
        return cls(accepted=False, refusal=Refusal(reason=reason, detail=detail))


__all__ = [
    "APPROVER_MAX_CHARS",
    "CONTROL_CHARACTERS",
    "REASON_MAX_CHARS",
    "RESERVED_ACTOR_PREFIX",
    "SAGA_ID_MAX_CHARS",
    "ApprovalDecision",
    "ApprovalRequest",
    "Refusal",
    "RefusalReason",
    "Verdict",
    "approval_hash",
    "approval_payload",
    "is_reserved_actor",
    "is_sha256_hex",
]
