"""`sagacity verify --all --jobs N`: the same output and exit status as one process, on
SQLite and PostgreSQL journals of many sagas with one of them tampered with, and the work
really done by several processes."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from sagacity.audit._decisions import DecisionAudit
from sagacity.audit._evidence_walk import audit_log, check_all
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import JournalStore, open_store
from sagacity.worker.cli._verify_parallel import auto_jobs, check_all_parallel
from tests.support.cli import invoke_sync

SAGAS = 60
TAMPERED = "saga-0031"


def _fill(store: JournalStore) -> None:
    """SAGAS sagas of a few entries; every seventh left open."""
    for i in range(SAGAS):
        saga = f"saga-{i:04d}"
        store.append(EntryDraft.new(saga, Phase.SAGA_OPENED, input={"plan": ["charge_card"]}))
        store.append(EntryDraft.new(saga, Phase.INTENT, step=1, tool="charge_card", input={"n": i}))
        store.append(
            EntryDraft.new(saga, Phase.EXECUTED, step=1, tool="charge_card", result={"ch": i})
        )
        if i % 7:
            store.append(EntryDraft.new(saga, Phase.SAGA_CLOSED, result={"status": "COMPLETED"}))


@pytest.fixture
def sqlite_journal(tmp_path: Path) -> Iterator[str]:
    db = tmp_path / "journal.db"
    url = f"sqlite:///{db}"
    with open_store(url) as store:
        _fill(store)
    con = sqlite3.connect(db)
    try:
        con.execute("DROP TRIGGER journal_no_update")
        edited = con.execute(
            "UPDATE journal SET result_json = '{\"ch\":999}' WHERE saga_id = ? AND seq = 3",
            (TAMPERED,),
        )
        assert edited.rowcount == 1
        con.commit()
    finally:
        con.close()
    yield url


@pytest.fixture
def postgres_journal(postgres_url: str) -> Iterator[str]:
    schema = f"t_par_{uuid.uuid4().hex[:10]}"
    url = f"{postgres_url}?schema={schema}"
    with open_store(url) as store:
        _fill(store)
    table = sql.Identifier(schema, "sagacity_journal")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        try:
            conn.execute(sql.SQL("ALTER TABLE {} DISABLE TRIGGER USER").format(table))
            edited = conn.execute(
                sql.SQL("UPDATE {} SET result_json = %s WHERE saga_id = %s AND seq = 3").format(
                    table
                ),
                ('{"ch":999}', TAMPERED),
            )
            assert edited.rowcount == 1
            yield url
        finally:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def _same_in_every_run(url: str) -> None:
    env = {"SAGACITY_JOURNAL_URL": url}
    for extra in ([], ["--json"], ["-v"]):
        one = invoke_sync(["verify", "--all", "--jobs", "1", *extra], env)
        assert one.code == 1, one.output
        if not extra:
            assert f"BROKEN {TAMPERED}: first broken seq 3 (tampered)" in one.stdout
            assert f"1 of {SAGAS} sagas broken; first: {TAMPERED}" in one.stderr
        for jobs in ("2", "3"):
            many = invoke_sync(["verify", "--all", "--jobs", jobs, *extra], env)
            assert (many.code, many.stdout, many.stderr) == (one.code, one.stdout, one.stderr)


def test_parallel_verify_matches_one_process_on_sqlite(sqlite_journal: str) -> None:
    _same_in_every_run(sqlite_journal)


@pytest.mark.postgres
def test_parallel_verify_matches_one_process_on_postgres(postgres_journal: str) -> None:
    _same_in_every_run(postgres_journal)


def test_the_sagas_are_checked_by_several_processes_in_order(sqlite_journal: str) -> None:
    """Not a silent fallback to one process: chunks are checked in two processes (this
    one and a worker), and the evidence arrives as the sequential walk gives it, in its
    order, tampered saga and all."""
    with open_store(sqlite_journal) as store:
        log = store.checkpoint_log()
        sequential = list(
            check_all(store, log, None, DecisionAudit().observe, audit=audit_log(log, None))
        )
        workers: dict[int, float] = {}
        decisions = DecisionAudit()
        parallel = list(
            check_all_parallel(
                store,
                sqlite_journal,
                log,
                None,
                decisions,
                None,
                jobs=2,
                sagas=SAGAS,
                audit=audit_log(log, None),
                workers=workers,
                wait_for_workers=True,
            )
        )
    assert parallel == sequential
    assert len(workers) == 2 and all(cpu > 0 for cpu in workers.values())
    broken = [s.saga_id for s in parallel if s.report is not None and not s.report.ok]
    assert broken == [TAMPERED]


def test_the_default_is_one_process_for_a_small_journal() -> None:
    assert auto_jobs(10, cpus=8) == 1
    assert auto_jobs(5_000, cpus=2) == 2
    assert auto_jobs(5_000, cpus=16) == 4


def test_a_worker_that_died_is_a_journal_error_naming_the_way_out() -> None:
    from concurrent.futures import Future
    from concurrent.futures.process import BrokenProcessPool

    from sagacity._errors import JournalError
    from sagacity.worker.cli._verify_parallel import _result

    died: Future[object] = Future()
    died.set_exception(BrokenProcessPool("a child process terminated abruptly"))
    with pytest.raises(JournalError, match="--jobs 1"):
        _result(died)  # type: ignore[arg-type]
