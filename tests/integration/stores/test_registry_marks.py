"""The registry high-water mark each store keeps beside the journal: the newest approver
registry (version, SHA-256) any entry records, raised in the append's own transaction,
read back without a scan, never lowered, on the memory, SQLite and PostgreSQL stores."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from sagacity._errors import JournalConflictError, SagaClosedError
from sagacity.approval._registry_marks import JournaledMark, RegistryMark, top_mark
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import JournalStore, open_store
from sagacity.stores._postgres import PostgresJournalStore

A, B, C = "a" * 64, "b" * 64, "c" * 64


def ref(version: Any, sha256: Any = A) -> dict[str, Any]:
    return {"version": version, "sha256": sha256}


Opener = Callable[[], JournalStore]


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens the same journal again (memory: the same store object)."""
    opened: list[JournalStore] = []
    if request.param == "memory":
        memory = open_store("memory://")
        yield lambda: memory
        return
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/journal.db"
    else:
        base: str = request.getfixturevalue("postgres_url")
        schema = f"sagacity_marks_{uuid.uuid4().hex[:12]}"
        url = f"{base}{'&' if '?' in base else '?'}schema={schema}"

    def make() -> JournalStore:
        opened.append(open_store(url))
        return opened[-1]

    yield make
    for store in opened:
        store.close()
    if request.param == "postgres":
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def store(opener: Opener) -> JournalStore:
    return opener()


def draft(saga: str, phase: Phase, step: int = 1, **payloads: Any) -> EntryDraft:
    return EntryDraft.new(saga, phase, step=step, tool="pay", **payloads)


MARKED = [
    (Phase.SAGA_OPENED, {"input": {"requester": {"requester": "rita", "registry": ref(3)}}}),
    (Phase.AWAITING_APPROVAL, {"result": {"registry": ref(3)}}),
    (Phase.APPROVED, {"result": {"registry": ref(3)}}),
    (Phase.REJECTED, {"result": {"registry": ref(3)}}),
    (Phase.RESOLVED, {"result": {"registry": ref(3)}}),
    (Phase.NEEDS_HUMAN, {"input": {"registry": ref(3)}}),
]


@pytest.mark.parametrize(("phase", "payloads"), MARKED, ids=[p.value for p, _ in MARKED])
def test_each_entry_that_records_its_registry_raises_the_mark(
    store: JournalStore, phase: Phase, payloads: dict[str, Any]
) -> None:
    assert store.registry_marks() == []
    step = 0 if phase in (Phase.SAGA_OPENED, Phase.NEEDS_HUMAN) else 1
    entry = store.append(draft("s", phase, step, **payloads))
    assert store.registry_marks() == [JournaledMark(3, A, "s", entry.seq)]


NOT_MARKED = [
    # A refused decision's input is whatever its sender wrote: it must not move the mark
    # (a signal with version 10**9 would otherwise stop every worker).
    ("a refused decision's input", Phase.APPROVAL_REFUSED, {"input": {"registry": ref(9)}}),
    ("a refused resolution's input", Phase.RESOLUTION_REFUSED, {"input": {"registry": ref(9)}}),
    ("a tool's payload", Phase.AWAITING_APPROVAL, {"input": {"registry": ref(9)}}),
    ("a tool's result", Phase.EXECUTED, {"result": {"registry": ref(9)}}),
    ("a start option", Phase.SAGA_OPENED, {"input": {"registry": ref(9)}}),
    ("a version as text", Phase.APPROVED, {"result": {"registry": ref("9")}}),
    ("a version as a bool", Phase.APPROVED, {"result": {"registry": ref(True)}}),
    ("version 0", Phase.APPROVED, {"result": {"registry": ref(0)}}),
    ("a float version", Phase.APPROVED, {"result": {"registry": ref(9.5)}}),
    ("no sha256", Phase.NEEDS_HUMAN, {"input": {"registry": ref(9, None)}}),
    ("an uppercase sha256", Phase.APPROVED, {"result": {"registry": ref(9, "A" * 64)}}),
    ("a short sha256", Phase.APPROVED, {"result": {"registry": ref(9, "a" * 63)}}),
    ("a sha256 and a newline", Phase.APPROVED, {"result": {"registry": ref(9, A + "\n")}}),
    ("no registry", Phase.APPROVED, {"result": {"registry": None}}),
]


@pytest.mark.parametrize(("what", "phase", "payloads"), NOT_MARKED, ids=[w for w, *_ in NOT_MARKED])
def test_nothing_else_moves_the_mark(
    store: JournalStore, what: str, phase: Phase, payloads: dict[str, Any]
) -> None:
    store.append(draft("s", Phase.AWAITING_APPROVAL, result={"registry": ref(2)}))
    store.append(draft("s", phase, 2, **payloads))
    assert store.registry_marks() == [JournaledMark(2, A, "s", 1)], what


