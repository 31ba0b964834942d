"""begin_step on real PostgreSQL: the claim of a tool step, on both of its paths.

A store that wrote the saga's last entry itself ("warm") tries the one-round-trip claim
(`sagacity_append` called as a claim) first and falls back to the locked path on any
miss; a store that has not ("cold") takes the locked path (one statement reading the
step's rows, the head and the fence under the saga's advisory lock). Every decision must
be the same on both: a recorded outcome returned, an earlier attempt's INTENT reported,
a fence honoured, the same attempt's retry kept, racing attempts claiming exactly once.
The path taken is counted by wrapping the store's own locked claim, so a test that means
to exercise a fallback shows it happened.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from itertools import pairwise

import psycopg
import pytest
from psycopg import sql

from sagacity._errors import JournalConflictError, SagaClosedError
from sagacity.audit._export import verify_store
from sagacity.journal._chain import seal
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase
from sagacity.stores._base import StepClaim
from sagacity.stores._postgres import PostgresJournalStore
from sagacity.stores._postgres_sql import append_args, lock_key, split_schema
from tests.support.pg_fixtures import fresh_schema_url

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def schema_url(postgres_url: str) -> Iterator[str]:
    yield from fresh_schema_url(postgres_url, "sagacity_bs")


@pytest.fixture
def open_store(schema_url: str) -> Iterator[Callable[[], PostgresJournalStore]]:
    opened: list[PostgresJournalStore] = []

    def make() -> PostgresJournalStore:
        opened.append(PostgresJournalStore.from_url(schema_url, max_size=2))
        return opened[-1]

    yield make
    for store in opened:
        store.close()


class Counted:
    """Counts the locked claims a store takes (its own method, wrapped, still called)."""

    def __init__(self, store: PostgresJournalStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.locked = 0
        real = store._begin_step_locked

        def counted(*args: object) -> StepClaim:
            self.locked += 1
            return real(*args)  # type: ignore[arg-type]

        monkeypatch.setattr(store, "_begin_step_locked", counted)


def intent(saga: str, step: int = 1, attempt: int = 1, amount: int = 5) -> EntryDraft:
    return EntryDraft.new(
        saga, Phase.INTENT, step=step, attempt=attempt, tool="pay", input={"amount": amount}
    )


def executed(saga: str, step: int = 1, attempt: int = 1) -> EntryDraft:
    return EntryDraft.new(
        saga, Phase.EXECUTED, step=step, attempt=attempt, tool="pay", input={"amount": 5},
        result={"paid": True},
    )  # fmt: skip


def opened_saga(store: PostgresJournalStore) -> tuple[str, JournalEntry]:
    """A new saga whose head this store wrote, so its next claim tries one round trip."""
    saga = f"saga-{uuid.uuid4().hex[:12]}"
    return saga, store.append(EntryDraft.new(saga, Phase.SAGA_OPENED, input={"goal": "pay"}))


def assert_chain(store: PostgresJournalStore, saga: str, phases: list[Phase]) -> None:
    stored = list(store.entries(saga))
    assert [e.phase for e in stored] == phases
    assert [e.seq for e in stored] == list(range(1, len(phases) + 1))
    assert all(b.prev_hash == a.hash for a, b in pairwise(stored))
    assert verify_store(store, saga).ok


def test_a_warm_store_claims_in_one_round_trip_without_the_locked_path(
    open_store: Callable[[], PostgresJournalStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store()
    saga, head = opened_saga(store)
    paths = Counted(store, monkeypatch)
    claim = store.begin_step(intent(saga))
    assert claim.claimed and claim.intent is not None and claim.outcome is None
    assert claim.intent.prev_hash == head.hash and claim.intent.seq == 2
    assert paths.locked == 0  # the one-round-trip claim decided it
    store.append(executed(saga))
    second = store.begin_step(intent(saga, step=2))
    assert second.claimed and paths.locked == 0
    assert_chain(store, saga, [Phase.SAGA_OPENED, Phase.INTENT, Phase.EXECUTED, Phase.INTENT])


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_recorded_outcome_is_returned_on_retry(
    open_store: Callable[[], PostgresJournalStore], monkeypatch: pytest.MonkeyPatch, warm: bool
) -> None:
    store = open_store()
    saga, _ = opened_saga(store)
    first = store.begin_step(intent(saga))
    done = store.append(executed(saga))
    retrier = store if warm else open_store()
    paths = Counted(retrier, monkeypatch)
    retry = retrier.begin_step(intent(saga, attempt=2))
    assert not retry.claimed and not retry.fenced
    assert retry.outcome == done and retry.intent == first.intent
    assert paths.locked == 1  # a warm store's one-round-trip claim missed and fell back
    assert_chain(store, saga, [Phase.SAGA_OPENED, Phase.INTENT, Phase.EXECUTED])


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_an_earlier_attempts_intent_without_outcome_is_reported_not_claimed(
    open_store: Callable[[], PostgresJournalStore], monkeypatch: pytest.MonkeyPatch, warm: bool
) -> None:
    """Unknown outcome: attempt 1 journaled INTENT and vanished; attempt 2 must not run."""
    store = open_store()
    saga, _ = opened_saga(store)
    first = store.begin_step(intent(saga))
    retrier = store if warm else open_store()
    paths = Counted(retrier, monkeypatch)
    second = retrier.begin_step(intent(saga, attempt=2))
    assert not second.claimed and second.outcome is None and second.intent == first.intent
    assert paths.locked == 1
    assert_chain(store, saga, [Phase.SAGA_OPENED, Phase.INTENT])


def test_the_same_attempt_retried_keeps_its_claim_and_a_changed_one_conflicts(
    open_store: Callable[[], PostgresJournalStore],
) -> None:
    store = open_store()
    saga, _ = opened_saga(store)
    first = store.begin_step(intent(saga))
    again = store.begin_step(intent(saga))
    assert again.claimed and again.intent == first.intent
    with pytest.raises(JournalConflictError):
        store.begin_step(intent(saga, amount=6))
    assert_chain(store, saga, [Phase.SAGA_OPENED, Phase.INTENT])


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_fenced_step_is_not_claimed(
    open_store: Callable[[], PostgresJournalStore], monkeypatch: pytest.MonkeyPatch, warm: bool
) -> None:
    """A compensation left a tombstone for step 1 before its late forward attempt came."""
    store = open_store()
    saga, _ = opened_saga(store)
    compensator = open_store()
    compensator.fence(saga, 1)
    claimer = store if warm else open_store()
    paths = Counted(claimer, monkeypatch)
    claim = claimer.begin_step(intent(saga))
    assert claim == StepClaim(False, None, None, True)
    assert paths.locked == 1
    assert_chain(store, saga, [Phase.SAGA_OPENED])


def test_a_fence_landing_between_two_claims_stops_the_second(
    open_store: Callable[[], PostgresJournalStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store claimed step 1 in one round trip, so it believes it is alone; another
    process then fences step 2. The store's next claim must see the fence."""
    store = open_store()
    saga, _ = opened_saga(store)
    paths = Counted(store, monkeypatch)
    assert store.begin_step(intent(saga)).claimed and paths.locked == 0
    open_store().fence(saga, 2)
    claim = store.begin_step(intent(saga, step=2))
    assert claim.fenced and not claim.claimed and claim.intent is None
    assert paths.locked == 1
    assert_chain(store, saga, [Phase.SAGA_OPENED, Phase.INTENT])


