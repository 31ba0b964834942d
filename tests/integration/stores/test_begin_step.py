"""begin_step: the atomic claim of a tool step. Two attempts of one step (a zombie and
its retry) can never both run the tool, whatever the store."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import JournalStore, open_store


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JournalStore]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/j.db"
    s = open_store(url)
    yield s
    s.close()


def intent(attempt: int, step: int = 1) -> EntryDraft:
    return EntryDraft.new("s", Phase.INTENT, step=step, attempt=attempt, tool="charge", input={})


def test_first_attempt_claims_and_a_concurrent_second_does_not(store: JournalStore) -> None:
    first = store.begin_step(intent(1))
    second = store.begin_step(intent(2))
    assert first.claimed and first.intent is not None and first.intent.attempt == 1
    assert not second.claimed and second.outcome is None
    assert second.intent == first.intent  # reported: an earlier attempt's INTENT, no outcome
    assert [e.phase for e in store.entries("s")] == [Phase.INTENT]


def test_a_retried_begin_step_of_the_same_attempt_keeps_its_claim(store: JournalStore) -> None:
    assert store.begin_step(intent(1)).claimed
    again = store.begin_step(intent(1))
    assert again.claimed and len(list(store.entries("s"))) == 1


def test_a_recorded_outcome_is_returned_instead_of_a_claim(store: JournalStore) -> None:
    store.begin_step(intent(1))
    store.append(EntryDraft.new("s", Phase.EXECUTED, step=1, attempt=1, tool="charge", result=7))
    claim = store.begin_step(intent(2))
    assert not claim.claimed and claim.outcome is not None and claim.outcome.result == 7
    assert claim.intent is not None and claim.intent.attempt == 1


def test_a_fenced_step_is_not_claimed(store: JournalStore) -> None:
    store.fence("s", 1)
    claim = store.begin_step(intent(1))
    assert not claim.claimed and claim.fenced and claim.intent is None
    assert list(store.entries("s")) == []


def test_racing_attempts_claim_exactly_once(store: JournalStore) -> None:
    barrier = threading.Barrier(8)
    claims: list[bool] = []

    def race(attempt: int) -> None:
        barrier.wait()
        claims.append(store.begin_step(intent(attempt)).claimed)

    threads = [threading.Thread(target=race, args=(n,)) for n in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(claims) == [False] * 7 + [True]
    assert [e.phase for e in store.entries("s")] == [Phase.INTENT]
