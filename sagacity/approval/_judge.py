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
from collections.abc import Mapping

from pydantic import ValidationError

from sagacity.approval._models import (
    APPROVER_MAX_CHARS,
    REASON_MAX_CHARS,
    RESERVED_ACTOR_PREFIX,
    SAGA_ID_MAX_CHARS,
    ApprovalDecision,
    ApprovalRequest,
    Refusal,
    RefusalReason,
    Verdict,
    approval_hash,
    approval_payload,
    is_reserved_actor,
)
from sagacity.approval._signed_checks import (
    CLOCK_SKEW,
    JudgeContext,
    check_person,
    check_requirement,
    check_signature,
)
from sagacity.journal._bounds import echo

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
        signed = check_signature(pending, decision, context)
        if isinstance(signed, Verdict):
            return signed
        if signed is not None:
            approver, key = signed.approver, signed
        refusal = check_requirement(decision, approver, key, context)
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
            f"the decision is about tool {echo(decision.tool, 80)} but step {pending.step} "
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
    refusal = check_person(decision)
    if refusal is not None:
        return refusal
    if bound and decision.saga_id is None:
        return Verdict.refuse(
            RefusalReason.WRONG_SAGA,
            "the decision names no saga; send it with the saga_id of the pending approval "
            "(a decision that names no saga could be replayed to another one)",
        )
    return None


__all__ = [
    "APPROVER_MAX_CHARS",
    "CLOCK_SKEW",
    "REASON_MAX_CHARS",
    "RESERVED_ACTOR_PREFIX",
    "SAGA_ID_MAX_CHARS",
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
