"""Concurrent appends: every append lands, seqs are dense from 1, nothing is lost or
forked, and every chain verifies.

Each scenario runs with all threads sharing one store (appends to a saga serialized
in-process, then by the database) and with one store per thread, which is what separate
worker processes look like to the database: there the advisory lock and the
compare-and-append check are what keep the chain whole.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from itertools import pairwise

import pytest

from sagacity.journal._chain import verify_chain
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase
from sagacity.journal._recipe import GENESIS
from sagacity.stores._postgres import PostgresJournalStore
from tests.support.pg_fixtures import fresh_schema_url

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def schema_url(postgres_url: str) -> Iterator[str]:
    yield from fresh_schema_url(postgres_url, "sagacity_c")


@pytest.fixture(params=["shared", "per-thread"])
def stores(
    request: pytest.FixtureRequest, schema_url: str
) -> Iterator[Callable[[int], list[PostgresJournalStore]]]:
    """Factory: n stores for n threads, either one shared store or one store each."""
    opened: list[PostgresJournalStore] = []

    def make(n: int) -> list[PostgresJournalStore]:
        if request.param == "shared":
            opened.append(PostgresJournalStore.from_url(schema_url, max_size=8))
            return [opened[-1]] * n
        opened.extend(PostgresJournalStore.from_url(schema_url, max_size=1) for _ in range(n))
        return opened[-n:]

    yield make
    for store in opened:
        store.close()


def run_threads(jobs: list[Callable[[], list[JournalEntry]]]) -> list[JournalEntry]:
    """Start all jobs at once (Barrier), join, re-raise the first failure, and return every
    entry the appends returned."""
    barrier = threading.Barrier(len(jobs))
    results: list[list[JournalEntry]] = [[] for _ in jobs]
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            barrier.wait(timeout=60)
            results[index] = jobs[index]()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=200)
    assert not any(thread.is_alive() for thread in threads), "an append hung"
    if errors:
        raise errors[0]
    return [entry for result in results for entry in result]


def appender(
    store: PostgresJournalStore, drafts: list[EntryDraft]
) -> Callable[[], list[JournalEntry]]:
    return lambda: [store.append(draft) for draft in drafts]


def assert_whole_chain(
    store: PostgresJournalStore,
    saga_id: str,
    drafts: list[EntryDraft],
    returned: list[JournalEntry],
) -> None:
    """Dense seqs from 1, each draft's key exactly once, each returned entry stored as
    returned, prev_hash links intact, and verify_chain agrees."""
    stored = list(store.entries(saga_id))
    assert [e.seq for e in stored] == list(range(1, len(drafts) + 1))
    assert sorted(e.key for e in stored) == sorted(d.key for d in drafts)
    by_seq = {e.seq: e for e in stored}
    mine = [e for e in returned if e.saga_id == saga_id]
    assert len(mine) == len(drafts)
    assert all(by_seq[e.seq] == e for e in mine)
    assert stored[0].prev_hash == GENESIS
    assert all(b.prev_hash == a.hash for a, b in pairwise(stored))
    report = verify_chain(saga_id, stored)
    assert report.ok, report.describe()
    assert report.entries == len(drafts)


def new_saga() -> str:
    return f"saga-{uuid.uuid4().hex[:12]}"


def test_eight_writers_one_saga(stores: Callable[[int], list[PostgresJournalStore]]) -> None:
    saga = new_saga()
    per_thread = [
        [
            EntryDraft.new(saga, Phase.INTENT, step=t * 1000 + i, attempt=1 + i % 3, input=[t, i])
            for i in range(250)
        ]
        for t in range(8)
    ]
    writers = stores(8)
    returned = run_threads([appender(writers[t], per_thread[t]) for t in range(8)])
    assert_whole_chain(writers[0], saga, [d for ds in per_thread for d in ds], returned)


def test_sixteen_writers_race_for_the_first_entry(
    stores: Callable[[int], list[PostgresJournalStore]],
) -> None:
    saga = new_saga()
    drafts = [EntryDraft.new(saga, Phase.INTENT, step=t + 1) for t in range(16)]
    writers = stores(16)
    returned = run_threads([appender(writers[t], [drafts[t]]) for t in range(16)])
    assert_whole_chain(writers[0], saga, drafts, returned)
    assert sum(1 for e in returned if e.prev_hash == GENESIS) == 1


def test_sixteen_writers_race_with_the_same_entry(
    stores: Callable[[int], list[PostgresJournalStore]],
) -> None:
    saga = new_saga()
    draft = EntryDraft.new(saga, Phase.SAGA_OPENED, input={"goal": "refund"})
    writers = stores(16)
    returned = run_threads([appender(writers[t], [draft]) for t in range(16)])
    assert len(returned) == 16 and all(e == returned[0] for e in returned)
    assert list(writers[0].entries(saga)) == [returned[0]]


def test_eight_sagas_in_parallel(stores: Callable[[int], list[PostgresJournalStore]]) -> None:
    sagas = [new_saga() for _ in range(8)]
    per_saga = [
        [EntryDraft.new(saga, Phase.EXECUTED, step=i, result={"i": i}) for i in range(250)]
        for saga in sagas
    ]
    writers = stores(8)
    returned = run_threads([appender(writers[t], per_saga[t]) for t in range(8)])
    for saga, drafts in zip(sagas, per_saga, strict=True):
        assert_whole_chain(writers[0], saga, drafts, returned)


def test_writers_interleaving_across_sagas(
    stores: Callable[[int], list[PostgresJournalStore]],
) -> None:
    sagas = [new_saga() for _ in range(8)]
    per_thread = [
        [
            EntryDraft.new(sagas[(t + i) % 8], Phase.INTENT, step=t * 1000 + i, input=i)
            for i in range(200)
        ]
        for t in range(8)
    ]
    writers = stores(8)
    returned = run_threads([appender(writers[t], per_thread[t]) for t in range(8)])
    everything = [d for ds in per_thread for d in ds]
    for saga in sagas:
        assert_whole_chain(writers[0], saga, [d for d in everything if d.saga_id == saga], returned)


def test_begin_step_racing_attempts_claim_exactly_once(postgres_url: str) -> None:
    """Eight attempts of one step, each on its own store (like eight worker processes):
    exactly one claims it and journals INTENT; the others see that INTENT."""
    import threading
    import uuid

    from sagacity.journal._entry import EntryDraft
    from sagacity.journal._phases import Phase
    from sagacity.stores import open_store

    schema = f"t_claim_{uuid.uuid4().hex[:8]}"
    url = f"{postgres_url}?schema={schema}"
    stores = [open_store(url) for _ in range(8)]
    barrier = threading.Barrier(8)
    claims: list[bool] = []

    def race(n: int) -> None:
        draft = EntryDraft.new("s", Phase.INTENT, step=1, attempt=n + 1, tool="t", input={})
        barrier.wait()
        claims.append(stores[n].begin_step(draft).claimed)

    try:
        threads = [threading.Thread(target=race, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(claims) == [False] * 7 + [True]
        assert [e.phase for e in stores[0].entries("s")] == [Phase.INTENT]
    finally:
        for s in stores:
            s.close()
        import psycopg

        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
