"""The hash chain: verification and tamper detection of chains sealed by the production
code (the known answers of docs/hash-chain.md are in tests/integration/journal/test_recipe.py)."""

from __future__ import annotations

import itertools
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagacity.journal._chain import GENESIS, BreakReason, entry_hash, reseal, seal, verify_chain
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase
from sagacity.stores._memory import MemoryJournalStore

DOC = Path(__file__).resolve().parents[3] / "docs" / "hash-chain.md"
T0 = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
SAGA = "saga-chain"


def _doc_block(marker: str, lang: str) -> str:
    found = re.search(rf"<!-- {marker} -->\s*```{lang}\n(.*?)```", DOC.read_text("utf-8"), re.S)
    assert found, f"docs/hash-chain.md has no ```{lang} block after <!-- {marker} -->"
    return found.group(1)


# -- happy path and one concrete tamper per reason --------------------------------------


def _store_with_chain(n: int = 5, *, close: bool = False) -> MemoryJournalStore:
    ticks = iter(T0 + timedelta(milliseconds=i) for i in range(100))
    store = MemoryJournalStore(clock=lambda: next(ticks))
    store.append(EntryDraft.new(SAGA, Phase.SAGA_OPENED, input={"goal": "test"}))
    for step in range(1, n):
        store.append(EntryDraft.new(SAGA, Phase.INTENT, step=step, tool="t", input={"n": step}))
    if close:
        store.append(EntryDraft.new(SAGA, Phase.SAGA_CLOSED, result="COMPLETED"))
    return store


def test_sealed_chain_verifies() -> None:
    store = _store_with_chain(5, close=True)
    chain = list(store.entries(SAGA))
    assert [e.seq for e in chain] == [1, 2, 3, 4, 5, 6]
    assert chain[0].prev_hash == GENESIS
    assert all(b.prev_hash == a.hash for a, b in itertools.pairwise(chain))
    report = verify_chain(SAGA, chain)
    assert (report.ok, report.entries, report.closed) == (True, 6, True)
    assert report.head_hash == chain[-1].hash and report.reason is None


def _tampered(edit: Any) -> tuple[list[JournalEntry], Any]:
    """(the stored chain after `edit`, its report)."""
    store = _store_with_chain(5)
    store.replace_for_test(SAGA, edit(list(store.entries(SAGA))))
    return list(store.entries(SAGA)), verify_chain(SAGA, store.entries(SAGA))


def _reseal(entry: JournalEntry) -> JournalEntry:
    return reseal(entry)


@pytest.mark.parametrize(
    ("edit", "seq", "reason"),
    [
        (lambda c: [*c[:2], replace(c[2], input_json='{"n":99}'), *c[3:]], 3, "tampered"),
        (lambda c: [*c[:2], _reseal(replace(c[2], input_json="{}")), *c[3:]], 4, "broken_link"),
        (lambda c: [*c[:2], *c[3:]], 3, "gap"),
        (lambda c: [*c[:2], c[3], c[2], *c[4:]], 3, "gap"),
        (lambda c: [*c[:2], replace(c[2], saga_id="other"), *c[3:]], 3, "tampered"),
        (lambda c: [*c[:2], _reseal(replace(c[2], saga_id="other")), *c[3:]], 3, "wrong_saga"),
        (lambda c: [*c[:2], replace(c[2], hash=""), *c[3:]], 3, "not_chained"),
        (lambda c: [*c[:2], replace(c[2], prev_hash=""), *c[3:]], 3, "tampered"),
    ],
    ids=[
        "edit",
        "edit-and-reseal",
        "delete",
        "swap",
        "move",
        "move-resealed",
        "blank-hash",
        "blank-prev",
    ],
)
def test_each_tamper_is_reported_with_its_reason(edit: Any, seq: int, reason: str) -> None:
    chain, report = _tampered(edit)
    assert not report.ok
    assert (report.first_broken_seq, report.reason) == (seq, BreakReason(reason))
    assert report.head_hash == chain[seq - 2].hash  # the last entry that verified
    assert report.entries == seq and report.detail
    assert f"BROKEN at seq {seq}" in report.describe()


