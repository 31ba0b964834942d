"""Decision statements: the exact bytes a person signs when they approve or reject.

A statement names everything the decision is about — saga id, step, tool, payload
SHA-256, approve or reject, the approver, the reason, when it was issued and by which
key — as RFC 8785 canonical JSON, so the signer and every verifier (the workflow, and an
auditor years later with `verify-file`) hash the same bytes. Its `type` names the kind of
statement, so a signature over a decision can never be passed off as any other signed
thing (a start request has its own type).

Decisions travel flat (the fields of sagacity.approvals.ApprovalDecision plus
`issued_at`, `key_id` and `signature`), so a person typing one in the Temporal UI writes
ordinary JSON; the statement is rebuilt from those fields and the signature checked
against it.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from sagacity.canonical import canonical_bytes
from sagacity.entry import render_timestamp
from sagacity.signing import SigningKey

DECISION_TYPE = "sagacity/decision/v1"
REQUEST_TYPE = "sagacity/request/v1"
RESOLUTION_TYPE = "sagacity/resolution/v1"


def decision_statement(
    *,
    saga_id: str,
    step: int,
    tool: str,
    payload_sha256: str,
    approve: bool,
    approver: str,
    reason: str,
    issued_at: str,
    key_id: str,
) -> dict[str, Any]:
    """The statement of one decision, as a JSON object."""
    return {
        "type": DECISION_TYPE,
        "saga_id": saga_id,
        "step": step,
        "tool": tool,
        "payload_sha256": payload_sha256,
        "decision": "approve" if approve else "reject",
        "approver": approver,
        "reason": reason,
        "issued_at": issued_at,
        "key_id": key_id,
    }


def request_statement(
    *, saga_id: str, requester: str, issued_at: str, key_id: str
) -> dict[str, Any]:
    """The statement of a saga's start: who asked for it (separation of duties)."""
    return {
        "type": REQUEST_TYPE,
        "saga_id": saga_id,
        "requester": requester,
        "issued_at": issued_at,
        "key_id": key_id,
    }


def resolution_statement(
    *,
    saga_id: str,
    action: str,
    step: int | None,
    steps: list[int] | None,
    result_sha256: str,
    reason: str,
    actor: str,
    issued_at: str,
    key_id: str,
) -> dict[str, Any]:
    """The statement of a person's action on a saga's dirty state: which saga, which
    action on which step (or, to accept, exactly which steps they saw dirty), the SHA-256
    of the result they report (empty when none), why, who and when."""
    return {
        "type": RESOLUTION_TYPE,
        "saga_id": saga_id,
        "action": action,
        "step": step,
        "steps": steps,
        "result_sha256": result_sha256,
        "reason": reason,
        "actor": actor,
        "issued_at": issued_at,
        "key_id": key_id,
    }


def statement_bytes(statement: dict[str, Any]) -> bytes:
    """The signed bytes: the statement's canonical JSON."""
    return canonical_bytes(statement, what="statement")


def now_text(now: datetime | None = None) -> str:
    """`issued_at` in the journal's timestamp form (UTC, microseconds, Z)."""
    return render_timestamp(now or datetime.now(UTC))


def signed_decision(
    key: SigningKey,
    *,
    saga_id: str,
    step: int,
    tool: str,
    payload_sha256: str,
    approve: bool,
    reason: str = "",
    now: datetime | None = None,
) -> dict[str, Any]:
    """A decision body signed by `key` (approver = the key's owner): what the CLI and
    `SagaClient` send."""
    fields: dict[str, Any] = {
        "saga_id": saga_id,
        "step": step,
        "tool": tool,
        "payload_sha256": payload_sha256,
        "approve": approve,
        "approver": key.approver,
        "reason": reason,
        "issued_at": now_text(now),
        "key_id": key.key_id,
    }
    statement = decision_statement(**fields)
    return {**fields, "signature": key.sign(statement_bytes(statement))}


def signed_request(key: SigningKey, saga_id: str, now: datetime | None = None) -> dict[str, Any]:
    """The requester claim of a saga start, signed by the requester's key."""
    fields = {
        "saga_id": saga_id,
        "requester": key.approver,
        "issued_at": now_text(now),
        "key_id": key.key_id,
    }
    return {**fields, "signature": key.sign(statement_bytes(request_statement(**fields)))}


def signed_resolution(
    key: SigningKey,
    *,
    saga_id: str,
    action: str,
    step: int | None = None,
    steps: list[int] | None = None,
    result: Any = None,
    reason: str = "",
    now: datetime | None = None,
) -> dict[str, Any]:
    """A resolution body signed by `key` (actor = the key's owner): what the CLI and
    `SagaClient` send to a saga that needs a human."""
    fields: dict[str, Any] = {
        "saga_id": saga_id,
        "action": action,
        "step": step,
        "steps": steps,
        "reason": reason,
        "actor": key.approver,
        "issued_at": now_text(now),
        "key_id": key.key_id,
    }
    statement = resolution_statement(**fields, result_sha256=result_digest(result))
    body = {**fields, "signature": key.sign(statement_bytes(statement))}
    if result is not None:
        body["result"] = result
    return body


def result_digest(result: Any) -> str:
    """SHA-256 of a reported result's canonical JSON; empty when no result is reported."""
    if result is None:
        return ""
    return hashlib.sha256(canonical_bytes(result, what="result")).hexdigest()


__all__ = [
    "DECISION_TYPE",
    "REQUEST_TYPE",
    "RESOLUTION_TYPE",
    "decision_statement",
    "now_text",
    "request_statement",
    "resolution_statement",
    "result_digest",
    "signed_decision",
    "signed_request",
    "signed_resolution",
    "statement_bytes",
]
