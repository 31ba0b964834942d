"""`python -m bench.checkpoints` — what signed checkpoints cost, beside plain baselines.

1. A checkpoint (sign the saga's head, append the leaf, its nodes and a signed tree head,
   in one locked transaction) against one plain journal append of the same store, with
   the log at 0 and at N leaves already (the cost must not grow with the log: roots and
   nodes are O(log n) lookups). PostgreSQL and SQLite.
2. A saga's wall time on the dev server with a worker that checkpoints against the same
   worker without a log key, in alternating rounds (SQLite journal).
3. `verify --all` with checkpoints and the whole-log audit against chains alone, and a
   complete export with its evidence lines checked offline against one without
   (PostgreSQL).

Medians of alternating rounds; ratios are what the docs quote.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from sagacity.audit._evidence_walk import audit_log, check_all
from sagacity.audit._export import export_jsonl, export_lines, verify_all, verify_jsonl
from sagacity.audit._file_evidence import FileEvidence
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import JournalStore, open_store
from sagacity.tlog._log import CheckpointLog
from sagacity.tlog._note_keys import NoteSigner

DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
SIGNER = NoteSigner.generate("sagacity.bench/checkpoints")


def _closed(store: JournalStore, saga_id: str) -> object:
    store.append(EntryDraft.new(saga_id, Phase.SAGA_OPENED))
    return store.append(EntryDraft.new(saga_id, Phase.SAGA_CLOSED, result={"status": "x"}))


def _rates(store: JournalStore, n: int, prefix: str) -> tuple[float, float]:
    """(checkpoints per second, plain appends per second), measured back to back."""
    log = store.checkpoint_log(SIGNER)
    closes = [_closed(store, f"{prefix}-{uuid.uuid4().hex[:6]}-{i}") for i in range(n)]
    t0 = time.perf_counter()
    for entry in closes:
        log.record(entry)  # type: ignore[arg-type]
    checkpoints = n / (time.perf_counter() - t0)
    drafts = [EntryDraft.new(f"{prefix}-plain-{i}", Phase.SAGA_OPENED) for i in range(n)]
    t0 = time.perf_counter()
    for draft in drafts:
        store.append(draft)
    appends = n / (time.perf_counter() - t0)
    return checkpoints, appends


def _fill(store: JournalStore, leaves: int) -> None:
    log = store.checkpoint_log(SIGNER)
    for i in range(leaves):
        log.record(_closed(store, f"fill-{i}"))  # type: ignore[arg-type]


def bench_append(url: str, label: str, n: int, grown: int) -> list[str]:
    store = open_store(url)
    try:
        empty = _rates(store, n, "a")
        _fill(store, grown)
        full = _rates(store, n, "b")
    finally:
        store.close()
    return [
        f"{label}: checkpoint {empty[0]:,.0f}/s vs plain append {empty[1]:,.0f}/s "
        f"= {empty[0] / empty[1]:.2f}x at a log of {n} leaves",
        f"{label}: checkpoint {full[0]:,.0f}/s vs plain append {full[1]:,.0f}/s "
        f"= {full[0] / full[1]:.2f}x at a log of {grown + 2 * n} leaves; checkpoint rate at "
        f"the larger log = {full[0] / empty[0]:.2f}x the rate at the smaller",
    ]


async def bench_sagas(rounds: int, per_round: int) -> list[str]:
    from sagacity.examples.orders import Shop
    from sagacity.tools._toolbox import Toolbox
    from sagacity.worker._app import new_worker
    from sagacity.worker._devserver import start_dev_server
    from sagacity.workflows._models import SagaInput, SagaResult, ToolCall

    logging.getLogger("temporalio.activity").setLevel(logging.ERROR)
    plan = SagaInput(
        plan=[
            ToolCall(tool="charge_card", args={"amount": 10}),
            ToolCall(tool="ship_order", args={"address": "x"}),
        ]
    )
    env = await start_dev_server()
    times: dict[str, list[float]] = {"plain": [], "checkpoints": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            store = open_store(f"sqlite:///{tmp}/journal.db")
            shop = Toolbox.build(Shop(Path(tmp) / "shop.db"))
            workers = {
                "plain": new_worker(env.client, store=store, toolbox=shop, task_queue="b-plain"),
                "checkpoints": new_worker(
                    env.client, store=store, toolbox=shop, task_queue="b-cp", log_key=SIGNER
                ),
            }
            queues = {"plain": "b-plain", "checkpoints": "b-cp"}
            async with workers["plain"], workers["checkpoints"]:
                for r in range(rounds + 1):
                    order = ("plain", "checkpoints") if r % 2 else ("checkpoints", "plain")
                    for side in order:
                        t0 = time.perf_counter()
                        handles = [
                            await env.client.start_workflow(
                                "AgentSaga",
                                plan,
                                id=f"b-{uuid.uuid4().hex[:10]}",
                                task_queue=queues[side],
                                result_type=SagaResult,
                            )
                            for _ in range(per_round)
                        ]
                        await asyncio.gather(*(h.result() for h in handles))
                        if r:  # round 0 warms both up
                            times[side].append((time.perf_counter() - t0) / per_round)
            store.close()
    finally:
        await env.shutdown()
    plain, cp = statistics.median(times["plain"]), statistics.median(times["checkpoints"])
    return [
        f"saga wall time (dev server, SQLite, {per_round} concurrent per round, "
        f"{rounds} rounds): {cp * 1000:.1f} ms with checkpoints vs {plain * 1000:.1f} ms "
        f"without = {cp / plain:.2f}x"
    ]


def bench_verify(url: str, sagas: int) -> list[str]:
    store = open_store(url)
    try:
        log = store.checkpoint_log(SIGNER)
        for i in range(sagas):
            saga_id = f"v-{i:06}"
            store.append(EntryDraft.new(saga_id, Phase.SAGA_OPENED))
            for step in range(1, 9):
                store.append(
                    EntryDraft.new(saga_id, Phase.EXECUTED, step=step, tool="t", result=step)
                )
            log.record(store.append(EntryDraft.new(saga_id, Phase.SAGA_CLOSED, result={})))
        timings: dict[str, list[float]] = {"chains": [], "evidence": []}
        for r in range(4):
            for side in ("chains", "evidence") if r % 2 else ("evidence", "chains"):
                t0 = time.perf_counter()
                if side == "chains":
                    assert all(report.ok for report in verify_all(store))
                else:
                    audit = audit_log(log, [SIGNER.verifier])
                    assert not audit.findings
                    walk = check_all(store, log, [SIGNER.verifier], audit=audit)
                    assert not any(s.findings for s in walk)
                timings[side].append(time.perf_counter() - t0)
        exported = _export_rounds(store, log)
    finally:
        store.close()
    chains, evidence = statistics.median(timings["chains"]), statistics.median(timings["evidence"])
    plain, full = statistics.median(exported["chains"]), statistics.median(exported["evidence"])
    return [
        f"verify --all of {sagas} sagas (10 entries each, PostgreSQL): chains only "
        f"{chains:.2f} s, with checkpoints and the log audit {evidence:.2f} s = "
        f"{chains / evidence:.2f}x the rate",
        f"export --all + verify-file of the same {sagas} sagas: entries only {plain:.2f} s, "
        f"complete export with every checkpoint, proof and the tree head checked "
        f"{full:.2f} s = {plain / full:.2f}x the rate",
    ]


def _export_rounds(store: JournalStore, log: CheckpointLog) -> dict[str, list[float]]:
    """A complete export to a file and its offline check, with the evidence lines (each
    saga spooled while its checkpoints are read and proved) and without, alternating."""
    timings: dict[str, list[float]] = {"chains": [], "evidence": []}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "export.jsonl"
        for r in range(4):
            for side in ("chains", "evidence") if r % 2 else ("evidence", "chains"):
                t0 = time.perf_counter()
                with path.open("w", encoding="utf-8") as out:
                    if side == "chains":
                        export_jsonl(store, out)
                    else:
                        export_jsonl(store, out, log=log, head=log.head())
                evidence = FileEvidence([SIGNER.verifier] if side == "evidence" else None)
                with path.open("rb") as fh:
                    reports = verify_jsonl(export_lines(fh), evidence.observe, evidence.evidence)
                assert all(r.ok for r in reports) and not evidence.finish(reports)
                assert side == "chains" or evidence.proved == len(reports)
                timings[side].append(time.perf_counter() - t0)
    return timings


def _fresh_schema(postgres_url: str) -> str:
    schema = f"bench_cp_{uuid.uuid4().hex[:10]}"
    return f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={schema}"


def _drop(url: str) -> None:
    import psycopg
    from psycopg import sql

    base, _, schema = url.rpartition("schema=")
    with psycopg.connect(base.rstrip("?&"), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES_URL)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n, grown, sagas = (200, 2_000, 300) if args.quick else (1_000, 20_000, 2_000)
    lines: list[str] = []
    for label, make in (("PostgreSQL", lambda: _fresh_schema(args.postgres)), ("SQLite", None)):
        if make is None:
            with tempfile.TemporaryDirectory() as tmp:
                lines += bench_append(f"sqlite:///{tmp}/j.db", label, n, grown)
        else:
            url = make()
            try:
                lines += bench_append(url, label, n, grown)
            finally:
                _drop(url)
    url = _fresh_schema(args.postgres)
    try:
        lines += bench_verify(url, sagas)
    finally:
        _drop(url)
    lines += asyncio.run(bench_sagas(rounds=4 if args.quick else 8, per_round=10))
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