def test_the_newest_version_wins_and_its_first_recorder_is_named(opener: Opener) -> None:
    store = opener()
    store.append(draft("s1", Phase.AWAITING_APPROVAL, result={"registry": ref(2, B)}))
    store.append(draft("s1", Phase.APPROVED, result={"registry": ref(3, C)}))
    store.append(draft("s2", Phase.APPROVED, result={"registry": ref(3, C)}))
    store.append(draft("s2", Phase.REJECTED, 2, result={"registry": ref(1, A)}))
    assert store.registry_marks() == [JournaledMark(3, C, "s1", 2)]
    # Persisted: a worker starting later reads the same mark.
    assert opener().registry_marks() == [JournaledMark(3, C, "s1", 2)]


def test_two_registries_of_one_version_are_a_fork(store: JournalStore) -> None:
    store.append(draft("s1", Phase.AWAITING_APPROVAL, result={"registry": ref(4, B)}))
    store.append(draft("s2", Phase.AWAITING_APPROVAL, result={"registry": ref(4, A)}))
    marks = store.registry_marks()
    assert marks == [JournaledMark(4, A, "s2", 1), JournaledMark(4, B, "s1", 1)]
    assert top_mark(marks) == RegistryMark(version=4, sha256=None)


def test_a_retried_append_records_nothing_new_and_a_refused_one_nothing(
    store: JournalStore,
) -> None:
    first = draft("s", Phase.AWAITING_APPROVAL, result={"registry": ref(2)})
    store.append(first)
    store.append(first)  # at-least-once: the same logical entry, returned as recorded
    with pytest.raises(JournalConflictError):  # same entry, other content: refused
        store.append(draft("s", Phase.AWAITING_APPROVAL, result={"registry": ref(7)}))
    store.append(draft("s", Phase.SAGA_CLOSED, 0))
    with pytest.raises(SagaClosedError):
        store.append(draft("s", Phase.APPROVED, result={"registry": ref(8)}))
    assert store.registry_marks() == [JournaledMark(2, A, "s", 1)]


@pytest.fixture
def pg_url(postgres_url: str) -> Iterator[tuple[str, str]]:
    """(store URL of a fresh schema, the schema), dropped afterwards."""
    schema = f"sagacity_marks_{uuid.uuid4().hex[:12]}"
    yield f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={schema}", schema
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_postgres_records_the_mark_on_both_append_paths(pg_url: tuple[str, str]) -> None:
    """The locked path (a saga this store has not written) and the one-round-trip path
    (it wrote the head) both insert through sagacity_append; an insert the function
    refuses (the head moved) records no mark either."""
    url, _ = pg_url
    with (
        closing(PostgresJournalStore.from_url(url)) as store,
        closing(PostgresJournalStore.from_url(url)) as other,
    ):
        store.append(draft("s", Phase.SAGA_OPENED, 0))  # locked: nothing cached yet
        store.append(draft("s", Phase.AWAITING_APPROVAL, result={"registry": ref(5)}))
        assert store._heads["s"][1]  # the second one took the one-round-trip path
        assert store.registry_marks() == [JournaledMark(5, A, "s", 2)]
        other.append(draft("s", Phase.APPROVED, result={"registry": ref(6, B)}))  # locked
        assert store.registry_marks() == [JournaledMark(6, B, "s", 3)]
        # `store` guesses the head it wrote (seq 2), but `other` moved it: the function
        # inserts nothing, neither entry nor mark, and the locked path appends at seq 4.
        store.append(draft("s", Phase.APPROVED, 2, result={"registry": ref(7, C)}))
        assert [e.seq for e in store.entries("s")] == [1, 2, 3, 4]
        assert store.registry_marks() == [JournaledMark(7, C, "s", 4)]


def test_sqlite_marks_refuse_update_and_delete(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/journal.db")
    store.append(draft("s", Phase.APPROVED, result={"registry": ref(2)}))
    store.close()
    with sqlite3.connect(tmp_path / "journal.db") as raw:
        for statement in ("UPDATE registry_marks SET version = 1", "DELETE FROM registry_marks"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                raw.execute(statement)
        assert raw.execute("SELECT version FROM registry_marks").fetchall() == [(2,)]


def test_postgres_marks_refuse_update_delete_and_truncate(
    postgres_url: str, pg_url: tuple[str, str]
) -> None:
    url, schema = pg_url
    table = sql.Identifier(schema, "sagacity_registry_marks")
    with closing(open_store(url)) as store:
        store.append(draft("s", Phase.APPROVED, result={"registry": ref(2)}))
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")  # triggers enabled ALWAYS
        for statement in ("UPDATE {} SET version = 1", "DELETE FROM {}", "TRUNCATE {}"):
            with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                conn.execute(sql.SQL(statement).format(table))  # type: ignore[arg-type]
        rows = conn.execute(sql.SQL("SELECT version FROM {}").format(table)).fetchall()
        assert rows == [(2,)]
