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
from dataclasses import dataclass, field
from datetime import datetime, timedelta
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

from sagacity.approval_policy import ApprovalRequirement
from sagacity.canonical import JsonValue, payload_sha256
from sagacity.decision_statement import decision_statement, statement_bytes
from sagacity.entry import parse_timestamp
from sagacity.lookalikes import may_read_as, skeleton
from sagacity.registry import EnrolledKey, KeyLookup
from sagacity.signing import verify_signature

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
    coerced ("yes" is not True, "3" is not step 3).

    Signed decisions add `issued_at`, `key_id` and `signature`: the signature covers the
    statement rebuilt from these fields (sagacity.decision_statement), so every field
    that names what is decided is signed."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    saga_id: _SagaId | None = None
    step: Annotated[int, Field(ge=1)]
    tool: Annotated[str, Field(max_length=256)] | None = None
    payload_sha256: _Hash = ""
    approver: _Approver = ""
    approve: bool
    reason: _Reason = ""
    issued_at: Annotated[str, Field(max_length=32)] | None = None
    key_id: Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")] | None = None
    signature: Annotated[str, Field(max_length=128)] | None = None

    @property
    def signed(self) -> bool:
        return self.signature is not None or self.key_id is not None

    def statement(self) -> dict[str, Any]:
        """The statement this decision's signature must cover."""
        return decision_statement(
            saga_id=self.saga_id or "",
            step=self.step,
            tool=self.tool or "",
            payload_sha256=self.payload_sha256,
            approve=self.approve,
            approver=self.approver,
            reason=self.reason,
            issued_at=self.issued_at or "",
            key_id=self.key_id or "",
        )


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


