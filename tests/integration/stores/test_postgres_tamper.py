"""Tamper probes: the database refuses edits, and edits that a superuser forces through
anyway are found by verify_chain at the exact entry, for the exact reason.

Each probe disables the guard triggers as a superuser would, edits, reads the row back to
prove the edit happened, re-enables the triggers (ALWAYS), then verifies. The module runs
in its own fresh schema, dropped afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from typing import LiteralString

import psycopg
import pytest
from psycopg import sql

from sagacity.audit._export import verify_store
from sagacity.journal._chain import BreakReason, verify_chain
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase
from sagacity.stores._postgres import PostgresJournalStore
from tests.support.pg_fixtures import fresh_schema_url

pytestmark = pytest.mark.postgres

TRIGGERS = (
    "sagacity_journal_no_update",
    "sagacity_journal_no_delete",
    "sagacity_journal_no_truncate",
)
K = 3
"""The entry each probe tampers with, in a chain of six."""


def open_in_fresh_schema(postgres_url: str, prefix: str) -> Iterator[PostgresJournalStore]:
    for url in fresh_schema_url(postgres_url, prefix):
        with closing(PostgresJournalStore.from_url(url)) as opened:
            yield opened


@pytest.fixture(scope="module")
def probed(postgres_url: str) -> Iterator[PostgresJournalStore]:
    """Store whose guards the probes disable and re-enable."""
    yield from open_in_fresh_schema(postgres_url, "sagacity_x")


@pytest.fixture(scope="module")
def guarded(postgres_url: str) -> Iterator[PostgresJournalStore]:
    """Store whose triggers are exactly as the migrations left them: nothing here ever
    touches them, so the refusal tests test the migrations, not a probe's re-enabling."""
    yield from open_in_fresh_schema(postgres_url, "sagacity_g")


