"""A rig for the evidence tests: real sagas on the dev server, a worker signing checkpoints
with its own log key, a journal on PostgreSQL (a fresh schema) or SQLite (a file), and a
tamperer that edits that database the way its owner could: guard triggers disabled,
rows changed, triggers restored, and the change read back to prove it happened.

The CLI runs in-process against the same journal and Temporal, with only the log's
public key (SAGACITY_LOG_VERIFIER), as an auditor would.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from temporalio.testing import WorkflowEnvironment

from sagacity.examples.orders import Shop
from sagacity.journal._chain import GENESIS, reseal
from sagacity.journal._entry import JournalEntry, render_timestamp
from sagacity.journal._phases import Phase
from sagacity.stores import JournalStore, open_store
from sagacity.stores._base import utc_now
from sagacity.tlog._note_keys import NoteSigner
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker.client._client import saga_result
from sagacity.workflows._models import SagaInput, SagaResult, ToolCall
from tests.support.cli import Ran, invoke_sync

CHARGE = ToolCall(tool="charge_card", args={"amount": 1_250, "currency": "EUR"})
SHIP = ToolCall(tool="ship_order", args={"address": "1 Main St"})
SHIP_FAILS = ToolCall(tool="ship_order", args={"address": "1 Main St", "fail": True})
CHECKPOINT_EVERY = 4
"""Small, so that sagas also get periodic checkpoints, not only the one at their close."""


def plan_for(index: int) -> SagaInput:
    """Completed, compensated and continued-as-new (then completed) sagas, in turn. (No
    stock reservations: the shop's ten widgets would run out.)"""
    if index % 3 == 0:
        return SagaInput(plan=[CHARGE, SHIP])
    if index % 3 == 1:
        return SagaInput(plan=[CHARGE, CHARGE, SHIP_FAILS])
    return SagaInput(plan=[CHARGE, SHIP, CHARGE, SHIP, CHARGE], continue_as_new_after_steps=2)


class Tamperer:
    """Edits a journal database as its owner can: with the append-only triggers off."""

    def __init__(self, kind: str, target: str, dsn: str = "") -> None:
        self.kind = kind
        self.target = target  # the PostgreSQL schema, or the SQLite file
        self.dsn = dsn  # the superuser's connection (PostgreSQL)
        self.url = ""  # the journal URL the worker and the CLI use
        pg = kind == "postgres"
        self.names = {
            "journal": f'"{target}".sagacity_journal' if pg else "journal",
            "cp": f'"{target}".sagacity_checkpoints' if pg else "checkpoints",
            "nodes": f'"{target}".sagacity_log_nodes' if pg else "log_nodes",
            "heads": f'"{target}".sagacity_log_heads' if pg else "log_heads",
        }

    def _sql(self, text: str) -> str:
        text = text.format(**self.names)
        return text.replace("?", "%s") if self.kind == "postgres" else text

    def rows(self, text: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if self.kind == "postgres":
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                return conn.execute(self._sql(text).encode(), params).fetchall()
        with sqlite3.connect(self.target) as conn:
            return conn.execute(self._sql(text), params).fetchall()

    def run(self, *statements: tuple[str, Sequence[Any]]) -> None:
        """Run `statements` with every guard trigger disabled, then restore the guards."""
        if self.kind == "postgres":
            self._run_postgres(statements)
        else:
            self._run_sqlite(statements)

    def insert(self, entries: Sequence[JournalEntry]) -> None:
        """Insert entries as rows, as they are: whatever their ids and payloads say."""
        self.run(*(insert_row(e) for e in entries))

    def _run_postgres(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        tables = [self.names[k] for k in ("journal", "cp", "nodes", "heads")]
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
            assert row.fetchone() == (True,), "tampering needs a superuser"
            for table in tables:
                conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER".encode())
            try:
                for text, params in statements:
                    conn.execute(self._sql(text).encode(), params)
            finally:
                for table in tables:
                    triggers = conn.execute(
                        "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND "
                        "NOT tgisinternal",
                        (table,),
                    ).fetchall()
                    for (name,) in triggers:
                        ident = sql.Identifier(name).as_string(conn)
                        conn.execute(f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {ident}".encode())

    def _run_sqlite(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        run_unguarded_sqlite(
            self.target, ((self._sql(text), params) for text, params in statements)
        )


def run_unguarded_sqlite(path: str | Path, statements: Iterable[tuple[str, Sequence[Any]]]) -> None:
    """Run `statements` on the SQLite journal at `path` with its guard triggers dropped,
    then put the triggers back as they were."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        triggers = conn.execute("SELECT name, sql FROM sqlite_master WHERE type='trigger'")
        saved = triggers.fetchall()
        assert saved, "the SQLite journal has guard triggers to drop"
        for name, _ in saved:
            conn.execute(f'DROP TRIGGER "{name}"')
        try:
            for text, params in statements:
                conn.execute(text, params)
        finally:
            for _, text in saved:
                conn.execute(text)
    finally:
        conn.close()


def payload_columns(e: JournalEntry) -> tuple[str, str, str, bytes]:
    """input_json, result_json, error_json and material as a store writes them: a row
    keeps its payloads in its material only (sagacity.stores._stored_row)."""
    return "", "", "", e.material


def insert_row(e: JournalEntry) -> tuple[str, tuple[Any, ...]]:
    """The statement that stores `e` as a row, as a store writes it."""
    given, result, error, material = payload_columns(e)
    return (
        "INSERT INTO {journal} (saga_id, seq, step, attempt, tool, phase, input_json, "
        "result_json, error_json, actor_json, recorded_at, prev_hash, hash, material) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            e.saga_id, e.seq, e.step, e.attempt, e.tool, e.phase.value, given, result,
            error, e.actor_json, render_timestamp(e.recorded_at), e.prev_hash, e.hash,
            material,
        ),
    )  # fmt: skip


def hand_made(saga_id: str, *rows: dict[str, Any]) -> list[JournalEntry]:
    """A chain written by hand, correctly hashed, with whatever texts `rows` give (no
    check of the id or the payloads: what someone with the database's rows can write).
    Each row names its `phase` and optionally `input`, `result`, `actor` (raw text)."""
    entries: list[JournalEntry] = []
    prev = GENESIS
    for seq, row in enumerate(rows, start=1):
        entry = JournalEntry(
            saga_id=saga_id,
            seq=seq,
            step=0,
            attempt=1,
            tool="",
            phase=Phase(row["phase"]),
            input_json=row.get("input", "null"),
            result_json=row.get("result", "null"),
            error_json="null",
            actor_json=row.get("actor", "null"),
            recorded_at=utc_now(),
            prev_hash=prev,
            hash="",
            material=b"",
        )
        entry = reseal(entry)
        entries.append(entry)
        prev = entry.hash
    return entries


def rewrite(entries: Sequence[JournalEntry], old: str, new: str) -> list[JournalEntry]:
    """The chain with `old` replaced by `new` in every payload and every hash recomputed
    (the bytes rebuilt too): a rewrite the chain alone cannot show."""
    forged: list[JournalEntry] = []
    prev = GENESIS
    for entry in entries:
        entry = replace(
            entry,
            input_json=entry.input_json.replace(old, new),
            result_json=entry.result_json.replace(old, new),
            prev_hash=prev,
            hash="",
        )
        entry = reseal(entry)
        forged.append(entry)
        prev = entry.hash
    return forged


def updates(entries: Sequence[JournalEntry]) -> list[tuple[str, tuple[Any, ...]]]:
    """The statements that store `entries` over the rows of the same saga and seq (a v2
    entry's bytes too)."""
    return [
        (
            "UPDATE {journal} SET input_json=?, result_json=?, material=?, prev_hash=?, "
            "hash=? WHERE saga_id=? AND seq=?",
            (*payload_columns(e)[0:2], e.material or None, e.prev_hash, e.hash, e.saga_id, e.seq),
        )
        for e in entries
    ]


@dataclass
class EvidenceRig:
    kind: str
    store: JournalStore
    url: str
    signer: NoteSigner
    env: dict[str, str]
    tamper: Tamperer
    client: Any
    task_queue: str
    results: dict[str, SagaResult] = field(default_factory=dict)

    @property
    def vkey(self) -> str:
        return self.signer.verifier.encode()

    async def run_sagas(self, count: int, prefix: str, *, batch: int = 25) -> list[str]:
        """Run `count` sagas to their end (in parallel batches); returns their ids."""
        ids = [f"{prefix}-{uuid.uuid4().hex[:8]}-{i}" for i in range(count)]
        for start in range(0, count, batch):
            chunk = ids[start : start + batch]
            handles = [
                await self.client.start_workflow(
                    "AgentSaga",
                    plan_for(start + offset),
                    id=saga_id,
                    task_queue=self.task_queue,
                    result_type=SagaResult,
                )
                for offset, saga_id in enumerate(chunk)
            ]
            for saga_id, result in zip(
                chunk, await asyncio.gather(*(saga_result(h) for h in handles)), strict=True
            ):
                self.results[saga_id] = result
        return ids

    async def cli(self, *args: str, **env: str) -> Ran:
        """`sagacity ARGS` as an auditor runs it: the journal, Temporal, the public key."""
        return await asyncio.to_thread(invoke_sync, list(args), {**self.env, **env}, None)


def _fresh_schema_url(postgres_url: str) -> tuple[str, str]:
    schema = f"sagacity_ev_{uuid.uuid4().hex[:12]}"
    return schema, f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={schema}"


@pytest.fixture(params=[pytest.param("postgres", marks=pytest.mark.postgres), "sqlite"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Tamperer]:
    """A fresh journal database (its URL in .url) and the tamperer of its owner."""
    if request.param == "sqlite":
        path = tmp_path / "journal.db"
        tamperer = Tamperer("sqlite", str(path))
        tamperer.url = f"sqlite:///{path}"
        yield tamperer
        return
    postgres_url: str = request.getfixturevalue("postgres_url")
    schema, url = _fresh_schema_url(postgres_url)
    tamperer = Tamperer("postgres", schema, postgres_url)
    tamperer.url = url
    yield tamperer
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
async def rig(
    temporal_env: WorkflowEnvironment, backend: Tamperer, tmp_path: Path
) -> AsyncIterator[EvidenceRig]:
    kind, url = backend.kind, backend.url
    store = open_store(url)
    signer = NoteSigner.generate("sagacity.test/evidence")
    task_queue = f"ev-{uuid.uuid4().hex[:8]}"
    env = {
        "TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host,
        "TEMPORAL_NAMESPACE": temporal_env.client.namespace,
        "SAGACITY_TASK_QUEUE": task_queue,
        "SAGACITY_JOURNAL_URL": url,
        "SAGACITY_LOG_VERIFIER": signer.verifier.encode(),
        "SAGACITY_APPROVER": "",
    }
    worker = new_worker(
        temporal_env.client,
        store=store,
        toolbox=Toolbox.build(Shop(tmp_path / "shop.db")),
        task_queue=task_queue,
        log_key=signer,
        checkpoint_every=CHECKPOINT_EVERY,
        max_concurrent_workflow_tasks=50,
    )
    try:
        async with worker:
            yield EvidenceRig(
                kind, store, url, signer, env, backend, temporal_env.client, task_queue
            )
    finally:
        store.close()
