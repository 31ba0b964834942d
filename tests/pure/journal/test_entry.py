"""Entries and canonical JSON: bad input is refused with a typed error before any store is
touched, and canonical text survives parsing and every store unchanged."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sagacity._errors import InvalidEntryError, NotCanonicalError, PayloadTooLargeError
from sagacity.audit._export_lines import entry_record, record_entry
from sagacity.journal._canonical import (
    canonical_bytes,
    canonical_text,
    parse_canonical,
    payload_sha256,
)
from sagacity.journal._chain import verify_chain
from sagacity.journal._entry import EntryDraft, parse_timestamp, render_timestamp
from sagacity.journal._phases import Phase
from sagacity.stores import JournalStore
from sagacity.stores._memory import MemoryJournalStore

NOT_CANONICAL = [
    object(),
    {1, 2},
    b"bytes",
    float("nan"),
    float("inf"),
    2**60,
    -(2**53),
    "\ud800",
    {"key": ["ok", "\udfff"]},
    {"\ud800": 1},
    {1: "non-str key"},
]


def _stable_id(value: object) -> str:
    """The same in every test process (pytest-xdist compares them): no object address."""
    return "object()" if type(value) is object else repr(value)


@pytest.fixture
def store() -> MemoryJournalStore:
    return MemoryJournalStore()


def _assert_nothing_written(store: MemoryJournalStore) -> None:
    assert list(store.sagas()) == []
    assert store.head("s") is None


@pytest.mark.parametrize("field", ["input", "result"])
@pytest.mark.parametrize("value", NOT_CANONICAL, ids=_stable_id)
def test_value_without_canonical_form_is_refused(
    store: MemoryJournalStore, field: str, value: object
) -> None:
    with pytest.raises(NotCanonicalError, match=f"INTENT {field}"):
        store.append(EntryDraft.new("s", Phase.INTENT, step=1, tool="t", **{field: value}))
    _assert_nothing_written(store)


def test_error_text_with_lone_surrogate_is_refused(store: MemoryJournalStore) -> None:
    with pytest.raises(NotCanonicalError, match="FAILED error"):
        store.append(EntryDraft.new("s", Phase.FAILED, step=1, error="boom \ud800"))
    _assert_nothing_written(store)


BAD_ENTRIES: list[tuple[str, dict[str, Any]]] = [
    ("empty saga id", {"saga_id": ""}),
    ("saga id not a str", {"saga_id": 7}),
    ("saga id with newline", {"saga_id": "a\nb"}),
    ("saga id with NUL", {"saga_id": "a\x00"}),
    ("saga id with DEL", {"saga_id": "a\x7f"}),
    ("saga id lone surrogate", {"saga_id": "a\ud800"}),
    ("saga id too long", {"saga_id": "x" * 257}),
    ("tool with tab", {"tool": "charge\tcard"}),
    ("actor with escape", {"actor": "alice\x1b[31m"}),
    ("empty actor", {"actor": ""}),
    ("error not a str", {"error": {"code": 1}}),
    ("unknown phase", {"phase": "DONE"}),
    ("negative step", {"step": -1}),
    ("bool step", {"step": True}),
    ("attempt zero", {"attempt": 0}),
    ("float attempt", {"attempt": 1.0}),
    ("naive datetime", {"recorded_at": datetime(2026, 3, 1, 9, 30)}),
    ("date string", {"recorded_at": "2026-03-01T09:30:00Z"}),
]


@pytest.mark.parametrize(("case", "override"), BAD_ENTRIES, ids=[c for c, _ in BAD_ENTRIES])
def test_invalid_entry_is_refused(
    store: MemoryJournalStore, case: str, override: dict[str, Any]
) -> None:
    kwargs: dict[str, Any] = {"saga_id": "s", "phase": Phase.INTENT, "step": 1, "tool": "t"}
    kwargs.update(override)
    with pytest.raises(InvalidEntryError) as raised:
        store.append(EntryDraft.new(**kwargs))
    assert not isinstance(raised.value, NotCanonicalError)
    _assert_nothing_written(store)


@pytest.mark.parametrize("field", ["input", "result", "error"])
def test_payload_limit_is_exact_and_refusal_is_typed(store: MemoryJournalStore, field: str) -> None:
    at_limit = EntryDraft.new("s", Phase.FAILED, **{field: "x" * 48}, max_payload_bytes=50)
    assert len(getattr(at_limit, f"{field}_json").encode()) == 50  # the quotes count
    with pytest.raises(PayloadTooLargeError, match="51 bytes"):
        store.append(EntryDraft.new("s", Phase.FAILED, **{field: "x" * 49}, max_payload_bytes=50))
    _assert_nothing_written(store)


def test_limit_counts_utf8_bytes_not_characters() -> None:
    with pytest.raises(PayloadTooLargeError):
        EntryDraft.new("s", Phase.INTENT, input="😀" * 13, max_payload_bytes=50)  # 15 chars, 54 B


def test_none_and_empty_string_are_different_payloads() -> None:
    absent = EntryDraft.new("s", Phase.EXECUTED, step=1, result=None)
    empty = EntryDraft.new("s", Phase.EXECUTED, step=1, result="")
    assert (absent.result_json, empty.result_json) == ("null", '""')
    assert not absent.same_content(MemoryJournalStore().append(empty))


def test_aware_time_is_stored_in_utc_and_rendered_fixed_width() -> None:
    moment = datetime(2026, 3, 1, 11, 30, 0, 5, tzinfo=timezone(timedelta(hours=2)))
    draft = EntryDraft.new("s", Phase.INTENT, recorded_at=moment)
    assert draft.recorded_at == moment and draft.recorded_at.tzinfo is UTC
    assert render_timestamp(moment) == "2026-03-01T09:30:00.000005Z"


@given(st.datetimes(timezones=st.just(UTC)))
def test_timestamp_rendering_is_fixed_width_and_round_trips(moment: datetime) -> None:
    text = render_timestamp(moment)
    assert len(text) == 27 and text.endswith("Z")
    assert parse_timestamp(text) == moment
    assert text == moment.isoformat(timespec="microseconds")[:-6] + "Z"  # the %-format


def test_record_round_trip_keeps_every_field() -> None:
    draft = EntryDraft.new("s", Phase.APPROVED, step=3, attempt=2, tool="wire", actor="a😀")
    entry = MemoryJournalStore().append(draft)
    assert record_entry(entry_record(entry)) == entry
    assert (entry.actor, entry.error, entry.input) == ("a😀", None, None)


def test_payload_hash_is_sha256_of_canonical_bytes() -> None:
    assert canonical_bytes({"b": 1.0, "a": [-0.0]}) == b'{"a":[0],"b":1}'
    assert payload_sha256({"b": 1.0, "a": [-0.0]}) == payload_sha256({"a": [0], "b": 1})


# -- canonical text is a fixed point, in memory and through the stores -------------------

keys = st.text(max_size=8)  # includes non-BMP characters, quotes, newlines, controls
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | st.sampled_from(['"', "\n", "\\", "\u2028", "😀", "\U0010ffff", "ﬁ", "e\u0301"])
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)
FLOAT_EDGES = [2.0**60, -(2.0**53), 1e21, 1e-7, 5e-324, 1.7976931348623157e308, -0.0, 0.1]


@settings(max_examples=300, deadline=None)
@given(json_values)
@example(FLOAT_EDGES)
@example({"😀": 1, "ﬁ": 2, "\u0080": [{"": None}]})
def test_canonical_text_is_a_fixed_point(value: Any) -> None:
    text = canonical_text(value)
    assert canonical_text(parse_canonical(text)) == text


def _round_trip(store: JournalStore, value: Any) -> None:
    saga_id = f"s-{uuid.uuid4().hex[:10]}"
    expected = canonical_text(value)
    draft = EntryDraft.new(saga_id, Phase.EXECUTED, step=1, tool="t", input=value, result=value)
    appended = store.append(draft)
    [stored] = list(store.entries(saga_id))
    assert stored == appended
    assert stored.input_json == stored.result_json == expected
    assert canonical_text(stored.input) == expected
    assert verify_chain(saga_id, store.entries(saga_id)).ok


@settings(max_examples=150, deadline=None)
@given(json_values)
@example(FLOAT_EDGES)
def test_canonical_text_survives_the_memory_store(value: Any) -> None:
    _round_trip(MemoryJournalStore(), value)