@pytest.fixture
def superuser(postgres_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
        assert row is not None and row[0], "tamper probes need a superuser connection"
        yield conn


def make_chain(store: PostgresJournalStore, saga_id: str) -> list[JournalEntry]:
    drafts = [EntryDraft.new(saga_id, Phase.SAGA_OPENED)] + [
        EntryDraft.new(saga_id, Phase.EXECUTED, step=i, tool="pay", result={"paid": i * 100})
        for i in range(1, 6)
    ]
    entries = [store.append(d) for d in drafts]
    assert verify_chain(saga_id, store.entries(saga_id)).ok
    return entries


def journal(schema: str) -> sql.Identifier:
    return sql.Identifier(schema, "sagacity_journal")


def rows(conn: psycopg.Connection, schema: str, saga_id: str) -> list[tuple[object, ...]]:
    query = sql.SQL("SELECT * FROM {} WHERE saga_id = %s ORDER BY seq").format(journal(schema))
    return conn.execute(query, (saga_id,)).fetchall()


def chained_edit(
    store: PostgresJournalStore,
    superuser: psycopg.Connection,
    saga_id: str,
    edit: Callable[[str], tuple[LiteralString, tuple[object, ...]]],
) -> tuple[list[tuple[object, ...]], sql.Composed, tuple[object, ...]]:
    """A chain to attack, its rows as they were, and `edit` as a statement on its journal."""
    make_chain(store, saga_id)
    before = rows(superuser, store.schema, saga_id)
    text, params = edit(saga_id)
    return before, sql.SQL(text).format(journal(store.schema)), params


def tamper(
    conn: psycopg.Connection, schema: str, *statements: tuple[LiteralString, tuple[object, ...]]
) -> None:
    """Run edits with the guards disabled as a superuser can, then restore them ALWAYS."""
    table = journal(schema)
    conn.execute(sql.SQL("ALTER TABLE {} DISABLE TRIGGER USER").format(table))
    try:
        for text, params in statements:
            conn.execute(sql.SQL(text).format(table), params)
    finally:
        for trigger in TRIGGERS:
            conn.execute(
                sql.SQL("ALTER TABLE {} ENABLE ALWAYS TRIGGER {}").format(
                    table, sql.Identifier(trigger)
                )
            )
    modes = conn.execute(
        "SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = %s::regclass",
        (table.as_string(conn),),
    ).fetchall()
    assert {name: mode for name, mode in modes if name in TRIGGERS} == dict.fromkeys(TRIGGERS, "A")


def assert_broken(store: PostgresJournalStore, saga_id: str, seq: int, reason: BreakReason) -> None:
    # verify_store: a row whose columns are not its bytes is refused where it is read
    # (TamperedEntryError), and verify_store reports that as the break.
    report = verify_store(store, saga_id)
    assert not report.ok
    assert (report.first_broken_seq, report.reason) == (seq, reason), report.describe()


@dataclass
class Probe:
    """A chain of six in the probed store, and the superuser connection that edits it."""

    store: PostgresJournalStore
    conn: psycopg.Connection
    saga_id: str
    chain: list[JournalEntry]

    def tamper(self, *statements: tuple[LiteralString, tuple[object, ...]]) -> None:
        tamper(self.conn, self.store.schema, *statements)

    def rows(self, saga_id: str | None = None) -> list[tuple[object, ...]]:
        return rows(self.conn, self.store.schema, saga_id or self.saga_id)

    def broken_at(self, seq: int, reason: BreakReason) -> None:
        assert_broken(self.store, self.saga_id, seq, reason)


@pytest.fixture
def probe(probed: PostgresJournalStore, superuser: psycopg.Connection, saga_id: str) -> Probe:
    return Probe(probed, superuser, saga_id, make_chain(probed, saga_id))


def test_edit_one_field(probe: Probe) -> None:
    probe.tamper(
        (
            "UPDATE {} SET result_json = %s WHERE saga_id = %s AND seq = %s",
            ('{"paid":1}', probe.saga_id, K),
        ),
    )
    assert probe.rows()[K - 1][7] == '{"paid":1}'
    # A row's result is in its hashed bytes; a result column that says otherwise is
    # named (tests/integration/stores/test_recipe_attacks.py has every column).
    probe.broken_at(K, BreakReason.TAMPERED)


def test_delete_a_middle_entry(probe: Probe) -> None:
    probe.tamper(("DELETE FROM {} WHERE saga_id = %s AND seq = %s", (probe.saga_id, K)))
    assert [r[1] for r in probe.rows()] == [1, 2, 4, 5, 6]
    probe.broken_at(K, BreakReason.GAP)


def test_swap_two_entries_seq(probe: Probe) -> None:
    move = "UPDATE {} SET seq = %s WHERE saga_id = %s AND seq = %s"
    saga_id = probe.saga_id
    probe.tamper((move, (1000, saga_id, 2)), (move, (2, saga_id, 4)), (move, (4, saga_id, 1000)))
    stored = probe.rows()
    assert (stored[1][12], stored[3][12]) == (probe.chain[3].hash, probe.chain[1].hash)
    # The row now at seq 2 holds the bytes of seq 4, which say seq 4.
    probe.broken_at(2, BreakReason.TAMPERED)


def test_move_an_entry_to_another_saga(probe: Probe) -> None:
    other = probe.saga_id + "-other"
    probe.tamper(
        ("UPDATE {} SET saga_id = %s WHERE saga_id = %s AND seq = %s", (other, probe.saga_id, K)),
    )
    assert [r[1] for r in probe.rows(other)] == [K]
    probe.broken_at(K, BreakReason.GAP)


def test_flip_one_character_of_a_stored_hash(probe: Probe) -> None:
    original = probe.chain[K - 1].hash
    flipped = ("0" if original[10] != "0" else "1").join((original[:10], original[11:]))
    probe.tamper(
        ("UPDATE {} SET hash = %s WHERE saga_id = %s AND seq = %s", (flipped, probe.saga_id, K)),
    )
    assert probe.rows()[K - 1][12] == flipped != original
    probe.broken_at(K, BreakReason.HASH_MISMATCH)


REFUSED_EDITS: list[tuple[str, Callable[[str], tuple[LiteralString, tuple[object, ...]]]]] = [
    ("UPDATE", lambda saga: ("UPDATE {} SET tool = 'x' WHERE saga_id = %s", (saga,))),
    ("DELETE", lambda saga: ("DELETE FROM {} WHERE saga_id = %s", (saga,))),
    ("TRUNCATE", lambda saga: ("TRUNCATE {}", ())),
]


@pytest.mark.parametrize(("verb", "edit"), REFUSED_EDITS, ids=[v for v, _ in REFUSED_EDITS])
def test_replica_mode_does_not_bypass_the_guards(
    guarded: PostgresJournalStore,
    superuser: psycopg.Connection,
    saga_id: str,
    verb: str,
    edit: Callable[[str], tuple[LiteralString, tuple[object, ...]]],
) -> None:
    store, schema = guarded, guarded.schema
    before, statement, params = chained_edit(store, superuser, saga_id, edit)
    superuser.execute("SET session_replication_role = replica")
    with pytest.raises(psycopg.errors.RaiseException, match=f"append-only: {verb}"):
        superuser.execute(statement, params)
    superuser.execute("RESET session_replication_role")
    assert rows(superuser, schema, saga_id) == before
    assert verify_chain(saga_id, store.entries(saga_id)).ok


@pytest.fixture
def app_role(superuser: psycopg.Connection, guarded: PostgresJournalStore) -> Iterator[str]:
    """An ordinary role with SELECT and INSERT on the journal, nothing more."""
    schema = guarded.schema
    role = f"sagacity_app_{uuid.uuid4().hex[:10]}"
    ident = sql.Identifier(role)
    superuser.execute(sql.SQL("CREATE ROLE {} NOLOGIN NOSUPERUSER").format(ident))
    superuser.execute(
        sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(schema), ident)
    )
    superuser.execute(
        sql.SQL("GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA {} TO {}").format(
            sql.Identifier(schema), ident
        )
    )
    yield role
    superuser.execute("RESET ROLE")
    superuser.execute(sql.SQL("DROP OWNED BY {}").format(ident))
    superuser.execute(sql.SQL("DROP ROLE {}").format(ident))


