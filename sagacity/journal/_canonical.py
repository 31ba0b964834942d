"""Canonical JSON (RFC 8785) and payload hashes.

Approvals and the chain both hash bytes, so both need one byte string per JSON value.
`json.dumps(sort_keys=True)` is not that (non-BMP key order, `1.0`, `-0.0`, big ints);
RFC 8785 is. Values with no canonical form are refused with a typed error instead of
being coerced, because a coerced payload is not the payload a human approved.

The pure-Python `rfc8785` package is slow (10-60 µs for a small object), so values where
the standard library's C encoder writes the same bytes take that path instead; see
`plain_value` for exactly when, and tests/pure/journal/test_canonical.py for the property test
that holds the two together.
"""

from __future__ import annotations

import hashlib
import json
import json.encoder
from collections.abc import Callable
from typing import Any

import rfc8785

from sagacity._errors import NotCanonicalError, PayloadTooLargeError
from sagacity.journal._bounds import depth_of

JsonValue = Any
"""A value made of dict (str keys), list, str, int, float, bool and None."""

DEFAULT_MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
"""Documented limit for one canonical field (input, result or error) of a journal entry."""
MAX_CANONICAL_DEPTH = 64
"""Deepest nesting canonical JSON accepts. Deeper values are refused with a typed error
instead of exhausting the interpreter's recursion (and are far past what a saga admits,
see sagacity.journal._bounds)."""


_MAX_SAFE_INT = 2**53 - 1
"""RFC 8785 refuses integers beyond ±(2**53-1) (rfc8785.IntegerDomainError)."""
_LAST_BMP = "\uffff"


def plain_value(value: object, level: int = 0) -> bool:
    """True when `json.dumps(value, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)` is byte for byte RFC 8785 (once encoded as UTF-8), as the
    rfc8785 package writes it. That holds for values made only of:

    - exactly dict (str keys), list, tuple, str, int, bool and None — not subclasses
      (an IntEnum, a str Enum or a dict subclass may render differently), and no float:
      json writes Python's repr (`1.0`, `1e+16`, `-0.0`), RFC 8785 the ECMAScript form
      (`1`, `10000000000000000`, `0`), and refuses NaN and infinities;
    - ints within ±(2**53-1), which RFC 8785 refuses beyond (json writes any int);
    - object keys with no character beyond U+FFFF: json sorts keys by code point, RFC
      8785 by UTF-16 code unit, and the two orders differ only where a key holds a
      surrogate pair (U+1F600 sorts after U+FB01 by code point, before it in UTF-16);
      non-str keys, which json converts to strings and RFC 8785 refuses, are not plain;
    - nesting up to MAX_CANONICAL_DEPTH levels, so the deeper-value error stays the
      slow path's.

    Strings are escaped alike: `"` and `\\` by a backslash, \\b \\f \\n \\r \\t by their
    short forms, the other control characters below U+0020 as \\u00xx in lowercase hex,
    everything else (U+007F, U+2028, non-BMP) as itself. A lone surrogate is written by
    json and refused by RFC 8785; canonical_bytes sees it fail to encode as UTF-8 and
    takes the slow path, which refuses it. Separators (`,` `:`) and `null`/`true`/
    `false`, `[]`, `{}` and decimal ints are identical.
    """
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT  # type: ignore[operator]
    if kind is dict:
        if level >= MAX_CANONICAL_DEPTH:
            return False
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str or (not key.isascii() and max(key) > _LAST_BMP):
                return False
            inner = type(item)
            if not (inner is str or item is None or inner is bool) and not plain_value(
                item, level + 1
            ):
                return False
        return True
    if kind is list or kind is tuple:
        if level >= MAX_CANONICAL_DEPTH:
            return False
        for item in value:  # type: ignore[attr-defined]
            inner = type(item)
            if not (inner is str or item is None or inner is bool) and not plain_value(
                item, level + 1
            ):
                return False
        return True
    return False


def _json_encoder() -> Callable[[object], str]:
    """json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False), as the C
    encoder it builds on each call, built once (3 µs less per value). The circular-
    reference check is off: a plain value is at most MAX_CANONICAL_DEPTH deep."""
    make = getattr(json.encoder, "c_make_encoder", None)  # None without the C accelerator
    if make is not None:
        try:
            escape = json.encoder.encode_basestring
            encoder = make(None, _unsupported, escape, None, ":", ",", True, False, False)
        except TypeError:  # a Python whose C encoder takes other arguments
            pass
        else:
            return lambda value: "".join(encoder(value, 0))
    fallback = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return fallback.encode


def _unsupported(value: object) -> object:
    raise TypeError(f"{type(value).__name__} is not JSON")


_dumps = _json_encoder()


def fast_text(value: JsonValue) -> str | None:
    """The RFC 8785 form of a plain value (see plain_value) from the C encoder, as text,
    or None when `value` is not plain or holds a lone surrogate (the caller takes the
    slow path, which refuses it)."""
    if value is None:
        return "null"
    if not plain_value(value):
        return None
    text = _dumps(value)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return None
    return text


def fast_bytes(value: JsonValue) -> bytes | None:
    """fast_text as the UTF-8 bytes that are hashed, or None."""
    text = fast_text(value)
    return None if text is None else text.encode("utf-8")


def canonical_bytes(value: JsonValue, *, what: str = "value", limit: int | None = None) -> bytes:
    """The RFC 8785 bytes of `value`; `what` names the field in errors.

    Raises NotCanonicalError for values JSON cannot carry exactly and PayloadTooLargeError
    when `limit` is given and exceeded.
    """
    data = fast_bytes(value)
    if data is None:
        data = _rfc8785_bytes(value, what)
    if limit is not None and len(data) > limit:
        raise PayloadTooLargeError(
            f"{what} is {len(data):,} bytes canonical, over the limit of {limit:,} bytes; "
            "store large data elsewhere and journal a reference and its hash"
        )
    return data


def _rfc8785_bytes(value: JsonValue, what: str) -> bytes:
    """The slow path: the rfc8785 package, for every value that is not plain."""
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
    return data


def canonical_text(value: JsonValue, *, what: str = "value", limit: int | None = None) -> str:
    """Canonical JSON as text, the form stores keep (TEXT, never jsonb)."""
    return canonical_bytes(value, what=what, limit=limit).decode("utf-8")


def parse_canonical(text: str) -> JsonValue:
    """Parse stored canonical JSON. Canonical text is a fixed point: parsing and
    re-canonicalizing yields the same bytes, which the store round-trip tests pin."""
    return json.loads(text, parse_int=lambda s: int(s) if abs(int(s)) < 2**53 else float(s))


def one_value_per_key(
    repeated: Callable[[str], str],
) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    """A json `object_pairs_hook` that refuses an object naming a key twice, with
    ValueError(repeated(key)) for the first key repeated, at any depth: Python's json
    keeps the last value and another parser may keep the first, so such bytes read as two
    different values (sagacity never writes them)."""

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found = dict(pairs)
        if len(found) != len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    raise ValueError(repeated(key))
                seen.add(key)
        return found

    return hook


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def payload_sha256(payload: JsonValue) -> str:
    """SHA-256 (hex) of the canonical payload: what an approver's decision must carry."""
    return sha256_hex(canonical_bytes(payload, what="payload"))
