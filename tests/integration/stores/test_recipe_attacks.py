"""The hash recipe attacked in a real database, on PostgreSQL and on SQLite.

Each attack is done as a database owner does it (guards off, rows changed, guards back),
the change is read back to show it happened, and verification names the entry and why:
an edited column or edited bytes (`tampered` or `hash_mismatch`), rows swapped, a whole
chain rewritten with every entry resealed (the chain alone verifies; its signed
checkpoint says `rewritten`), a cut tail (`truncated`), and rows too large to be an
entry (`unreadable`, nothing crashes).
"""

from __future__ import annotations

import itertools
import sqlite3
import struct
import uuid
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from sagacity.audit._evidence import Problem
from sagacity.audit._evidence_walk import check_one
from sagacity.audit._export import verify_store
from sagacity.journal._chain import GENESIS, BreakReason, reseal, verify_chain
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase
from sagacity.journal._recipe import HEADER_SIZE, PREV_OFFSET
from sagacity.stores._base import JournalStore
from sagacity.stores._postgres import PostgresJournalStore
from sagacity.stores._sqlite import SqliteJournalStore
from sagacity.tlog._note_keys import NoteSigner
from tests.support.evidence import run_unguarded_sqlite

COLUMNS = (
    "saga_id, seq, step, attempt, tool, phase, input_json, result_json, error_json, "
    "actor_json, recorded_at, prev_hash, hash, material"
)
PG_TRIGGERS = (
    "sagacity_journal_no_update",
    "sagacity_journal_no_delete",
    "sagacity_journal_no_truncate",
)


@dataclass
class Rig:
    """A store and a way to edit its journal table with the guards off."""

    kind: str
    store: JournalStore
    edit_pg: Any = None
    sqlite_path: Path | None = None

    def run(self, text: str, params: tuple[Any, ...] = ()) -> None:
        """Run one statement ({journal} is the table, ? the placeholders) unguarded."""
        if self.kind == "postgres":
            self.edit_pg(text, params)
            return
        assert self.sqlite_path is not None
        run_unguarded_sqlite(self.sqlite_path, [(text.replace("{journal}", "journal"), params)])

    def row(self, saga_id: str, seq: int) -> tuple[Any, ...]:
        """The stored row, read past sagacity."""
        if self.kind == "postgres":
            assert isinstance(self.store, PostgresJournalStore)
            return self.edit_pg(
                f"SELECT {COLUMNS} FROM {{journal}} WHERE saga_id=? AND seq=?",
                (saga_id, seq),
                fetch=True,
            )[0]  # type: ignore[no-any-return]
        assert self.sqlite_path is not None
        with closing(sqlite3.connect(self.sqlite_path)) as conn:
            query = f"SELECT {COLUMNS} FROM journal WHERE saga_id=? AND seq=?"
            return tuple(conn.execute(query, (saga_id, seq)).fetchone())


def _pg_editor(postgres_url: str, schema: str) -> Any:
    def edit(text: str, params: tuple[Any, ...], fetch: bool = False) -> Any:
        table = sql.Identifier(schema, "sagacity_journal").as_string(None)
        statement = text.replace("?", "%s").replace("{journal}", table)
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            if fetch:
                return conn.execute(statement.encode(), params).fetchall()
            conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
            try:
                conn.execute(statement.encode(), params)
            finally:
                for trigger in PG_TRIGGERS:
                    conn.execute(f'ALTER TABLE {table} ENABLE ALWAYS TRIGGER "{trigger}"')
        return None

    return edit


@pytest.fixture(params=[pytest.param("postgres", marks=pytest.mark.postgres), "sqlite"])
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Rig]:
    if request.param == "sqlite":
        path = tmp_path / "journal.db"
        with closing(SqliteJournalStore(path)) as store:
            yield Rig("sqlite", store, sqlite_path=path)
        return
    postgres_url: str = request.getfixturevalue("postgres_url")
    schema = f"sagacity_recipe_{uuid.uuid4().hex[:12]}"
    url = f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={schema}"
    try:
        with closing(PostgresJournalStore.from_url(url)) as store:
            yield Rig("postgres", store, edit_pg=_pg_editor(postgres_url, schema))
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _chain(store: JournalStore, saga_id: str, *, close: bool = False) -> list[JournalEntry]:
    drafts = [EntryDraft.new(saga_id, Phase.SAGA_OPENED, input={"goal": "pay"})]
    drafts += [
        EntryDraft.new(
            saga_id, Phase.EXECUTED, step=i, tool="pay", result={"paid": i * 100}, actor="ops"
        )
        for i in range(1, 5)
    ]
    if close:
        drafts.append(EntryDraft.new(saga_id, Phase.SAGA_CLOSED, result={"status": "COMPLETED"}))
    entries = [store.append(d) for d in drafts]
    assert verify_store(store, saga_id).ok
    return entries