@pytest.mark.parametrize(("verb", "edit"), REFUSED_EDITS, ids=[v for v, _ in REFUSED_EDITS])
def test_ordinary_role_cannot_edit_even_when_granted(
    guarded: PostgresJournalStore,
    superuser: psycopg.Connection,
    saga_id: str,
    app_role: str,
    verb: str,
    edit: Callable[[str], tuple[LiteralString, tuple[object, ...]]],
) -> None:
    store, schema = guarded, guarded.schema
    before, statement, params = chained_edit(store, superuser, saga_id, edit)
    role = sql.Identifier(app_role)
    superuser.execute(sql.SQL("SET ROLE {}").format(role))
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        superuser.execute(statement, params)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        superuser.execute(sql.SQL("ALTER TABLE {} DISABLE TRIGGER USER").format(journal(schema)))
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        superuser.execute("SET session_replication_role = replica")
    superuser.execute("RESET ROLE")
    grant = sql.SQL("GRANT UPDATE, DELETE, TRUNCATE ON {} TO {}").format(journal(schema), role)
    superuser.execute(grant)
    superuser.execute(sql.SQL("SET ROLE {}").format(role))
    with pytest.raises(
        psycopg.errors.RaiseException, match=f"sagacity journal is append-only: {verb}"
    ):
        superuser.execute(statement, params)
    superuser.execute("RESET ROLE")
    assert rows(superuser, schema, saga_id) == before
    assert verify_chain(saga_id, store.entries(saga_id)).ok
