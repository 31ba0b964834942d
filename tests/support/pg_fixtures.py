"""Fixtures of the fault suite: real PostgreSQL in a fresh schema per test, real worker
processes, and the fake shop whose record of tool-body runs is the ground truth for "did
it run twice". Real Temporal is the session's dev server (`temporal_env`, tests/conftest.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from temporalio.testing import WorkflowEnvironment

from sagacity.examples.orders import Shop
from sagacity.stores import JournalStore, open_store
from tests.support.workers import WorkerProcesses, with_schema, worker_env


def fresh_schema_url(postgres_url: str, prefix: str) -> Iterator[str]:
    """For a module's schema fixture: the URL of a schema named `prefix` and a fresh
    suffix (the store creates it on open), dropped after the module's tests."""
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    yield with_schema(postgres_url, schema)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def pg_schema(postgres_url: str) -> Iterator[str]:
    """A fresh schema for this test's journal, dropped afterwards (see the schema
    parameter in sagacity/stores/_postgres.py)."""
    schema = f"sagacity_faults_{uuid.uuid4().hex[:12]}"
    yield schema
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("SET lock_timeout = '10s'")
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def pg_journal_url(postgres_url: str, pg_schema: str) -> str:
    return with_schema(postgres_url, pg_schema)


@pytest.fixture
def pg_store(pg_journal_url: str) -> Iterator[JournalStore]:
    """The test's own view of the journal (it also creates the schema before any worker
    process opens it)."""
    store = open_store(pg_journal_url)
    yield store
    store.close()


@pytest.fixture
def shop(tmp_path: Path) -> Shop:
    return Shop(tmp_path / "shop.db")


@pytest.fixture
def workers(
    temporal_env: WorkflowEnvironment, tmp_path: Path, pg_journal_url: str, pg_store: JournalStore
) -> Iterator[WorkerProcesses]:
    """Worker processes serving examples.orders on a fresh task queue, journaling to this
    test's PostgreSQL schema. Stopped at teardown, before the schema is dropped."""
    address = temporal_env.client.service_client.config.target_host
    args = [
        "--tools", "sagacity.examples.orders:toolbox",
        "--journal", pg_journal_url,
        "--task-queue", f"faults-{uuid.uuid4().hex[:8]}",
    ]  # fmt: skip
    procs = WorkerProcesses(tmp_path, worker_env(address, tmp_path / "shop.db"), args)
    try:
        yield procs
    finally:
        procs.stop_all()