_DECISION_SHAPE = (
    "send a JSON object with saga_id, step (int), payload_sha256 (64 lowercase hex), "
    "approver (non-empty string), optional tool and reason, and for a signed decision "
    "issued_at, key_id and signature"
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


CLOCK_SKEW = timedelta(minutes=5)
"""How far a statement's `issued_at` may be ahead of the saga's clock, or before the
request it answers, and still count (machines' clocks differ)."""


@dataclass(frozen=True)
class JudgeContext:
    """What the judge needs beyond the request and the decision, for sagas that bind
    decisions fully (every saga started since signed decisions exist).

    `lookup` is the worker's answer about the key the decision names (None only for
    tests of the unsigned path); `counted` the identities whose approvals already count
    towards the quorum."""

    now: datetime
    lookup: KeyLookup | None = None
    requirement: ApprovalRequirement = field(default_factory=ApprovalRequirement)
    requester: str | None = None
    counted: frozenset[str] = frozenset()


def judge(
    pending: ApprovalRequest | None,
    decision: ApprovalDecision,
    *,
    allowed_approvers: frozenset[str] | None = None,
    already_decided: bool = False,
    context: JudgeContext | None = None,
) -> Verdict:
    """Accept `decision` only if it names the pending request exactly. Fail closed.

    Checks, in order: not already decided; a request is pending; the saga and the step
    match (with a `context`, the saga id is required and a given tool must match too); a
    hash is given and equals the request's byte for byte; the approver is non-empty and
    not one of the saga's own actors; with a `context`, the signature (required when a
    registry is configured), the key's owner and validity, and the requirement (who,
    groups, the requester, a second approval by the same person); when
    `allowed_approvers` is set, the approver is in it (an empty set allows nobody).
    Rejections go through the same checks as approvals (a rejection of a request the
    sender has not seen is refused too, so nobody can cancel a step with a decision about
    something else), except the two that only concern approvals: the requester may reject
    their own step, and one rejection rejects. A refused decision leaves the request
    pending; the caller journals the refusal.
    """
    refusal = _check_request(pending, decision, already_decided, bound=context is not None)
    if refusal is not None:
        return refusal
    assert pending is not None
    approver, key = decision.approver, None
    if context is not None:
        signed = _check_signature(pending, decision, context)
        if isinstance(signed, Verdict):
            return signed
        if signed is not None:
            approver, key = signed.approver, signed
        refusal = _check_requirement(decision, approver, key, context)
        if refusal is not None:
            return refusal
    if allowed_approvers is not None and approver not in allowed_approvers:
        return Verdict.refuse(
            RefusalReason.APPROVER_NOT_ALLOWED,
            f"approver {approver!r} is not on this saga's list of allowed "
            "approvers; ask an allowed approver to decide",
        )
    return Verdict.accept(approver, key)


def _check_request(
    pending: ApprovalRequest | None,
    decision: ApprovalDecision,
    already_decided: bool,
    *,
    bound: bool,
) -> Verdict | None:
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
    if bound and decision.tool is not None and decision.tool != pending.tool:
        return Verdict.refuse(
            RefusalReason.WRONG_TOOL,
            f"the decision is about tool {decision.tool[:80]!r} but step {pending.step} "
            f"calls {pending.tool!r}; review the pending step and decide on it",
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
    if bound and decision.saga_id is None:
        return Verdict.refuse(
            RefusalReason.WRONG_SAGA,
            "the decision names no saga; send it with the saga_id of the pending approval "
            "(a decision that names no saga could be replayed to another one)",
        )
    return None


def _check_signature(
    pending: ApprovalRequest, decision: ApprovalDecision, context: JudgeContext
) -> EnrolledKey | Verdict | None:
    """The enrolled key that signed `decision`, a refusal, or None for an unsigned
    decision where no registry is configured."""
    lookup = context.lookup
    configured = lookup is not None and lookup.configured
    if not decision.signed:
        if not configured:
            return None
        return Verdict.refuse(
            RefusalReason.UNSIGNED,
            "this saga's worker has an approver registry, so only signed decisions count; "
            "decide with `sagacity approve --key YOUR_KEY_FILE` or SagaClient(signer=...)",
        )
    if decision.signature is None or decision.key_id is None or decision.issued_at is None:
        return Verdict.refuse(
            RefusalReason.BAD_SIGNATURE,
            "a signed decision carries issued_at, key_id and signature together; "
            "sign it with sagacity.decision_statement.signed_decision",
        )
    if decision.tool is None:
        return Verdict.refuse(
            RefusalReason.WRONG_TOOL,
            "a signed decision names the tool it approves; sign the statement with its tool",
        )
    if lookup is None or not lookup.configured:
        return Verdict.refuse(
            RefusalReason.UNKNOWN_KEY,
            f"the decision is signed by key {decision.key_id}, but this saga's worker has no "
            "approver registry to check it against; configure one (SAGACITY_APPROVERS) or "
            "send the decision unsigned",
        )
    key = lookup.key
    if key is None or key.key_id != decision.key_id:
        return Verdict.refuse(
            RefusalReason.UNKNOWN_KEY,
            f"key {decision.key_id} is not in the approver registry (version "
            f"{lookup.version}); enroll it with `sagacity keys enroll` before deciding",
        )
    if not verify_signature(
        key.public_key, statement_bytes(decision.statement()), decision.signature
    ):
        return Verdict.refuse(
            RefusalReason.BAD_SIGNATURE,
            f"the signature does not verify with key {key.key_id} over this decision's "
            "statement (saga, step, tool, hash, decision, approver, reason, issued_at, key); "
            "sign the decision you send, unchanged",
        )
    problem = key.invalid_at(context.now)
    if problem is not None:
        return Verdict.refuse(RefusalReason.KEY_NOT_VALID, f"{problem}; decide with a valid key")
    if key.approver != decision.approver:
        return Verdict.refuse(
            RefusalReason.APPROVER_MISMATCH,
            f"the decision says approver {decision.approver!r} but key {key.key_id} is "
            f"enrolled to {key.approver!r}; a key decides only for its owner",
        )
    try:
        issued = parse_timestamp(decision.issued_at)
    except ValueError as exc:
        return Verdict.refuse(RefusalReason.STALE_STATEMENT, f"issued_at: {exc}")
    if issued > context.now + CLOCK_SKEW:
        return Verdict.refuse(
            RefusalReason.STALE_STATEMENT,
            f"the statement is issued at {decision.issued_at}, in the future of the saga's "
            "clock; check your machine's clock and sign again",
        )
    if issued < pending.requested_at - CLOCK_SKEW:
        return Verdict.refuse(
            RefusalReason.STALE_STATEMENT,
            f"the statement is issued at {decision.issued_at}, before step {pending.step} "
            "asked for approval; review the pending request and sign a new decision",
        )
    expiry = context.requirement.expires_after_seconds
    if expiry is not None and issued < context.now - timedelta(seconds=expiry):
        return Verdict.refuse(
            RefusalReason.STALE_STATEMENT,
            f"the statement is older than the {expiry:g}s this approval stays valid; "
            "sign a new decision",
        )
    return key


def _check_requirement(
    decision: ApprovalDecision, approver: str, key: EnrolledKey | None, context: JudgeContext
) -> Verdict | None:
    req = context.requirement
    if req.approvers is not None and approver not in req.approvers:
        return Verdict.refuse(
            RefusalReason.APPROVER_NOT_ALLOWED,
            f"approver {approver!r} may not decide this step (the policy allows "
            f"{req.who()}); ask an allowed approver",
        )
    if req.groups is not None:
        groups = set(key.groups) if key is not None else set()
        if not groups & set(req.groups):
            where = "" if key is not None else " (an unsigned decision has no registry groups)"
            return Verdict.refuse(
                RefusalReason.NOT_IN_GROUP,
                f"approver {approver!r} is not in {' or '.join(req.groups) or 'any allowed group'}"
                f"{where}; this step needs {req.needs(len(context.counted))}",
            )
    if not decision.approve:
        return None
    requester = context.requester
    if req.separate_from_requester and requester is not None and approver == requester:
        return Verdict.refuse(
            RefusalReason.REQUESTER_CANNOT_APPROVE,
            f"{approver!r} requested this saga and cannot approve its steps (separation of "
            "duties); ask another approver",
        )
    if approver in context.counted:
        return Verdict.refuse(
            RefusalReason.DUPLICATE_APPROVER,
            f"{approver!r} has already approved this step; it still needs "
            f"{req.needs(len(context.counted))} (distinct people, whatever key they use)",
        )
    return None


__all__ = [
    "APPROVER_MAX_CHARS",
    "REASON_MAX_CHARS",
    "RESERVED_ACTOR_PREFIX",
    "ApprovalDecision",
    "ApprovalRequest",
    "JudgeContext",
    "Refusal",
    "RefusalReason",
    "Verdict",
    "approval_hash",
    "approval_payload",
    "is_reserved_actor",
    "judge",
    "parse_decision",
]
