"""Schema migrations: applied once at open, idempotent on re-open, and safe when two
workers open a fresh schema at the same moment (advisory lock, not luck).

Each test makes its own fresh schema and drops it afterwards.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from datetime import UTC, datetime

import psycopg
import pytest
from psycopg import sql

from sagacity.audit import verify_store
from sagacity.chain import GENESIS, seal
from sagacity.entry import EntryDraft
from sagacity.phases import Phase
from sagacity.stores import migrations as migrations_module
from sagacity.stores.migrations import load_migrations, migrate
from sagacity.stores.postgres import PostgresJournalStore, lock_key

pytestmark = pytest.mark.postgres

TRIGGERS = {
    "sagacity_journal_no_update",
    "sagacity_journal_no_delete",
    "sagacity_journal_no_truncate",
}


@pytest.fixture
def fresh_schema(postgres_url: str) -> Iterator[Callable[[], tuple[str, str]]]:
    """Factory of (schema, store URL) for schemas that do not exist yet."""
    made: list[str] = []

    def make() -> tuple[str, str]:
        schema = f"sagacity_m_{uuid.uuid4().hex[:12]}"
        made.append(schema)
        return schema, f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={schema}"

    yield make
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for schema in made:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def version_rows(postgres_url: str, schema: str) -> list[tuple[int, str, object]]:
    table = sql.Identifier(schema, "sagacity_schema_version")
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute(
            sql.SQL("SELECT version, name, applied_at FROM {} ORDER BY version").format(table)
        ).fetchall()
    return [(int(r[0]), str(r[1]), r[2]) for r in rows]


def test_migrations_are_numbered_and_packaged() -> None:
    migrations = load_migrations()
    assert [m.version for m in migrations] == list(range(1, len(migrations) + 1))
    assert migrations[0].name == "journal"
    assert "@schema@" not in migrations[1].render("s")


def test_applied_once_and_idempotent_on_reopen(
    postgres_url: str, fresh_schema: Callable[[], tuple[str, str]]
) -> None:
    schema, url = fresh_schema()
    with closing(PostgresJournalStore.from_url(url)) as store:
        store.append(EntryDraft.new("s", Phase.SAGA_OPENED))
    first = version_rows(postgres_url, schema)
    assert [(v, n) for v, n, _ in first] == [(m.version, m.name) for m in load_migrations()]

    with closing(PostgresJournalStore.from_url(url)) as again:
        assert [e.seq for e in again.entries("s")] == [1]
    assert version_rows(postgres_url, schema) == first  # same rows, same applied_at
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert migrate(conn, schema) == []

    with psycopg.connect(postgres_url) as conn:
        enabled = conn.execute(
            "SELECT t.tgname, t.tgenabled FROM pg_trigger t"
            " JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relname = 'sagacity_journal' AND NOT t.tgisinternal",
            (schema,),
        ).fetchall()
    assert {name: mode for name, mode in enabled} == dict.fromkeys(TRIGGERS, "A")


@pytest.mark.parametrize("openers", [2, 4])
def test_concurrent_opens_of_a_fresh_schema_do_not_race(
    postgres_url: str, fresh_schema: Callable[[], tuple[str, str]], openers: int
) -> None:
    schema, url = fresh_schema()
    barrier = threading.Barrier(openers)
    errors: list[BaseException] = []
    stores: list[PostgresJournalStore] = []
    lock = threading.Lock()

    def open_one(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            store = PostgresJournalStore.from_url(url)
            store.append(EntryDraft.new(f"s{index}", Phase.SAGA_OPENED))
            with lock:
                stores.append(store)
        except BaseException as exc:
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=open_one, args=(i,)) for i in range(openers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    try:
        assert errors == []
        assert len(stores) == openers
        rows = version_rows(postgres_url, schema)
        assert [v for v, _, _ in rows] == [m.version for m in load_migrations()]
        assert sorted(stores[0].sagas()) == [f"s{i}" for i in range(openers)]
    finally:
        for store in stores:
            store.close()


def test_upgrade_applies_only_the_missing_migrations(
    postgres_url: str,
    fresh_schema: Callable[[], tuple[str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A schema left at version 1 by an older release gets every later version and keeps
    its data."""
    schema, url = fresh_schema()
    everything = load_migrations()
    monkeypatch.setattr(migrations_module, "load_migrations", lambda: everything[:1])
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert migrate(conn, schema) == [1]
        table = sql.Identifier(schema, "sagacity_journal")
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (saga_id, seq, step, attempt, tool, phase, input_json,"
                " result_json, error_json, actor_json, recorded_at, prev_hash, hash)"
                " VALUES ('old', 1, 0, 1, '', 'SAGA_OPENED', 'null', 'null', 'null', 'null',"
                " '2026-01-01T00:00:00.000000Z', 'p', 'h')"
            ).format(table)
        )
    monkeypatch.undo()
    with closing(PostgresJournalStore.from_url(url)) as store:
        assert [v for v, _, _ in version_rows(postgres_url, schema)] == [
            m.version for m in everything
        ]
        assert len(everything) >= 3  # the checkpoint log (0003) came after version 1
        assert [e.seq for e in store.entries("old")] == [1]
        assert store.append(EntryDraft.new("new", Phase.SAGA_OPENED)).seq == 1


