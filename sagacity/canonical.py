"""Canonical JSON (RFC 8785) and payload hashes.

Approvals and the chain both hash bytes, so both need one byte string per JSON value.
`json.dumps(sort_keys=True)` is not that (non-BMP key order, `1.0`, `-0.0`, big ints);
RFC 8785 is. Values with no canonical form are refused with a typed error instead of
being coerced, because a coerced payload is not the payload a human approved.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import rfc8785

from sagacity.bounds import depth_of
from sagacity.errors import NotCanonicalError, PayloadTooLargeError

JsonValue = Any
"""A value made of dict (str keys), list, str, int, float, bool and None."""

DEFAULT_MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
"""Documented limit for one canonical field (input, result or error) of a journal entry."""
MAX_CANONICAL_DEPTH = 64
"""Deepest nesting canonical JSON accepts. Deeper values are refused with a typed error
instead of exhausting the interpreter's recursion (and are far past what a saga admits,
see sagacity.bounds)."""


def canonical_bytes(value: JsonValue, *, what: str = "value", limit: int | None = None) -> bytes:
    """The RFC 8785 bytes of `value`; `what` names the field in errors.

    Raises NotCanonicalError for values JSON cannot carry exactly and PayloadTooLargeError
    when `limit` is given and exceeded.
    """
    if depth_of(value, MAX_CANONICAL_DEPTH) > MAX_CANONICAL_DEPTH:
        raise NotCanonicalError(
            f"{what} is nested more than {MAX_CANONICAL_DEPTH} levels deep; flatten it"
        )
    try:
        data: bytes = rfc8785.dumps(value)
    except rfc8785.IntegerDomainError as exc:
        raise NotCanonicalError(
            f"{what}: integer {exc} — integers beyond ±(2**53-1) have no exact JSON form; "
            "pass them as strings"
        ) from exc
    except rfc8785.FloatDomainError as exc:
        raise NotCanonicalError(f"{what}: {exc}; use null or a string instead") from exc
    except (
        rfc8785.CanonicalizationError,
        TypeError,
        ValueError,
        UnicodeError,
        RecursionError,
    ) as exc:
        raise NotCanonicalError(
            f"{what} is not JSON-serializable ({type(exc).__name__}: {exc}); "
            "use dict, list, str, int, float, bool or None (dates as ISO strings)"
        ) from exc
    if limit is not None and len(data) > limit:
        raise PayloadTooLargeError(
            f"{what} is {len(data):,} bytes canonical, over the limit of {limit:,} bytes; "
            "store large data elsewhere and journal a reference and its hash"
        )
    return data


def canonical_text(value: JsonValue, *, what: str = "value", limit: int | None = None) -> str:
    """Canonical JSON as text, the form stores keep (TEXT, never jsonb)."""
    return canonical_bytes(value, what=what, limit=limit).decode("utf-8")


def parse_canonical(text: str) -> JsonValue:
    """Parse stored canonical JSON. Canonical text is a fixed point: parsing and
    re-canonicalizing yields the same bytes, which the store round-trip tests pin."""
    return json.loads(text, parse_int=lambda s: int(s) if abs(int(s)) < 2**53 else float(s))


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def payload_sha256(payload: JsonValue) -> str:
    """SHA-256 (hex) of the canonical payload: what an approver's decision must carry."""
    return sha256_hex(canonical_bytes(payload, what="payload"))
