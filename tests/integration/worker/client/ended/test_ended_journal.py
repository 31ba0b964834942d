"""What the journal says of a saga that ended without closing, without any server: its
open chain is found, and its live steps, unknown outcomes and pending approvals are read
from its entries alone (worker.ended_sagas)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import JournalStore, MemoryJournalStore, open_store
from sagacity.worker.client._client import SagaSummary
from sagacity.worker.client._ended_sagas import _ended, ended_json, live_lines, open_chains


def journal(store: JournalStore | None = None) -> JournalStore:
    store = store if store is not None else MemoryJournalStore()
    drafts = [
        ("open", Phase.SAGA_OPENED, 0, "", None, None),
        ("open", Phase.INTENT, 1, "reserve_inventory", {"sku": "w"}, None),
        ("open", Phase.EXECUTED, 1, "reserve_inventory", {"sku": "w"}, {"r": "open:1"}),
        ("open", Phase.INTENT, 2, "charge_card", {"amount": 5}, None),
        ("open", Phase.EXECUTED, 2, "charge_card", {"amount": 5}, {"c": "open:2"}),
        ("open", Phase.COMPENSATED, 2, "charge_card", None, None),
        ("open", Phase.INTENT, 3, "ship_order", {"to": "x"}, None),
        ("open", Phase.AWAITING_APPROVAL, 4, "send_wire", {"amount": 5}, None),
        ("closed", Phase.SAGA_OPENED, 0, "", None, None),
        ("closed", Phase.SAGA_CLOSED, 0, "", None, {"status": "COMPLETED"}),
    ]
    for saga, phase, step, tool, args, result in drafts:
        store.append(EntryDraft.new(saga, phase, step=step, tool=tool, input=args, result=result))
    return store


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JournalStore]:
    """Each store's own `open_sagas` (PostgreSQL and SQLite answer in one query, the
    memory store over its heads)."""
    if request.param == "postgres":
        url = request.getfixturevalue("pg_journal_url")
    else:
        url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/j.db"
    store = open_store(url)
    yield store
    store.close()


def test_open_chains_are_those_without_saga_closed(any_store: JournalStore) -> None:
    store = journal(any_store)
    store.append(EntryDraft.new("also-open", Phase.SAGA_OPENED))
    assert open_chains(store) == ["also-open", "open"]


def test_an_ended_saga_shows_what_is_live_from_its_journal() -> None:
    entries = list(journal().entries("open"))
    summary = SagaSummary("open", "run-1", "AWAITING_APPROVAL", "TERMINATED", None, None, None, "q")
    ended = _ended("open", summary, entries, how="terminated (by hand)")

    assert [(s.step, s.tool) for s in ended.executed] == [(1, "reserve_inventory")]
    assert [(s.step, s.tool) for s in ended.unknown] == [(3, "ship_order")]
    assert ended.awaiting == (4,)
    assert ended.resettable and ended.journaled and ended.head_seq == len(entries)
    assert ended.commands == (
        "sagacity journal open",
        "sagacity compensate open --actor NAME --reason 'WHY'",
    )
    assert live_lines(ended) == [
        'step 1 reserve_inventory {"sku": "w"} → {"r": "open:1"} (seq 3): executed',
        "step 3 ship_order: outcome unknown",
        "step 4: awaited approval, nothing ran",
    ]
    assert ended_json(ended)["executed"] == [
        {"step": 1, "tool": "reserve_inventory", "seq": 3, "args": {"sku": "w"},
         "result": {"r": "open:1"}}
    ]  # fmt: skip


def test_a_run_that_ended_by_its_own_code_is_not_offered_a_reset() -> None:
    entries = list(journal().entries("open"))
    summary = SagaSummary("open", "run-1", "RUNNING", "FAILED", None, None, None, "q")
    ended = _ended("open", summary, entries, how="failed (a bug)")

    assert not ended.resettable and "by hand" in ended.note
    assert not any("compensate" in c for c in ended.commands)


def test_a_saga_the_searched_journal_does_not_hold_says_so() -> None:
    summary = SagaSummary("else", "run-1", "RUNNING", "TERMINATED", None, None, None, "q")
    ended = _ended("else", summary, [], how="terminated")

    assert not ended.journaled and not ended.resettable and ended.commands == ()
    assert live_lines(ended) == ["(not in the journal searched)"]
    assert "not the one searched" in ended.note
