"""Amounts as an approval rule reads them: exact, or not at all.

A rule such as "above 10,000 needs two people" must read the amount the approver sees and
the tool receives. Money is usually a `Decimal`, which a call's JSON payload carries as a
string ("50000.00"); an MCP server may type it as a JSON string; an integer count of
cents is a JSON integer. So a rule reads an amount from an integer, a float or a
*plain decimal numeral* string, and compares exactly, as `Decimal`: never through a
float, which would turn "10000.000000000000001" into 10000.0 and let it pass as "not
above 10,000". A float (only a parameter whose schema says number has one) is read as
its payload writes it, 10000.1 as 10000.1, which is what the approver reads.

A plain decimal numeral is ASCII digits with an optional leading "-" and an optional
fraction: "50000", "-3", "0.50", "12.345". Anything else — "1e5", "NaN", "Infinity",
" 5", "", "+5", "050", "5.", "50,000", a full-width digit, null, a bool, an object —
is not an amount to a rule, and a rule that cannot read its amount applies (see
sagacity.approval._policy): a value a rule cannot compare is never taken to be below its
limit.

`problem_of` says, from a parameter's JSON schema, why a rule could never compare it (a
bool, an object, a list, any JSON value at all), so such a rule is refused when the
toolbox is built instead of never applying at call time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from sagacity._errors import ApprovalPolicyError

PLAIN_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")
"""A plain decimal numeral (match it whole: `fullmatch`). ASCII digits only: `\\d` would
take other scripts' digits, which a tool may read differently or not at all."""
MAX_AMOUNT_CHARS = 100
"""A longer numeral is not read as an amount (the rule applies): no money needs it."""
_MAX_REF_DEPTH = 16
_NUMERIC = frozenset({"integer", "number", "string"})
_NEVER_COMPARED = {"boolean": "a bool", "object": "an object", "array": "a list"}
_TEXT_FORMATS = frozenset(
    {
        "date", "date-time", "time", "duration", "email", "idn-email", "hostname",
        "idn-hostname", "ipv4", "ipv6", "uri", "uri-reference", "iri", "iri-reference",
        "uri-template", "uuid", "json-pointer", "relative-json-pointer", "regex", "binary",
        "password",
    }
)  # fmt: skip
"""JSON Schema's own string formats (and pydantic's bytes and secrets): never a numeral."""


def amount_of(value: object) -> Decimal | None:
    """`value` as an exact amount, or None when a rule cannot read it as one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, Decimal):
        return value if value.is_finite() else None
    if isinstance(value, float):
        # As the payload writes it (the shortest repr, what the approver reads), exactly.
        return Decimal(repr(value)) if math.isfinite(value) else None
    if isinstance(value, str) and len(value) <= MAX_AMOUNT_CHARS and PLAIN_DECIMAL.fullmatch(value):
        return Decimal(value)
    return None


def limit_of(limit: object) -> Decimal:
    """A rule's limit as an exact Decimal. A float is read as written (`0.1` is 0.1, not
    its binary expansion); a string must be a plain decimal numeral."""
    if isinstance(limit, float) and math.isfinite(limit):
        return Decimal(repr(limit))
    if isinstance(limit, int | Decimal | str):
        exact = amount_of(limit)
        if exact is not None:
            return exact
    raise ApprovalPolicyError(
        f"a rule's limit must be a finite number (an int, a Decimal, or a plain decimal "
        f"string such as '10000.50'), got {limit!r}"
    )


def _value_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string" if amount_of(value) is not None else "text"
    return "array" if isinstance(value, list | tuple) else "object"


def _meet(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    """What satisfies both (None: anything). "text" is a string that is never a numeral."""
    if a is None or b is None:
        return b if a is None else a
    both = a & b
    if ("text" in a and "string" in b) or ("string" in a and "text" in b):
        both |= {"text"}
    return frozenset(both)


def _resolve(ref: object, root: Mapping[str, Any]) -> object:
    """A local `#/...` pointer's target in `root`, or None (a URL is never fetched)."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    node: object = root
    for part in [p for p in ref[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def kinds_of(schema: object, root: Mapping[str, Any], depth: int = 0) -> frozenset[str] | None:
    """The kinds of JSON value `schema` admits — JSON type names, with "text" for a string
    that can never be a plain numeral (a date or e-mail `format`, an enum of names) — or
    None when it admits any value (nothing says which type)."""
    if depth > _MAX_REF_DEPTH or schema is True:
        return None
    if schema is False:
        return frozenset()
    if not isinstance(schema, Mapping):
        return None
    found: frozenset[str] | None = None
    if "$ref" in schema:
        target = _resolve(schema["$ref"], root)
        found = _meet(found, None if target is None else kinds_of(target, root, depth + 1))
    declared = schema.get("type")
    if isinstance(declared, str | list):
        names = {declared} if isinstance(declared, str) else {str(t) for t in declared}
        if schema.get("format") in _TEXT_FORMATS and "string" in names:
            names = (names - {"string"}) | {"text"}
        found = _meet(found, frozenset(names))
    if isinstance(schema.get("enum"), list):
        found = _meet(found, frozenset(_value_kind(v) for v in schema["enum"]))
    if "const" in schema:
        found = _meet(found, frozenset({_value_kind(schema["const"])}))
    for union in ("anyOf", "oneOf"):
        if isinstance(schema.get(union), list):
            joined: frozenset[str] | None = frozenset()
            for option in schema[union]:
                kinds = kinds_of(option, root, depth + 1)
                joined = None if joined is None or kinds is None else joined | kinds
            found = _meet(found, joined)
    for part in schema.get("allOf", []) if isinstance(schema.get("allOf"), list) else []:
        found = _meet(found, kinds_of(part, root, depth + 1))
    return found


def problem_of(schema: object, root: Mapping[str, Any]) -> str | None:
    """Why a rule could never compare a parameter with this JSON schema, or None when a
    value it admits can be an amount."""
    kinds = kinds_of(schema, root)
    if kinds is None:
        return "its schema admits any JSON value (it names no type)"
    never = [what for kind, what in _NEVER_COMPARED.items() if kind in kinds]
    if never:
        return f"it can be {' or '.join(never)}, which is never an amount"
    if not kinds & _NUMERIC:
        return "it is never a number or a plain decimal numeral (a date, a name, null)"
    return None


__all__ = ["MAX_AMOUNT_CHARS", "PLAIN_DECIMAL", "amount_of", "kinds_of", "limit_of", "problem_of"]
