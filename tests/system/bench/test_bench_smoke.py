"""The benchmarks' quick mode as a smoke test, at tiny sizes: each benchmark runs end to
end against real PostgreSQL and a real Temporal dev server and must lose nothing and leave
every chain verifying. Timings and ratios are never asserted (they are the benchmarks'
output, and this machine is noisy); only integrity is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import agent_saga, append, growth, parked, saga_overhead, verify, verify_jobs
from bench.common import Report, Sizes

pytestmark = pytest.mark.postgres

TINY = Sizes.smoke()


def _sound(report: Report, results: Path) -> dict[str, object]:
    """Integrity held, the report has tables, and its JSON is written and readable."""
    assert report.ok, "\n".join(report.integrity)
    assert report.checks, "the benchmark checked nothing"
    assert report.tables and all(t["rows"] for t in report.tables)
    path = report.write(results)
    data: dict[str, object] = json.loads(path.read_text())
    assert data["integrity_failures"] == []
    return data


def test_append_loses_nothing_and_every_chain_verifies(postgres_url: str, tmp_path: Path) -> None:
    report = append.run(TINY, postgres_url=postgres_url)
    _sound(report, tmp_path)
    for backend in ("postgres", "sqlite", "memory"):
        assert report.extra[backend]["lost"] == 0
        assert any(check.startswith(f"{backend}:") for check in report.checks)
    assert report.extra["postgres"]["8w1s"]["appends"] > 0
    assert {t.name for t in report.targets} >= {"append 1 writer (Postgres)"}


def test_verify_streams_and_exports_whole_chains(postgres_url: str, tmp_path: Path) -> None:
    report = verify.run(TINY, postgres_url=postgres_url, workdir=tmp_path)
    _sound(report, tmp_path)
    assert set(report.extra["export"]) == {"300"}  # one journal: the one recipe
    export = report.extra["export"]["300"]["runs"]["sagacity"]
    assert len(export) == TINY.export_rounds
    assert all(run["entries"] == run["verified"] == 300 for run in export)
    assert all(run["broken"] == 0 and run["peak_rss"] > 0 for run in export)


@pytest.mark.temporal
async def test_saga_overhead_journals_every_saga(postgres_url: str, tmp_path: Path) -> None:
    report = await saga_overhead._run(TINY, postgres_url)
    _sound(report, tmp_path)
    assert len(report.extra["throughput"]["rates"]["saga"]) == 1


@pytest.mark.temporal
async def test_parked_sagas_are_all_approved(postgres_url: str, tmp_path: Path) -> None:
    report = await parked._run(TINY, postgres_url)
    data = _sound(report, tmp_path)
    runs = report.extra["runs"]
    assert [len(runs["plain"]), len(runs["saga"])] == [1, 1]
    assert runs["saga"][0]["errors"] == [] and runs["saga"][0]["not_completed"] == 0
    assert runs["saga"][0]["parked_rss"] > 0
    assert runs["saga"][0]["decide_all_s"] <= runs["saga"][0]["approve_all_s"]
    assert {t.name for t in report.targets} >= {
        "parked memory per workflow, saga/plain",
        "approving parked sagas, saga/plain rate (decided and completed)",
    }
    assert data["benchmark"] == "parked"


def test_verify_jobs_runs_the_command_both_ways(postgres_url: str, tmp_path: Path) -> None:
    report = verify_jobs.run(TINY, postgres_url=postgres_url)
    _sound(report, tmp_path)
    runs = report.extra["PostgreSQL"]  # SQLite only outside the smoke test, for time
    assert len(runs["one"]) == len(runs["two"]) == 1


def test_agent_saga_side_by_side_on_both_backends(postgres_url: str, tmp_path: Path) -> None:
    """Runs (never skips): the dev extra includes the bench extra with agent-saga."""
    assert agent_saga.missing() is None, agent_saga.INSTALL
    report = agent_saga.run(TINY, postgres_url=postgres_url)
    _sound(report, tmp_path)
    for backend in ("files", "postgres"):
        for what in ("durable append", "durable tool call", "verify"):
            assert len(report.extra[backend][what]["ratios"]) == 2
    assert len(report.targets) == 6


@pytest.mark.temporal
def test_growth_fills_measures_and_draws(postgres_url: str, tmp_path: Path) -> None:
    from bench import plots

    report = growth.run(TINY, postgres_url=postgres_url)
    data = _sound(report, tmp_path)
    assert set(report.extra["postgres"]["verify"]) == {"500", "2000"}
    assert [len(v) for v in report.extra["workers"]["rates"].values()] == [1, 1]
    extra = data["extra"]
    assert isinstance(extra, dict)
    journal = plots.journal_plot(extra, tmp_path / "journal.png")
    workers = plots.workers_plot(extra["workers"], tmp_path / "workers.png")
    assert journal.read_bytes()[:8] == workers.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