@pytest.mark.parametrize(
    ("spoil", "note"),
    [
        (str.upper, "differs only in letter case"),
        (lambda digest: digest[:63], "has 63 characters, not 64"),
        (lambda digest: digest + "0", "has 65 characters, not 64"),
        (lambda digest: digest[:32] + "0" * 32, None),
    ],
    ids=["upper-case", "truncated", "padded", "other-digest"],
)
def test_a_hash_mismatch_shows_both_hashes_in_full_and_what_differs(
    spoil: Any, note: str | None
) -> None:
    """A stored hash truncated or upper-cased starts like the right one: a detail showing
    sixteen characters of each would show two equal-looking values."""
    chain, report = _tampered(lambda c: [*c[:2], replace(c[2], hash=spoil(c[2].hash)), *c[3:]])
    right = entry_hash(chain[2].material)
    assert (report.first_broken_seq, report.reason) == (3, BreakReason.HASH_MISMATCH)
    assert f"stored {chain[2].hash!r}, content hashes to {right!r}" in report.detail
    if note is None:
        assert "(" not in report.detail
    else:
        assert note in report.detail


def test_entry_after_close_is_reported() -> None:
    store = _store_with_chain(3, close=True)
    chain = list(store.entries(SAGA))
    late = EntryDraft.new(SAGA, Phase.EXECUTED, step=9, tool="t", result={"late": True})
    extra = seal(late, seq=len(chain) + 1, prev_hash=chain[-1].hash, recorded_at=T0)
    store.replace_for_test(SAGA, [*chain, extra])
    report = verify_chain(SAGA, store.entries(SAGA))
    assert (report.ok, report.reason, report.first_broken_seq) == (
        False,
        BreakReason.AFTER_CLOSE,
        len(chain) + 1,
    )
    assert report.closed and report.head_hash == chain[-1].hash


# -- properties --------------------------------------------------------------------------

names = st.text(st.characters(exclude_categories=["Cc", "Cs"]), min_size=1, max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | names,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=6,
)
steps = st.tuples(st.sampled_from([p for p in Phase if not p.is_lifecycle]), names, json_values)


@st.composite
def chains(draw: st.DrawFn) -> list[JournalEntry]:
    body = draw(st.lists(steps, min_size=0, max_size=6))
    drafts = [EntryDraft.new(SAGA, Phase.SAGA_OPENED, input=draw(json_values))]
    drafts += [
        EntryDraft.new(SAGA, phase, step=i, tool=tool, input=value, actor=tool)
        for i, (phase, tool, value) in enumerate(body, start=1)
    ]
    if draw(st.booleans()):
        drafts.append(EntryDraft.new(SAGA, Phase.SAGA_CLOSED, result="COMPLETED"))
    chain: list[JournalEntry] = []
    for seq, draft in enumerate(drafts, start=1):
        prev = chain[-1].hash if chain else GENESIS
        at = T0 + timedelta(microseconds=seq)
        chain.append(seal(draft, seq=seq, prev_hash=prev, recorded_at=at))
    return chain


CONTENT_FIELDS = [
    "step", "attempt", "tool", "phase", "input_json", "result_json", "error_json",
    "actor_json", "recorded_at",
]  # fmt: skip
ALL_FIELDS = ["saga_id", "seq", *CONTENT_FIELDS, "prev_hash", "hash"]


EDITED_TEXTS = st.text(min_size=1, max_size=70)
"""What an edit puts in a text column: any text, even non-JSON."""


def _other_value(
    draw: st.DrawFn,
    entry: JournalEntry,
    field: str,
    *,
    texts: st.SearchStrategy[str] = EDITED_TEXTS,
    shift_us: int = 10**12,
) -> object:
    """A value of `field` other than `entry`'s: a number, a phase, a time moved by up to
    `shift_us` microseconds, or one of `texts`."""
    old = getattr(entry, field)
    if field in ("seq", "step", "attempt"):
        return draw(st.integers(0, 10**6).filter(lambda v: v != old))
    if field == "phase":
        return draw(st.sampled_from([p for p in Phase if p is not old]))
    if field == "recorded_at":
        shift = draw(st.integers(-shift_us, shift_us).filter(bool))
        return old + timedelta(microseconds=shift)
    # Any other text, even non-JSON: the store could hold anything after an edit.
    return draw(texts.filter(lambda v: v != old))