def test_recipe_v2_upgrades_a_v1_journal_in_place(
    postgres_url: str,
    fresh_schema: Callable[[], tuple[str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A journal at version 3 holding a v1 chain, written through the v1 append function
    as the release before recipe v2 wrote it, is upgraded by adding a column: the chain
    still verifies, it goes on in v1, a new saga is v2, and the guards are still ALWAYS."""
    schema, url = fresh_schema()
    everything = load_migrations()
    assert [m.name for m in everything][3] == "recipe_v2"
    monkeypatch.setattr(migrations_module, "load_migrations", lambda: everything[:3])
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    prev, old = GENESIS, []
    for seq, draft in enumerate(
        [
            EntryDraft.new("old", Phase.SAGA_OPENED, input={"goal": "refund"}),
            EntryDraft.new("old", Phase.INTENT, step=1, tool="pay", input={"amount": 5}),
        ],
        start=1,
    ):
        entry = seal(draft, seq=seq, prev_hash=prev, recorded_at=t0, recipe=1)
        old.append(entry)
        prev = entry.hash
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert migrate(conn, schema) == [1, 2, 3]
        append_v1 = sql.Identifier(schema, "sagacity_append")
        for e in old:
            row = conn.execute(
                sql.SQL("SELECT {}(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)").format(append_v1),
                (lock_key(e.saga_id), e.saga_id, e.seq, e.step, e.attempt, e.tool,
                 e.phase.value, e.input_json, e.result_json, e.error_json, e.actor_json,
                 e.recorded_at_text, e.prev_hash, e.hash),
            ).fetchone()  # fmt: skip
            assert row == (0,)
    monkeypatch.undo()
    with closing(PostgresJournalStore.from_url(url)) as store:
        assert [v for v, _, _ in version_rows(postgres_url, schema)][-1] == everything[-1].version
        assert list(store.entries("old")) == old  # read back exactly, as v1
        assert verify_store(store, "old").ok
        later = store.append(EntryDraft.new("old", Phase.EXECUTED, step=1, tool="pay"))
        assert (later.recipe, later.prev_hash) == (1, old[-1].hash)
        fresh = store.append(EntryDraft.new("new", Phase.SAGA_OPENED))
        assert fresh.recipe == 2 and verify_store(store, "new").ok
        assert verify_store(store, "old").entries == 3
    with psycopg.connect(postgres_url) as conn:
        modes = conn.execute(
            "SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = %s::regclass",
            (sql.Identifier(schema, "sagacity_journal").as_string(conn),),
        ).fetchall()
    assert {name: mode for name, mode in modes if name in TRIGGERS} == dict.fromkeys(TRIGGERS, "A")
