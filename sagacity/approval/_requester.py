"""Who asked for a saga: the requester claim of a start, checked like a decision.

Separation of duties needs a requester nobody can make up. Where the worker has an
approver registry, a saga start must carry a requester claim signed by the requester's
enrolled key over a request statement naming this saga (sagacity.approval._statements), or
the saga is refused before anything runs; the requester recorded is the key's owner.
Without a registry, a requester is recorded as declared (`verified: false`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sagacity.approval._judge import CLOCK_SKEW, is_reserved_actor
from sagacity.approval._registry_file import KeyLookup
from sagacity.approval._registry_marks import older_than
from sagacity.approval._signing import verify_signature
from sagacity.approval._statements import request_statement, statement_bytes
from sagacity.journal._bounds import echo
from sagacity.journal._entry import parse_timestamp

HOW = (
    "start it with SagaClient(signer=SigningKey.from_file(...)) or `sagacity start --key "
    "KEY_FILE`, with a key enrolled in the registry"
)


def judge_requester(
    saga_id: str, claim: Any, lookup: KeyLookup, now: datetime
) -> tuple[str | None, dict[str, Any] | None]:
    """(why the start is refused or None, the requester evidence to journal or None).

    `claim` is a workflows.models.RequesterClaim (duck-typed: the core never imports the
    workflow's models)."""
    if claim is None:
        if lookup.configured:
            return (
                f"this worker has an approver registry, so a saga needs a signed requester; {HOW}",
                None,
            )
        return None, None
    name = claim.requester
    if is_reserved_actor(name):
        return f"requester {echo(name, 80)} reads as one of the saga's own actors", None
    if claim.signature is None:
        if lookup.configured:
            return (
                f"the requester {echo(name, 80)} is not signed, and this worker has an "
                f"approver registry; {HOW}",
                None,
            )
        return None, {"requester": name, "verified": False}
    if not lookup.configured:
        return (
            "the requester claim is signed, but this worker has no approver registry to "
            "check it against; configure one (SAGACITY_APPROVERS) or start unsigned"
        ), None
    journaled = lookup.journaled
    if lookup.version is not None and older_than(lookup.version, lookup.sha256, journaled):
        assert journaled is not None
        return (
            f"the worker judged with approver registry version {lookup.version}, but its "
            f"journal records {journaled.describe()}: a revoked requester key could count "
            "again; restore the newer registry on the worker"
        ), None
    key = lookup.key
    if key is None or key.key_id != claim.key_id:
        return f"the requester's key {claim.key_id} is not in the approver registry", None
    statement = request_statement(
        saga_id=claim.saga_id or "",
        requester=name,
        issued_at=claim.issued_at or "",
        key_id=claim.key_id or "",
    )
    if not verify_signature(key.public_key, statement_bytes(statement), claim.signature):
        return "the requester's signature does not verify over the request statement", None
    if claim.saga_id != saga_id:
        return (
            f"the requester signed a start of saga {echo(claim.saga_id, 80)}, not of "
            f"{saga_id!r}; sign a request for this saga"
        ), None
    problem = key.invalid_at(now)
    if problem is not None:
        return problem, None
    if key.approver != name:
        return (
            f"the requester says {echo(name, 80)} but key {key.key_id} is enrolled to "
            f"{key.approver!r}",
            None,
        )
    try:
        issued = parse_timestamp(claim.issued_at or "")
    except ValueError as exc:
        return f"requester issued_at: {exc}", None
    if issued > now + CLOCK_SKEW:
        return "the request statement is issued in the future of the saga's clock", None
    return None, {
        "requester": key.approver,
        "verified": True,
        "statement": statement,
        "signature": claim.signature,
        "key": {"key_id": key.key_id, "public_key": key.public_key, "approver": key.approver},
        "registry": lookup.registry_ref,
    }


__all__ = ["judge_requester"]
