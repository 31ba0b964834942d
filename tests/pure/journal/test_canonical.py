"""The fast path of canonical JSON: the standard library's encoder where it writes RFC 8785
byte for byte, the rfc8785 package everywhere else, and never a difference between them.

Hostile values on purpose: every number (floats, -0.0, NaN, integers around ±2**53),
keys beyond the BMP beside keys in U+E000-U+FFFF (where UTF-16 and code-point order
differ), lone surrogates, control characters, non-str keys, tuples, and subclasses of
every JSON type (IntEnum, StrEnum, dict, list, int, float and str subclasses).
"""

from __future__ import annotations

import enum
import json
from typing import Any

import pytest
import rfc8785
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sagacity._errors import NotCanonicalError
from sagacity.journal._canonical import (
    MAX_CANONICAL_DEPTH,
    canonical_bytes,
    fast_bytes,
    fast_text,
    plain_value,
)


class Level(enum.IntEnum):
    LOW = 1


class Colour(enum.StrEnum):
    RED = "red"


class Dict(dict):  # type: ignore[type-arg]
    pass


class List(list):  # type: ignore[type-arg]
    pass


class Int(int):
    def __str__(self) -> str:
        return "not me"

    __repr__ = __str__


class Float(float):
    pass


class Str(str):
    def __str__(self) -> str:
        return "not me"


EDGE_CHARS = ["\ufb01", "\U0001f600", "\ue000", "\uffff", "\U00010000", "\ud800", "\udfff",
              "\x00", "\x1f", "\x7f", '"', "\\", "\n", "\u2028", "\x85", "é", "\u0301"]  # fmt: skip
chars = st.characters() | st.sampled_from(EDGE_CHARS)
texts = st.text(alphabet=chars, max_size=6)
ints = (
    st.integers(-(2**53) - 3, -(2**53) + 3)
    | st.integers(2**53 - 3, 2**53 + 3)
    | st.integers(-(2**64), 2**64)
    | st.integers(-1000, 1000)
)
floats = st.floats() | st.sampled_from([0.0, -0.0, 1.0, 1e21, 1e-7, 5e-324, 2.0**53, 1e16])
odd_scalars = st.sampled_from([Level.LOW, Colour.RED, Int(5), Float(1.0), Str("s")])
scalars = st.none() | st.booleans() | ints | floats | texts | odd_scalars
keys = texts | st.sampled_from(EDGE_CHARS) | st.sampled_from([1, None, True, 2.5])
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.lists(inner, max_size=3).map(List)
        | st.dictionaries(keys, inner, max_size=4)
        | st.dictionaries(texts, inner, max_size=3).map(Dict)
    ),
    max_leaves=14,
)
# Plain-shaped values (the common case), so the fast path is exercised often, not only
# declined: exact types, safe ints, BMP keys, no lone surrogates.
valid = st.characters(codec="utf-8") | st.sampled_from(
    [c for c in EDGE_CHARS if c not in "\ud800\udfff"]
)
bmp = st.characters(codec="utf-8", max_codepoint=0xFFFF)
plain_scalars = (
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(alphabet=valid)
)
plain_values = st.recursive(
    plain_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(alphabet=bmp), inner, max_size=5)
    ),
    max_leaves=20,
)


def _rfc8785(value: Any) -> bytes | None:
    """rfc8785's bytes, or None when it refuses the value."""
    try:
        data: bytes = rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError, UnicodeError):
        return None
    return data


def _json_dumps(value: Any) -> bytes | None:
    """What the fast path claims to equal: json.dumps as the issue names it, as UTF-8."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
            "utf-8"
        )
    except UnicodeEncodeError:
        return None


@settings(max_examples=1000, deadline=None)
@given(values | plain_values)
@example({"\U0001f600": 1, "\ufb01": 2})  # code-point and UTF-16 order differ
@example({"\ue000": 1, "\U00010000": 2})
@example([2**53 - 1, -(2**53) + 1])
@example([2**53, -(2**53)])
@example({"a": "\ud800"})
@example({"\ud800": 1})
@example([1.0, -0.0, 1e21])
@example({1: "a"})
def test_the_fast_path_is_rfc8785_wherever_it_claims_the_value(value: Any) -> None:
    expected = _rfc8785(value)
    if plain_value(value):
        assert _json_dumps(value) == expected  # json.dumps itself, as the claim states
        assert fast_bytes(value) == expected  # the prebuilt C encoder the code uses
        assert fast_text(value) == (None if expected is None else expected.decode())
    else:
        assert fast_bytes(value) is None


@settings(max_examples=1000, deadline=None)
@given(values | plain_values)
@example({"\U0001f600": 1, "\ufb01": 2})
@example({"a": "\ud800"})
@example([2**53, 1.5, float("nan")])
def test_canonical_bytes_always_equals_rfc8785(value: Any) -> None:
    expected = _rfc8785(value)
    if expected is None:
        with pytest.raises(NotCanonicalError):
            canonical_bytes(value)
    else:
        assert canonical_bytes(value) == expected


@settings(max_examples=500, deadline=None)
@given(plain_values)
def test_plain_values_take_the_fast_path(value: Any) -> None:
    """The common case really is fast: exact JSON types, safe ints, BMP keys."""
    assert plain_value(value)
    assert fast_bytes(value) == rfc8785.dumps(value)


def test_what_the_fast_path_declines() -> None:
    assert plain_value({"a": [1, "b", None, True, {"c": (2,)}]})
    declined = [
        1.0,  # repr "1.0" against "1"
        {"a": [0.5]},
        2**53,  # refused by RFC 8785, written by json
        {"\U0001f600": 1},  # a key beyond the BMP: the sort orders differ
        {1: 2},  # json would write the key "1"
        Level.LOW,
        Colour.RED,
        Dict(),
        List(),
        Int(5),
        object(),
    ]
    for value in declined:
        assert not plain_value(value), value
        assert fast_bytes(value) is None
    assert plain_value({"x": "\U0001f600"})  # beyond the BMP in a value is fine
    assert fast_bytes("\ud800") is None  # plain, but not UTF-8: the slow path refuses it


def nested(depth: int) -> Any:
    """0 inside `depth` lists."""
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def test_depth_limit_is_the_same_on_both_paths() -> None:
    assert canonical_bytes(nested(MAX_CANONICAL_DEPTH)) == rfc8785.dumps(
        nested(MAX_CANONICAL_DEPTH)
    )
    assert plain_value(nested(MAX_CANONICAL_DEPTH))
    assert not plain_value(nested(MAX_CANONICAL_DEPTH + 1))
    with pytest.raises(NotCanonicalError, match="nested more than 64 levels"):
        canonical_bytes(nested(MAX_CANONICAL_DEPTH + 1))
    with pytest.raises(NotCanonicalError, match="nested more than 64 levels"):
        canonical_bytes(nested(10_000))