def test_a_stale_cached_head_falls_back_and_links_to_the_real_head(
    open_store: Callable[[], PostgresJournalStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store()
    saga, mine = opened_saga(store)
    other = open_store().append(EntryDraft.new(saga, Phase.AWAITING_APPROVAL, step=9))
    assert other.prev_hash == mine.hash  # the store's cached head is now stale
    paths = Counted(store, monkeypatch)
    claim = store.begin_step(intent(saga))
    assert claim.claimed and claim.intent is not None
    assert claim.intent.prev_hash == other.hash and claim.intent.seq == 3
    assert paths.locked == 1  # the database saw the head had moved; the fallback claimed
    assert_chain(store, saga, [Phase.SAGA_OPENED, Phase.AWAITING_APPROVAL, Phase.INTENT])
    # Its own next append finds its INTENT still the head: alone again, one round trip.
    store.append(executed(saga))
    assert store.begin_step(intent(saga, step=2)).claimed and paths.locked == 1


def test_a_closed_saga_refuses_a_claim(open_store: Callable[[], PostgresJournalStore]) -> None:
    store = open_store()
    saga, _ = opened_saga(store)
    store.append(EntryDraft.new(saga, Phase.SAGA_CLOSED))
    with pytest.raises(SagaClosedError):
        store.begin_step(intent(saga))
    assert_chain(store, saga, [Phase.SAGA_OPENED, Phase.SAGA_CLOSED])


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_racing_attempts_of_one_step_claim_exactly_once(
    open_store: Callable[[], PostgresJournalStore], warm: bool
) -> None:
    """Eight attempts of step 1 on eight stores (eight worker processes), at once. Warm:
    every store has the saga's head cached as alone, so all eight try the one-round-trip
    claim together; the database decides, seven fall back and see the winner's INTENT."""
    stores = [open_store() for _ in range(8)]
    saga, _ = opened_saga(stores[0])
    if warm:  # the same SAGA_OPENED, idempotent: each store now holds the head as alone
        for store in stores[1:]:
            store.append(EntryDraft.new(saga, Phase.SAGA_OPENED, input={"goal": "pay"}))
    barrier = threading.Barrier(8)
    claims: list[StepClaim] = []
    errors: list[BaseException] = []

    def race(n: int) -> None:
        try:
            barrier.wait(timeout=30)
            claims.append(stores[n].begin_step(intent(saga, attempt=n + 1)))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=race, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    winners = [c for c in claims if c.claimed]
    assert len(claims) == 8 and len(winners) == 1
    assert all(c.intent == winners[0].intent and c.outcome is None for c in claims)
    assert_chain(stores[0], saga, [Phase.SAGA_OPENED, Phase.INTENT])


def test_the_claim_function_inserts_only_an_untouched_step_at_the_head(
    open_store: Callable[[], PostgresJournalStore], schema_url: str, postgres_url: str
) -> None:
    """sagacity_append called directly as a claim, as any client of the schema could: every
    miss inserts nothing and says why (1 step taken, 2 head moved, 3 fenced, 4 not an
    INTENT); only an INTENT for an untouched, unfenced step at the head goes in."""
    store = open_store()
    saga, head = opened_saga(store)
    store.begin_step(intent(saga, step=1))  # step 1 taken (the store's head moves on)
    store.fence(saga, 3)
    current = store.head(saga)
    assert current is not None
    now = store.clock()

    def sealed(draft: EntryDraft, on: JournalEntry) -> JournalEntry:
        return seal(draft, seq=on.seq + 1, prev_hash=on.hash, recorded_at=now)

    schema = split_schema(schema_url)[1]

    def claim(entry: JournalEntry) -> int:
        args = append_args(lock_key(saga), entry, claim=True)
        call = sql.SQL("SELECT {}(" + ", ".join(["%s"] * len(args)) + ")").format(
            sql.Identifier(schema, "sagacity_append")
        )
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            row = conn.execute(call, args).fetchone()
        assert row is not None
        return int(row[0])

    assert claim(sealed(intent(saga, step=1, attempt=2), current)) == 1
    assert claim(sealed(intent(saga, step=2), head)) == 2  # linked to a stale head
    assert claim(sealed(intent(saga, step=3), current)) == 3
    assert claim(sealed(executed(saga, step=2), current)) == 4
    assert_chain(store, saga, [Phase.SAGA_OPENED, Phase.INTENT])
    assert claim(sealed(intent(saga, step=2), current)) == 0
    assert_chain(store, saga, [Phase.SAGA_OPENED, Phase.INTENT, Phase.INTENT])