def _broken(store: JournalStore, saga_id: str, seq: int, reason: BreakReason) -> str:
    report = verify_store(store, saga_id)  # the rows checked in place (verify_rows)
    # ...and as entries (an observer makes verify_store read entries): the same report.
    assert verify_store(store, saga_id, lambda entry: None) == report
    assert not report.ok
    assert (report.first_broken_seq, report.reason) == (seq, reason), report.describe()
    return report.detail


K = 3
COLUMN_EDITS = [
    ("tool", "tool", "'refund'"),
    ("phase", "phase", "'COMPENSATED'"),
    ("actor", "actor_json", "'\"mallory\"'"),
    ("step", "step", "7"),
    ("attempt", "attempt", "2"),
    ("recorded_at", "recorded_at", "'2020-01-01T00:00:00.000000Z'"),
    ("prev_hash", "prev_hash", "'" + "0" * 64 + "'"),
    ("input", "input_json", '\'{"goal":"steal"}\''),
    ("result", "result_json", "'{\"paid\":1}'"),
]


@pytest.mark.parametrize(
    ("label", "column", "value"), COLUMN_EDITS, ids=[c[0] for c in COLUMN_EDITS]
)
def test_a_column_edited_without_the_bytes_is_tampered(
    rig: Rig, label: str, column: str, value: str
) -> None:
    saga = f"col-{uuid.uuid4().hex[:8]}"
    _chain(rig.store, saga)
    before = rig.row(saga, K)
    rig.run(f"UPDATE {{journal}} SET {column}={value} WHERE saga_id=? AND seq=?", (saga, K))
    after = rig.row(saga, K)
    index = COLUMNS.split(", ").index(column)
    assert after[index] != before[index] and after[-1] == before[-1]  # bytes untouched
    detail = _broken(rig.store, saga, K, BreakReason.TAMPERED)
    assert f"its {column} column" in detail


def test_a_name_byte_edited_without_the_column_is_tampered(rig: Rig) -> None:
    saga = f"bytes-{uuid.uuid4().hex[:8]}"
    _chain(rig.store, saga)
    material = bytes(rig.row(saga, K)[-1])
    at = material.index(b"pay", HEADER_SIZE)  # the tool name inside the bytes
    edited = material[:at] + b"PAY" + material[at + 3 :]
    rig.run("UPDATE {journal} SET material=? WHERE saga_id=? AND seq=?", (edited, saga, K))
    assert bytes(rig.row(saga, K)[-1]) == edited != material
    assert "its tool column" in _broken(rig.store, saga, K, BreakReason.TAMPERED)


def test_a_payload_byte_edited_is_a_hash_mismatch(rig: Rig) -> None:
    """Payloads live only in the bytes: no column disagrees, the hash does."""
    saga = f"payload-{uuid.uuid4().hex[:8]}"
    _chain(rig.store, saga)
    material = bytes(rig.row(saga, K)[-1])
    edited = material.replace(b'"paid":200', b'"paid":900')
    assert edited != material
    rig.run("UPDATE {journal} SET material=? WHERE saga_id=? AND seq=?", (edited, saga, K))
    assert bytes(rig.row(saga, K)[-1]) == edited
    assert list(rig.store.entries(saga))[K - 1].result == {"paid": 900}  # what a reader sees
    _broken(rig.store, saga, K, BreakReason.HASH_MISMATCH)


def test_two_rows_swapped_are_tampered(rig: Rig) -> None:
    saga = f"swap-{uuid.uuid4().hex[:8]}"
    chain = _chain(rig.store, saga)
    move = "UPDATE {journal} SET seq=? WHERE saga_id=? AND seq=?"
    rig.run(move, (1000, saga, 2))
    rig.run(move, (2, saga, 4))
    rig.run(move, (4, saga, 1000))
    assert rig.row(saga, 2)[12] == chain[3].hash and rig.row(saga, 4)[12] == chain[1].hash
    assert "its seq column" in _broken(rig.store, saga, 2, BreakReason.TAMPERED)


def _checkpointed(rig: Rig, saga: str) -> tuple[Any, NoteSigner]:
    signer = NoteSigner.generate("sagacity.test/recipe")
    log = rig.store.checkpoint_log(signer)
    head = rig.store.head(saga)
    assert head is not None
    log.record(head)
    return log, signer


