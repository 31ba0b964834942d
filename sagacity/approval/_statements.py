"""Statements: the exact bytes a person signs for any signed human action.

A statement names everything the action is about — for a decision the saga, step, tool,
payload SHA-256, approve or reject; for a resolution of dirty state the saga, action,
step(s) and the SHA-256 of a reported result — plus who signs, when and with which key,
as RFC 8785 canonical JSON, so the signer and every verifier (the workflow, and an
auditor years later with `verify-file`) hash the same bytes. Its `type` names the kind
of action (`sagacity/<kind>/v1`), so a signature over one kind can never be passed off
as another. The actions themselves are sagacity.approval._signed_action.SignedAction subclasses;
this module holds what every kind shares, and the requester claim of a saga's start.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from sagacity.approval._signing import SigningKey
from sagacity.journal._canonical import canonical_bytes
from sagacity.journal._entry import render_timestamp

REQUEST_TYPE = "sagacity/request/v1"


def statement_type(kind: str) -> str:
    """The `type` of a statement of this kind of action ("decision" -> sagacity/decision/v1)."""
    return f"sagacity/{kind}/v1"


def statement_bytes(statement: dict[str, Any]) -> bytes:
    """The signed bytes: the statement's canonical JSON."""
    return canonical_bytes(statement, what="statement")


def now_text(now: datetime | None = None) -> str:
    """`issued_at` in the journal's timestamp form (UTC, microseconds, Z)."""
    return render_timestamp(now or datetime.now(UTC))


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


def signed_request(key: SigningKey, saga_id: str, now: datetime | None = None) -> dict[str, Any]:
    """The requester claim of a saga start, signed by the requester's key."""
    fields = {
        "saga_id": saga_id,
        "requester": key.approver,
        "issued_at": now_text(now),
        "key_id": key.key_id,
    }
    return {**fields, "signature": key.sign(statement_bytes(request_statement(**fields)))}


def result_digest(result: Any) -> str:
    """SHA-256 of a reported result's canonical JSON; empty when no result is reported."""
    if result is None:
        return ""
    return hashlib.sha256(canonical_bytes(result, what="result")).hexdigest()


__all__ = [
    "REQUEST_TYPE",
    "now_text",
    "request_statement",
    "result_digest",
    "signed_request",
    "statement_bytes",
    "statement_type",
]
