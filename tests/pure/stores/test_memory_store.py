"""The in-memory store honours the JournalStore contract: idempotent, conflict-refusing,
closed after SAGA_CLOSED, dense and verifiable under concurrent appends, clock injected."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sagacity._errors import InvalidEntryError, JournalConflictError, SagaClosedError
from sagacity.journal._chain import verify_chain
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase
from sagacity.journal._recipe import GENESIS
from sagacity.stores import open_store
from sagacity.stores._memory import MemoryJournalStore

T0 = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)


def _intent(step: int, attempt: int = 1, **fields: Any) -> EntryDraft:
    return EntryDraft.new("s", Phase.INTENT, step=step, attempt=attempt, tool="t", **fields)


def test_open_store_memory_url_gives_a_fresh_store() -> None:
    first, second = open_store("memory://"), open_store("memory://")
    assert isinstance(first, MemoryJournalStore) and first is not second
    first.append(_intent(1))
    assert list(second.sagas()) == []


def test_same_logical_entry_twice_is_one_entry() -> None:
    ticks = iter([T0, T0 + timedelta(seconds=5)])
    store = MemoryJournalStore(clock=lambda: next(ticks))
    first = store.append(_intent(1, input={"amount": 100}))
    again = store.append(_intent(1, input={"amount": 100}))
    assert again == first and again.recorded_at == T0  # the retry returns the original
    assert [e.seq for e in store.entries("s")] == [1]


def test_retry_with_another_timestamp_is_still_the_same_entry() -> None:
    store = MemoryJournalStore()
    first = store.append(_intent(1, recorded_at=T0))
    assert store.append(_intent(1, recorded_at=T0 + timedelta(hours=1))) == first
    assert len(list(store.entries("s"))) == 1


@pytest.mark.parametrize(
    "changed",
    [{"input": {"amount": 101}}, {"result": ""}, {"error": "x"}, {"actor": "bob"}],
    ids=["input", "result", "error", "actor"],
)
def test_same_key_with_different_content_conflicts(changed: dict[str, object]) -> None:
    store = MemoryJournalStore()
    first = store.append(_intent(1, input={"amount": 100}))
    with pytest.raises(JournalConflictError, match="step 1 attempt 1"):
        store.append(_intent(1, **({"input": {"amount": 100}} | changed)))
    assert list(store.entries("s")) == [first]


def test_same_key_with_another_tool_conflicts() -> None:
    store = MemoryJournalStore()
    store.append(_intent(1))
    with pytest.raises(JournalConflictError):
        store.append(EntryDraft.new("s", Phase.INTENT, step=1, tool="other"))


def test_new_attempt_phase_or_step_is_a_new_entry() -> None:
    store = MemoryJournalStore()
    store.append(_intent(1))
    store.append(_intent(1, attempt=2))
    store.append(EntryDraft.new("s", Phase.EXECUTED, step=1, tool="t"))
    store.append(_intent(2))
    assert [e.key[1:] for e in store.entries("s")] == [
        (1, "INTENT", 1),
        (1, "INTENT", 2),
        (1, "EXECUTED", 1),
        (2, "INTENT", 1),
    ]
    assert [e.seq for e in store.entries("s")] == [1, 2, 3, 4]


def test_append_after_close_is_refused_but_a_retry_still_returns() -> None:
    store = MemoryJournalStore()
    opened = store.append(EntryDraft.new("s", Phase.SAGA_OPENED))
    closed = store.append(EntryDraft.new("s", Phase.SAGA_CLOSED, result="COMPLETED"))
    with pytest.raises(SagaClosedError, match="closed"):
        store.append(_intent(1))
    # At-least-once retries of entries already recorded are answered, not refused.
    assert store.append(EntryDraft.new("s", Phase.SAGA_CLOSED, result="COMPLETED")) == closed
    assert store.append(EntryDraft.new("s", Phase.SAGA_OPENED)) == opened
    assert list(store.entries("s")) == [opened, closed]
    assert verify_chain("s", store.entries("s")).closed


def test_other_sagas_are_not_closed() -> None:
    store = MemoryJournalStore()
    store.append(EntryDraft.new("s", Phase.SAGA_CLOSED))
    entry = store.append(EntryDraft.new("t", Phase.SAGA_OPENED))
    assert (entry.seq, entry.prev_hash) == (1, GENESIS)


def _hammer(store: MemoryJournalStore, drafts_for: list[list[EntryDraft]]) -> list[list[int]]:
    barrier = threading.Barrier(len(drafts_for))
    seqs: list[list[int]] = [[] for _ in drafts_for]
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            barrier.wait()
            for draft in drafts_for[index]:
                seqs[index].append(store.append(draft).seq)
        except BaseException as exc:  # surfaced below: a lost append must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(drafts_for))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    return seqs


def test_eight_threads_append_a_dense_verifiable_chain() -> None:
    store = MemoryJournalStore()
    per_thread = [[_intent(t * 1000 + i + 1) for i in range(250)] for t in range(8)]
    seqs = _hammer(store, per_thread)
    chain = list(store.entries("s"))
    assert [e.seq for e in chain] == list(range(1, 2001))
    assert len({e.key for e in chain}) == 2000
    assert all(s == sorted(s) for s in seqs)  # each writer's appends stay in its order
    assert sorted(s for thread in seqs for s in thread) == list(range(1, 2001))
    report = verify_chain("s", chain)
    assert report.ok and report.entries == 2000 and report.head_hash == chain[-1].hash


def test_concurrent_retries_of_the_same_entries_write_each_once() -> None:
    store = MemoryJournalStore()
    drafts = [_intent(i + 1, input={"i": i}) for i in range(250)]
    seqs = _hammer(store, [drafts] * 8)
    assert all(s == seqs[0] for s in seqs)  # every retry saw the same entry
    assert [e.seq for e in store.entries("s")] == list(range(1, 251))


def test_clock_stamps_entries_unless_the_draft_carries_a_time() -> None:
    ticks = iter(T0 + timedelta(microseconds=i) for i in range(10))
    store = MemoryJournalStore(clock=lambda: next(ticks))
    first = store.append(_intent(1))
    second = store.append(_intent(2))
    explicit = store.append(_intent(3, recorded_at=datetime(2020, 1, 1, tzinfo=UTC)))
    assert (first.recorded_at, second.recorded_at) == (T0, T0 + timedelta(microseconds=1))
    assert explicit.recorded_at == datetime(2020, 1, 1, tzinfo=UTC)
    assert first.recorded_at_text == "2026-03-01T09:30:00.000000Z"
    assert verify_chain("s", store.entries("s")).ok


def test_naive_clock_is_refused_and_nothing_is_written() -> None:
    store = MemoryJournalStore(clock=lambda: datetime(2026, 3, 1, 9, 30))
    with pytest.raises(InvalidEntryError, match="naive"):
        store.append(_intent(1))
    assert store.head("s") is None and list(store.sagas()) == []


def test_reads_head_sagas_steps_and_after_seq() -> None:
    store = MemoryJournalStore()
    for saga in ("b", "a"):
        store.append(EntryDraft.new(saga, Phase.SAGA_OPENED))
        store.append(EntryDraft.new(saga, Phase.INTENT, step=1, tool="t"))
        store.append(EntryDraft.new(saga, Phase.EXECUTED, step=1, tool="t", result=1))
    assert list(store.sagas()) == ["a", "b"]
    head = store.head("a")
    assert isinstance(head, JournalEntry) and head.seq == 3 and store.head("zz") is None
    assert [e.phase for e in store.step_entries("a", 1)] == [Phase.INTENT, Phase.EXECUTED]
    assert [e.seq for e in store.entries("a", after_seq=1)] == [2, 3]
    assert list(store.entries("unknown")) == []


def test_fence_is_per_saga_and_step() -> None:
    store = MemoryJournalStore()
    store.fence("s", 2)
    assert store.is_fenced("s", 2)
    assert not store.is_fenced("s", 1) and not store.is_fenced("t", 2)