def test_a_whole_chain_resealed_is_found_by_its_checkpoint(rig: Rig) -> None:
    """What a rewrite can hide: a payload edited and every entry from there resealed
    (bytes, hash and link recomputed) is a self-consistent chain again, with no
    `tampered` left to find. Its signed checkpoint pins the old head, which the rewrite
    cannot keep, so the rewrite is `rewritten`."""
    saga = f"reseal-{uuid.uuid4().hex[:8]}"
    chain = _chain(rig.store, saga, close=True)
    log, signer = _checkpointed(rig, saga)
    prev, forged = GENESIS, []
    for entry in chain:
        entry = replace(entry, prev_hash=prev)
        if entry.seq == K:
            entry = replace(entry, result_json='{"paid":1}')
        entry = reseal(entry)
        forged.append(entry)
        prev = entry.hash
    for e in forged:
        rig.run(
            "UPDATE {journal} SET material=?, prev_hash=?, hash=? WHERE saga_id=? AND seq=?",
            (e.material, e.prev_hash, e.hash, saga, e.seq),
        )
    stored = list(rig.store.entries(saga))
    assert stored == forged and stored[K - 1].result == {"paid": 1}
    assert stored[-1].hash != chain[-1].hash
    assert verify_store(rig.store, saga).ok  # the chain alone cannot tell
    evidence, _ = check_one(rig.store, log, saga, [signer.verifier])
    assert [f.problem for f in evidence.findings] == [Problem.REWRITTEN]


def test_a_cut_tail_is_found_by_its_checkpoint(rig: Rig) -> None:
    saga = f"cut-{uuid.uuid4().hex[:8]}"
    chain = _chain(rig.store, saga, close=True)
    log, signer = _checkpointed(rig, saga)
    rig.run("DELETE FROM {journal} WHERE saga_id=? AND seq>=?", (saga, K + 1))
    assert [e.seq for e in rig.store.entries(saga)] == list(range(1, K + 1))
    assert verify_store(rig.store, saga).ok
    evidence, _ = check_one(rig.store, log, saga, [signer.verifier])
    assert [f.problem for f in evidence.findings] == [Problem.TRUNCATED]
    assert f"covers {len(chain)}" in evidence.findings[0].detail


def test_a_field_over_its_limit_is_unreadable_not_read(rig: Rig) -> None:
    """A row whose bytes declare a tool name of 2,000 bytes (no sagacity entry has one
    over 1,024) is refused before anything in it is decoded."""
    saga = f"big-{uuid.uuid4().hex[:8]}"
    _chain(rig.store, saga)
    material = bytes(rig.row(saga, K)[-1])
    lengths = list(struct.unpack_from(">7Q", material, HEADER_SIZE - 56))
    tool_at = HEADER_SIZE + lengths[0]
    big_tool = b"x" * 2000
    lengths[1] = len(big_tool)
    edited = (
        material[: HEADER_SIZE - 56]
        + struct.pack(">7Q", *lengths)
        + material[HEADER_SIZE:tool_at]
        + big_tool
        + material[tool_at + 3 :]
    )
    rig.run("UPDATE {journal} SET material=? WHERE saga_id=? AND seq=?", (edited, saga, K))
    assert len(bytes(rig.row(saga, K)[-1])) == len(material) + 1997
    assert "over its limit" in _broken(rig.store, saga, K, BreakReason.UNREADABLE)


def test_bytes_that_are_not_an_entry_are_unreadable(rig: Rig) -> None:
    saga = f"junk-{uuid.uuid4().hex[:8]}"
    _chain(rig.store, saga)
    rig.run("UPDATE {journal} SET material=? WHERE saga_id=? AND seq=?", (b"\x00" * 40, saga, K))
    assert bytes(rig.row(saga, K)[-1]) == b"\x00" * 40
    assert "not a sagacity entry" in _broken(rig.store, saga, K, BreakReason.UNREADABLE)


def test_the_link_is_read_at_its_fixed_offset(rig: Rig) -> None:
    saga = f"link-{uuid.uuid4().hex[:8]}"
    chain = _chain(rig.store, saga)
    for before, entry in itertools.pairwise(chain):
        assert entry.material[PREV_OFFSET : PREV_OFFSET + 32] == bytes.fromhex(before.hash)
    assert verify_chain(saga, rig.store.entries(saga), columns_checked=True).ok


def test_a_link_column_respelled_in_upper_case_is_tampered(rig: Rig) -> None:
    """The same 32 bytes in another spelling: fromhex reads both alike, the column check
    does not (an auditor comparing hashes as text would see two values)."""
    saga = f"upper-{uuid.uuid4().hex[:8]}"
    chain = _chain(rig.store, saga)
    upper = chain[K - 2].hash.upper()
    rig.run("UPDATE {journal} SET prev_hash=? WHERE saga_id=? AND seq=?", (upper, saga, K))
    assert rig.row(saga, K)[11] == upper != chain[K - 1].prev_hash
    assert "its prev_hash column" in _broken(rig.store, saga, K, BreakReason.TAMPERED)
