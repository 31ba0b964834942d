"""The one signature check of every signed human action (`check_signed`: an Ed25519
signature or a passkey's assertion, the key's owner and validity, `issued_at`), and the
checks of a bound decision beyond its request (its freshness, and the step's approval
requirement: who, groups, the requester, a second approval). Pure and deterministic, so
the workflow runs them in its own code; called by approvals.judge and
resolutions.judge_resolution."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sagacity.approval._actors import RESERVED_ACTOR_PREFIX, is_reserved_actor
from sagacity.approval._models import ApprovalDecision, ApprovalRequest, RefusalReason, Verdict
from sagacity.approval._passkey_check import PasskeyFailure, check_assertion
from sagacity.approval._policy import ApprovalRequirement
from sagacity.approval._registry import EnrolledKey
from sagacity.approval._registry_file import KeyLookup
from sagacity.approval._signed_action import SignedAction
from sagacity.approval._signing import verify_signature
from sagacity.approval._statements import statement_bytes
from sagacity.journal._entry import parse_timestamp
from sagacity.text._lookalikes import skeleton

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


def check_signature(
    pending: ApprovalRequest, decision: ApprovalDecision, context: JudgeContext
) -> EnrolledKey | Verdict | None:
    """The enrolled key that signed `decision`, a refusal, or None for an unsigned
    decision where no registry is configured."""
    if decision.signed and decision.tool is None:
        return Verdict.refuse(
            RefusalReason.WRONG_TOOL,
            "a signed decision names the tool it approves; sign the statement with its tool",
        )
    signed = check_signed(
        decision,
        context.lookup,
        now=context.now,
        not_before=pending.requested_at,
        after_what=f"step {pending.step} asked for approval",
    )
    if not isinstance(signed, EnrolledKey):
        return signed
    expiry = context.requirement.expires_after_seconds
    issued = parse_timestamp(decision.issued_at or "")
    if expiry is not None and issued < context.now - timedelta(seconds=expiry):
        return Verdict.refuse(
            RefusalReason.STALE_STATEMENT,
            f"the statement is older than the {expiry:g}s this approval stays valid; "
            "sign a new decision",
        )
    return signed


def check_person(action: SignedAction) -> Verdict | None:
    """A refusal when the action names nobody, or one of the saga's own actors (read by
    skeleton, so look-alike letters do not get through); None when it names a person."""
    if not action.person.strip():
        return Verdict.refuse(
            RefusalReason.EMPTY_APPROVER,
            f"the {action.KIND} names no {action.SIGNER}; send it with your identity",
        )
    if is_reserved_actor(action.person):
        return Verdict.refuse(
            RefusalReason.RESERVED_APPROVER,
            f"names that read as {RESERVED_ACTOR_PREFIX!r}… (whatever the characters used to "
            "write it) belong to the saga itself (timeouts, cancellations); send the "
            f"{action.KIND} with your own identity",
        )
    return None


def check_signed(
    claim: SignedAction,
    lookup: KeyLookup | None,
    *,
    now: datetime,
    not_before: datetime,
    after_what: str,
) -> EnrolledKey | Verdict | None:
    """The enrolled key that signed `claim`'s statement, a refusal, or None for an
    unsigned action where no registry is configured. One check for every kind of signed
    action: the signature (Ed25519, or a passkey's assertion) over the statement rebuilt
    from the action's fields, the key's owner and validity at `now`, and `issued_at`
    neither in the future (beyond the clock skew) nor before `not_before` (what it
    answers)."""
    how = claim.SIGN_HOW
    configured = lookup is not None and lookup.configured
    if not claim.signed:
        if not configured:
            return None
        return Verdict.refuse(
            RefusalReason.UNSIGNED,
            f"this saga's worker has an approver registry, so only signed statements count; {how}",
        )
    if (
        (claim.signature is None) == (claim.passkey is None)
        or claim.key_id is None
        or claim.issued_at is None
    ):
        return Verdict.refuse(
            RefusalReason.BAD_SIGNATURE,
            "a signed statement carries issued_at, key_id and one signature (an Ed25519 "
            "signature or a passkey assertion) together; sign it with "
            "sagacity.sign_action or sagacity.approval._passkeys",
        )
    if lookup is None or not lookup.configured:
        return Verdict.refuse(
            RefusalReason.UNKNOWN_KEY,
            f"the statement is signed by key {claim.key_id}, but this saga's worker has no "
            "approver registry to check it against; configure one (SAGACITY_APPROVERS) or "
            "send it unsigned",
        )
    statement = claim.statement()
    key = lookup.key
    if key is None or key.key_id != claim.key_id:
        return Verdict.refuse(
            RefusalReason.UNKNOWN_KEY,
            f"key {claim.key_id} is not in the approver registry (version "
            f"{lookup.version}); enroll it with `sagacity keys enroll` first",
        )
    if claim.passkey is not None:
        checked = check_assertion(claim.passkey, key, statement)
        if isinstance(checked, PasskeyFailure):
            return Verdict.refuse(checked.reason, checked.detail)
    elif key.passkey is not None:
        return Verdict.refuse(
            RefusalReason.WRONG_KEY_KIND,
            f"key {key.key_id} is a passkey: its statements carry a WebAuthn assertion "
            "(sagacity.approval._passkeys), not an Ed25519 signature",
        )
    elif not verify_signature(key.public_key, statement_bytes(statement), claim.signature or ""):
        return Verdict.refuse(
            RefusalReason.BAD_SIGNATURE,
            f"the signature does not verify with key {key.key_id} over this statement "
            f"(every field it names, {statement['type']}); sign what you send, "
            "unchanged",
        )
    problem = key.invalid_at(now)
    if problem is not None:
        return Verdict.refuse(RefusalReason.KEY_NOT_VALID, f"{problem}; use a valid key")
    if key.approver != claim.person:
        return Verdict.refuse(
            RefusalReason.APPROVER_MISMATCH,
            f"the statement names {claim.person!r} but key {key.key_id} is enrolled to "
            f"{key.approver!r}; a key speaks only for its owner",
        )
    try:
        issued = parse_timestamp(claim.issued_at)
    except ValueError as exc:
        return Verdict.refuse(RefusalReason.STALE_STATEMENT, f"issued_at: {exc}")
    if issued > now + CLOCK_SKEW:
        return Verdict.refuse(
            RefusalReason.STALE_STATEMENT,
            f"the statement is issued at {claim.issued_at}, in the future of the saga's "
            "clock; check your machine's clock and sign again",
        )
    if issued < not_before - CLOCK_SKEW:
        return Verdict.refuse(
            RefusalReason.STALE_STATEMENT,
            f"the statement is issued at {claim.issued_at}, before {after_what}; review "
            "what the saga shows now and sign a new statement",
        )
    return key


def check_requirement(
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
    same = skeleton(approver)  # one person whatever the spelling (case, look-alikes)
    if req.separate_from_requester and requester is not None and same == skeleton(requester):
        return Verdict.refuse(
            RefusalReason.REQUESTER_CANNOT_APPROVE,
            f"{approver!r} requested this saga and cannot approve its steps (separation of "
            "duties); ask another approver",
        )
    if same in {skeleton(who) for who in context.counted}:
        return Verdict.refuse(
            RefusalReason.DUPLICATE_APPROVER,
            f"{approver!r} has already approved this step; it still needs "
            f"{req.needs(len(context.counted))} (distinct people, whatever key they use)",
        )
    return None