@settings(max_examples=200, deadline=None)
@given(chain=chains())
def test_random_chain_verifies(chain: list[JournalEntry]) -> None:
    report = verify_chain(SAGA, chain)
    assert report.ok and report.entries == len(chain) and report.head_hash == chain[-1].hash
    assert report.closed == (chain[-1].phase is Phase.SAGA_CLOSED)


@settings(max_examples=400, deadline=None)
@given(chain=chains(), data=st.data())
def test_any_single_field_mutation_is_detected_at_that_entry(
    chain: list[JournalEntry], data: st.DataObject
) -> None:
    k = data.draw(st.integers(1, len(chain)), label="seq")
    field = data.draw(st.sampled_from(ALL_FIELDS), label="field")
    mutated = replace(chain[k - 1], **{field: _other_value(data.draw, chain[k - 1], field)})
    """Every field but the hash is in the entry's bytes: one edited without them is
    tampering at that entry; the hash alone edited no longer matches the bytes."""
    report = verify_chain(SAGA, [*chain[: k - 1], mutated, *chain[k:]])
    expected = BreakReason.HASH_MISMATCH if field == "hash" else BreakReason.TAMPERED
    assert not report.ok
    assert report.first_broken_seq == k
    assert report.reason == expected
    assert report.head_hash == (chain[k - 2].hash if k > 1 else GENESIS)


@settings(max_examples=300, deadline=None)
@given(chain=chains(), data=st.data())
def test_mutation_with_recomputed_hash_surfaces_at_the_next_entry(
    chain: list[JournalEntry], data: st.DataObject
) -> None:
    """Resealing entry k makes k itself verify; the chain then breaks at k+1's link. At
    the head nothing in the chain is left to disagree: only the head hash changed, which
    is why heads are checkpointed outside the database (docs/hash-chain.md section 5)."""
    k = data.draw(st.integers(1, len(chain)), label="seq")
    field = data.draw(st.sampled_from(CONTENT_FIELDS), label="field")
    mutated = _reseal(
        replace(chain[k - 1], **{field: _other_value(data.draw, chain[k - 1], field)})
    )
    tampered = [*chain[: k - 1], mutated, *chain[k:]]
    report = verify_chain(SAGA, tampered)
    if k < len(chain):
        assert (report.ok, report.first_broken_seq) == (False, k + 1)
        # A resealed entry turned into SAGA_CLOSED closes the chain before k+1.
        closes = mutated.phase is Phase.SAGA_CLOSED
        assert report.reason == (BreakReason.AFTER_CLOSE if closes else BreakReason.BROKEN_LINK)
    else:
        assert report.ok and report.head_hash == mutated.hash != chain[-1].hash


@settings(max_examples=100, deadline=None)
@given(chain=chains(), data=st.data())
def test_blanked_hash_is_not_chained_and_blanked_link_is_tampering(
    chain: list[JournalEntry], data: st.DataObject
) -> None:
    k = data.draw(st.integers(1, len(chain)), label="seq")
    field = data.draw(st.sampled_from(["hash", "prev_hash"]), label="field")
    report = verify_chain(SAGA, [*chain[: k - 1], replace(chain[k - 1], **{field: ""}), *chain[k:]])
    expected = BreakReason.NOT_CHAINED if field == "hash" else BreakReason.TAMPERED
    assert (report.ok, report.first_broken_seq, report.reason) == (False, k, expected)


@settings(max_examples=100, deadline=None)
@given(chain=chains(), data=st.data())
def test_deleting_a_middle_entry_is_a_gap_but_a_truncated_tail_verifies(
    chain: list[JournalEntry], data: st.DataObject
) -> None:
    k = data.draw(st.integers(1, len(chain)), label="seq")
    report = verify_chain(SAGA, chain[: k - 1] + chain[k:])
    if k < len(chain):
        assert (report.first_broken_seq, report.reason) == (k, BreakReason.GAP)
    else:  # the documented limit of a chain alone: a shorter chain is still a chain
        assert report.ok and report.entries == len(chain) - 1
