"""PostgresJournalStore against a real PostgreSQL: round trips, idempotency, reads,
failures that must be loud, and opening an unreachable database.

The module runs in its own fresh schema (`?schema=`), dropped afterwards.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime

import psycopg
import pytest
from psycopg import sql

from sagacity._errors import (
    InvalidEntryError,
    JournalConflictError,
    JournalError,
    JournalWriteError,
    SagaClosedError,
    StoreUnavailableError,
)
from sagacity.journal._chain import verify_chain
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase
from sagacity.journal._recipe import GENESIS
from sagacity.stores import open_store
from sagacity.stores._postgres import PostgresJournalStore, lock_key, redact_url, split_schema
from tests.support.pg_fixtures import fresh_schema_url

pytestmark = pytest.mark.postgres


def with_schema(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


@pytest.fixture(scope="module")
def schema_url(postgres_url: str) -> Iterator[str]:
    yield from fresh_schema_url(postgres_url, "sagacity_t")


@pytest.fixture(scope="module")
def store(schema_url: str) -> Iterator[PostgresJournalStore]:
    with closing(PostgresJournalStore.from_url(schema_url)) as opened:
        yield opened


def count_rows(store: PostgresJournalStore, postgres_url: str, saga_id: str) -> int:
    table = sql.Identifier(store.schema, "sagacity_journal")
    with psycopg.connect(postgres_url) as conn:
        row = conn.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE saga_id = %s").format(table), (saga_id,)
        ).fetchone()
    assert row is not None
    return int(row[0])


TRICKY_PAYLOADS: list[object] = [
    {"text": "non-BMP 𝄞 😀 \U0010ffff and BMP é ß 中"},
    {"quotes": 'it\'s "quoted" \\ back\\slash', "newlines": "a\nb\r\nc\t"},
    {"nested": {"list": [1, 2.5, -0.0, None, True, {"deep": ["x", {"y": []}]}]}},
    {"floats": [1e21, 1e-7, 123456789.125, 5e-324]},
    {"nul": "before\u0000after"},
    ["top", "level", "list"],
    "a bare string",
    None,
]


def test_round_trip_is_exact(store: PostgresJournalStore, saga_id: str) -> None:
    returned = [store.append(EntryDraft.new(saga_id, Phase.SAGA_OPENED, actor="agent 𝄞"))]
    for step, payload in enumerate(TRICKY_PAYLOADS, start=1):
        returned.append(
            store.append(
                EntryDraft.new(
                    saga_id,
                    Phase.EXECUTED,
                    step=step,
                    tool="tool_😀",
                    input=payload,
                    result={"echo": payload},
                    error="it's\nbroken \u0000 𝄞",
                )
            )
        )
    stored = list(store.entries(saga_id))
    assert stored == returned
    assert [e.input for e in stored[1:]] == TRICKY_PAYLOADS
    assert stored[4].input_json == '{"floats":[1e+21,1e-7,123456789.125,5e-324]}'
    assert stored[5].input == {"nul": "before\x00after"}
    assert store.head(saga_id) == returned[-1]
    assert store.step_entries(saga_id, 3) == [returned[3]]
    assert verify_chain(saga_id, stored).ok


def test_explicit_timestamp_and_odd_saga_id_round_trip(
    store: PostgresJournalStore, postgres_url: str
) -> None:
    odd = f'it\'s "x"; DROP TABLE sagacity_journal; -- 𝄞 {uuid.uuid4().hex[:6]}'
    moment = datetime(2026, 12, 2, 14, 9, 49, 1, tzinfo=UTC)
    entry = store.append(EntryDraft.new(odd, Phase.SAGA_OPENED, recorded_at=moment))
    assert entry.recorded_at == moment
    assert list(store.entries(odd)) == [entry]
    assert entry.prev_hash == GENESIS and entry.material
    assert count_rows(store, postgres_url, odd) == 1


def test_clock_is_used_for_recorded_at(schema_url: str, saga_id: str) -> None:
    fixed = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    with closing(PostgresJournalStore.from_url(schema_url, clock=lambda: fixed)) as clocked:
        entry = clocked.append(EntryDraft.new(saga_id, Phase.SAGA_OPENED))
        assert entry.recorded_at == fixed
        assert clocked.head(saga_id) == entry


def test_same_logical_entry_twice_is_one_row(
    store: PostgresJournalStore, schema_url: str, postgres_url: str, saga_id: str
) -> None:
    draft = EntryDraft.new(saga_id, Phase.INTENT, step=1, tool="charge", input={"amount": 100})
    first = store.append(draft)
    assert store.append(draft) == first  # head cached: the database reports the key taken
    with closing(PostgresJournalStore.from_url(schema_url)) as other:
        assert other.append(draft) == first  # fresh store: decided from rows read back
    assert count_rows(store, postgres_url, saga_id) == 1


def test_same_key_different_content_conflicts_and_writes_nothing(
    store: PostgresJournalStore, schema_url: str, postgres_url: str, saga_id: str
) -> None:
    first = store.append(EntryDraft.new(saga_id, Phase.EXECUTED, step=2, result={"id": 1}))
    store.append(EntryDraft.new(saga_id, Phase.INTENT, step=3))
    changed = EntryDraft.new(saga_id, Phase.EXECUTED, step=2, result={"id": 2})
    with pytest.raises(JournalConflictError, match="different content"):
        store.append(changed)
    with (
        closing(PostgresJournalStore.from_url(schema_url)) as other,
        pytest.raises(JournalConflictError),
    ):
        other.append(changed)
    assert count_rows(store, postgres_url, saga_id) == 2
    assert store.step_entries(saga_id, 2) == [first]


def test_saga_closed_refuses_new_entries_but_retries_return_existing(
    store: PostgresJournalStore, schema_url: str, postgres_url: str, saga_id: str
) -> None:
    opened = store.append(EntryDraft.new(saga_id, Phase.SAGA_OPENED))
    close = EntryDraft.new(saga_id, Phase.SAGA_CLOSED, result={"status": "COMPLETED"})
    closed = store.append(close)
    assert store.append(close) == closed
    assert store.append(EntryDraft.new(saga_id, Phase.SAGA_OPENED)) == opened
    with pytest.raises(SagaClosedError, match="closed"):
        store.append(EntryDraft.new(saga_id, Phase.INTENT, step=1))
    with closing(PostgresJournalStore.from_url(schema_url)) as other:
        assert other.append(close) == closed
        with pytest.raises(SagaClosedError):
            other.append(EntryDraft.new(saga_id, Phase.INTENT, step=1))
    assert count_rows(store, postgres_url, saga_id) == 2
    report = verify_chain(saga_id, store.entries(saga_id))
    assert report.ok and report.closed


def test_stale_head_from_another_writer_is_detected(schema_url: str, saga_id: str) -> None:
    with (
        closing(PostgresJournalStore.from_url(schema_url)) as one,
        closing(PostgresJournalStore.from_url(schema_url)) as two,
    ):
        one.append(EntryDraft.new(saga_id, Phase.SAGA_OPENED))  # `one` now caches seq 1
        two.append(EntryDraft.new(saga_id, Phase.INTENT, step=1))
        third = one.append(EntryDraft.new(saga_id, Phase.EXECUTED, step=1))
        assert third.seq == 3
        assert verify_chain(saga_id, one.entries(saga_id)).ok


def test_entries_stream_in_batches_and_after_seq(schema_url: str, saga_id: str) -> None:
    with closing(PostgresJournalStore.from_url(schema_url)) as small:
        small.batch_size = 7
        appended = [small.append(EntryDraft.new(saga_id, Phase.INTENT, step=i)) for i in range(50)]
        assert list(small.entries(saga_id)) == appended
        assert list(small.entries(saga_id, after_seq=21)) == appended[21:]
        assert list(small.entries(saga_id, after_seq=49)) == appended[49:]
        assert list(small.entries(saga_id, after_seq=50)) == []
        assert list(small.entries("no-such-saga")) == []
        assert small.head("no-such-saga") is None


def test_sagas_sorted_by_code_point_and_batched(schema_url: str) -> None:
    tag = uuid.uuid4().hex[:6]
    mine = [f"{tag}{suffix}" for suffix in ("b", "a", "B", "é", "𝄞", "a b", "ab", "z")]
    with closing(PostgresJournalStore.from_url(schema_url)) as small:
        for saga in mine:
            small.append(EntryDraft.new(saga, Phase.SAGA_OPENED))
        small.append(EntryDraft.new(mine[0], Phase.INTENT, step=1))
        everything = list(small.sagas())
        small.batch_size = 2
        assert list(small.sagas()) == everything
    assert everything == sorted(everything)
    assert [s for s in everything if s.startswith(tag)] == sorted(mine)


def test_fences(store: PostgresJournalStore, saga_id: str) -> None:
    assert not store.is_fenced(saga_id, 3)
    store.fence(saga_id, 3)
    store.fence(saga_id, 3)
    assert store.is_fenced(saga_id, 3)
    assert not store.is_fenced(saga_id, 4)
    assert not store.is_fenced(saga_id + "-other", 3)


@pytest.mark.parametrize("path", ["one round trip", "locked"])
def test_lock_timeout_fails_loudly_and_writes_nothing(
    schema_url: str, postgres_url: str, saga_id: str, path: str
) -> None:
    with closing(PostgresJournalStore.from_url(schema_url, lock_timeout="200ms")) as impatient:
        impatient.append(EntryDraft.new(saga_id, Phase.SAGA_OPENED))
    # A store that just appended the head tries the one-round-trip path; a fresh one locks.
    with closing(PostgresJournalStore.from_url(schema_url, lock_timeout="200ms")) as impatient:
        if path == "one round trip":
            impatient.append(EntryDraft.new(saga_id, Phase.SAGA_OPENED))  # caches the head
        draft = EntryDraft.new(saga_id, Phase.INTENT, step=1)
        with psycopg.connect(postgres_url) as holder:
            holder.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(saga_id),))
            with pytest.raises(JournalWriteError, match="NOT written; retry"):
                impatient.append(draft)
            assert count_rows(impatient, postgres_url, saga_id) == 1
            holder.rollback()
        assert impatient.append(draft).seq == 2
        assert verify_chain(saga_id, impatient.entries(saga_id)).ok


def test_out_of_range_step_is_refused_before_the_database(
    store: PostgresJournalStore, postgres_url: str, saga_id: str
) -> None:
    with pytest.raises(InvalidEntryError, match="step"):
        store.append(EntryDraft.new(saga_id, Phase.INTENT, step=2**31))
    assert count_rows(store, postgres_url, saga_id) == 0


def test_unique_keys_are_the_safety_net(
    store: PostgresJournalStore, postgres_url: str, saga_id: str
) -> None:
    entry = store.append(EntryDraft.new(saga_id, Phase.SAGA_OPENED))
    table = sql.Identifier(store.schema, "sagacity_journal")
    insert = sql.SQL(
        "INSERT INTO {} (saga_id, seq, step, attempt, tool, phase, input_json, result_json,"
        " error_json, actor_json, recorded_at, prev_hash, hash, material)"
        " VALUES (%s, %s, %s, 1, '', %s, '', '', '', 'null', 'x', 'p', 'h', '\\x00'::bytea)"
    ).format(table)
    with psycopg.connect(postgres_url) as conn:
        with pytest.raises(psycopg.errors.UniqueViolation, match="pkey"):
            conn.execute(insert, (saga_id, entry.seq, 5, "INTENT"))
        conn.rollback()
        with pytest.raises(psycopg.errors.UniqueViolation, match="logical_key"):
            conn.execute(insert, (saga_id, entry.seq + 1, 0, "SAGA_OPENED"))


def test_closed_store_refuses_appends(schema_url: str, saga_id: str) -> None:
    closed = PostgresJournalStore.from_url(schema_url)
    closed.close()
    closed.close()
    with pytest.raises(JournalWriteError, match="NOT written"):
        closed.append(EntryDraft.new(saga_id, Phase.SAGA_OPENED))


def test_open_store_dispatches_to_postgres(schema_url: str) -> None:
    with open_store(schema_url) as opened:
        assert isinstance(opened, PostgresJournalStore)
        assert opened.schema == split_schema(schema_url)[1]


@pytest.mark.timeout(60)
def test_unreachable_database_raises_store_unavailable() -> None:
    url = "postgresql://postgres:s3cret@127.0.0.1:1/test?schema=nowhere"
    threads_before = set(threading.enumerate())
    with pytest.raises(StoreUnavailableError) as caught:
        PostgresJournalStore.from_url(url)
    message = str(caught.value)
    assert "postgresql://postgres@127.0.0.1:1/test" in message
    assert "s3cret" not in message
    assert "\n" not in message
    assert "check that PostgreSQL is running" in message
    assert set(threading.enumerate()) <= threads_before  # no half-open pool left behind


def test_bad_schema_name_is_refused() -> None:
    with pytest.raises(StoreUnavailableError, match="plain identifier"):
        PostgresJournalStore.from_url("postgresql://postgres@127.0.0.1:1/test?schema=a;b")


def test_url_helpers() -> None:
    assert (
        redact_url("postgresql://me:pw@db:5432/j?password=pw2&sslmode=disable")
        == "postgresql://me@db:5432/j?sslmode=disable"
    )
    assert split_schema("postgresql://me@db/j?sslmode=disable&schema=s1&options=-c%20x%3Dy") == (
        "postgresql://me@db/j?sslmode=disable&options=-c%20x%3Dy",
        "s1",
    )
    assert split_schema("postgresql:///j") == ("postgresql:///j", "public")
    assert redact_url("postgresql:///j?schema=x") == "postgresql:///j?schema=x"
    assert redact_url("postgres://u:p%40ss@h/j") == "postgres://u@h/j"
    assert lock_key("a") != lock_key("b")
    assert -(2**63) <= lock_key("saga-𝄞") < 2**63


def test_corrupt_row_is_reported_not_misread(store: PostgresJournalStore) -> None:
    """A row no sagacity version writes (edited outside sagacity) fails loudly on read."""
    from sagacity.stores._postgres import row_to_entry

    row = ("s", 1, 0, 1, "", "NOT_A_PHASE", "null", "null", "null", "null", "x", "p", "h", None)
    with pytest.raises(JournalError, match="altered outside sagacity"):
        row_to_entry(row)
    good = store.append(EntryDraft.new(f"s-{uuid.uuid4().hex[:6]}", Phase.SAGA_OPENED))
    assert isinstance(row_to_entry(_as_row(good)), JournalEntry)


def _as_row(entry: JournalEntry) -> tuple[object, ...]:
    return (
        entry.saga_id, entry.seq, entry.step, entry.attempt, entry.tool, entry.phase.value,
        "", "", "", entry.actor_json,
        entry.recorded_at_text, entry.prev_hash, entry.hash, entry.material,
    )  # fmt: skip
