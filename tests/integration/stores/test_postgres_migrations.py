"""Schema migrations: applied once at open, idempotent on re-open, and safe when two
workers open a fresh schema at the same moment (advisory lock, not luck).

Each test makes its own fresh schema and drops it afterwards.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing

import psycopg
import pytest
from psycopg import sql

from sagacity.audit._export import verify_store
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import _migrations as migrations_module
from sagacity.stores._migrations import Migration, load_migrations, migrate
from sagacity.stores._postgres import PostgresJournalStore

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
    assert "@schema@" in migrations[0].sql_text
    assert "@schema@" not in migrations[0].render("s")


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


def test_a_later_migration_is_applied_alone_to_a_journal_at_version_1(
    postgres_url: str,
    fresh_schema: Callable[[], tuple[str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A journal made by 1.0 (version 1, with entries) opened by a release that adds
    migration 2 gets that migration only, once, and keeps its chain. Migration 2 here is
    synthetic (1.0 has none): a table and a column the runner must create in the store's
    schema, with the journal's guards untouched."""
    schema, url = fresh_schema()
    with closing(PostgresJournalStore.from_url(url)) as store:
        store.append(EntryDraft.new("old", Phase.SAGA_OPENED, input={"goal": "pay"}))
        store.append(EntryDraft.new("old", Phase.INTENT, step=1, tool="pay"))
    first = version_rows(postgres_url, schema)
    assert [v for v, _, _ in first] == [1]
    later = Migration(
        2,
        "later",
        "CREATE TABLE sagacity_later (saga_id text PRIMARY KEY);\n"
        "ALTER TABLE sagacity_fences ADD COLUMN later_note text;\n",
    )
    monkeypatch.setattr(migrations_module, "load_migrations", lambda: [*load_migrations(), later])
    with closing(PostgresJournalStore.from_url(url)) as store:
        rows = version_rows(postgres_url, schema)
        assert [(v, n) for v, n, _ in rows] == [(1, "journal"), (2, "later")]
        assert rows[0] == first[0]  # version 1 not applied again
        assert verify_store(store, "old").ok and verify_store(store, "old").entries == 2
        assert store.append(EntryDraft.new("old", Phase.EXECUTED, step=1, tool="pay")).seq == 3
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert migrate(conn, schema) == []  # nothing missing any more
        made = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{schema}.sagacity_later",))
        assert made.fetchone() == (True,)
        modes = conn.execute(
            "SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = %s::regclass",
            (sql.Identifier(schema, "sagacity_journal").as_string(conn),),
        ).fetchall()
    assert {name: mode for name, mode in modes if name in TRIGGERS} == dict.fromkeys(TRIGGERS, "A")
