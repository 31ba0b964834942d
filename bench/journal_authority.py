"""`python -m bench.journal_authority [--postgres URL]`: what it costs that activities take
their authority from the journal, not from their input.

Two activity bodies are timed, each through temporalio's ActivityEnvironment (a real
activity context, no server), on a SQLite file and on PostgreSQL:

- an approved irreversible step (`sagacity.run_tool`): the check reads the saga's
  lifecycle entries (is the caller the saga's own run, is it open) and the step's entries
  (the request and its signed approval, re-verified against the registry), then the tool
  runs (INTENT, the tool, EXECUTED);
- one compensation (`sagacity.compensate`): the check reads the lifecycle entries (open,
  and the saga journaled its decision to compensate), then the compensation runs (fence,
  the step's entries, the undo, COMPENSATED).

Each is measured with the check and with the check replaced by a no-op (what the
activities did before: they acted on their input), alternating in the same rounds on
fresh sagas; the figure is the ratio of the two times per round, never a time on its own.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sagacity.activities import SagaActivities
from sagacity.activities._authority import Lifecycle
from sagacity.activities._models import CompensateInput, RunToolInput, ToolCall
from sagacity.activities._tool_runner import ToolRunner
from sagacity.approval._judge import approval_hash
from sagacity.approval._registry import ApproverRegistry
from sagacity.approval._registry_file import RegistryFile
from sagacity.approval._signing import SigningKey
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import JournalStore, open_store
from sagacity.tools._decorators import (
    CompensationContext,
    ToolContext,
    compensable,
    compensation,
    irreversible,
)
from sagacity.tools._toolbox import Toolbox
from tests.support.journal_approvals import approve, open_saga, request_approval
from tests.support.saga_activity_env import saga_env

SAGAS = 150
ROUNDS = 7
ARGS = {"iban": "DE89370400440532013000", "amount": 900}


class Tools:
    """Tools that do nothing, so the figure is the journal's and the check's."""

    @irreversible
    def pay(self, iban: str, amount: int, ctx: ToolContext) -> dict[str, int]:
        return {"paid": amount}

    @compensable("unbook")
    def book(self, amount: int, ctx: ToolContext) -> dict[str, int]:
        return {"booked": amount}

    @compensation
    def unbook(self, ctx: CompensationContext) -> None:
        return None


class Bench:
    def __init__(self, store: JournalStore, tmp: Path) -> None:
        self.store = store
        self.rita, self.alice = SigningKey.generate("rita"), SigningKey.generate("alice")
        since = datetime.now(UTC) - timedelta(hours=1)
        registry = ApproverRegistry().enroll("rita", self.rita.public_key, valid_from=since)
        self.registry = registry.enroll("alice", self.alice.public_key, valid_from=since)
        self.registry_file = tmp / "approvers.json"
        self.registry.save(self.registry_file)
        self.activities = SagaActivities(
            store, Toolbox.build(Tools()), registry=RegistryFile(self.registry_file)
        )

    def approved_sagas(self, count: int) -> list[str]:
        ids = []
        for _ in range(count):
            saga = f"pay-{uuid.uuid4().hex[:12]}"
            open_saga(self.store, saga, requester=self.rita, registry=self.registry)
            request_approval(self.store, saga, 1, "pay", ARGS, registry=self.registry)
            approve(self.store, saga, 1, "pay", ARGS, self.alice, registry=self.registry)
            ids.append(saga)
        return ids

    def compensating_sagas(self, count: int) -> list[str]:
        ids = []
        for _ in range(count):
            saga = f"undo-{uuid.uuid4().hex[:12]}"
            open_saga(self.store, saga)
            for phase, result in ((Phase.INTENT, None), (Phase.EXECUTED, {"booked": 1})):
                draft = EntryDraft.new(
                    saga, phase, step=1, tool="book", input={"amount": 1}, result=result
                )
                self.store.append(draft)
            self.store.append(EntryDraft.new(saga, Phase.COMPENSATING, input={"compensate": [1]}))
            ids.append(saga)
        return ids

    async def pay(self, saga: str) -> None:
        req = RunToolInput(
            saga_id=saga, step=1, call=ToolCall(tool="pay", args=ARGS),
            approved_sha256=approval_hash("pay", ARGS), worker=self.activities.identity,
        )  # fmt: skip
        out = await saga_env(saga).run(self.activities.run_tool, req)
        assert out.kind.value == "EXECUTED", out

    async def undo(self, saga: str) -> None:
        req = CompensateInput(saga_id=saga, step=1, tool="book", worker=self.activities.identity)
        await saga_env(saga).run(self.activities.compensate, req)


class Unchecked:
    """The check replaced by a no-op while in use: the activities act on their input."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.saved: tuple[Any, Any] | None = None

    def __enter__(self) -> None:
        authority = self.bench.activities.authority
        placeholder = EntryDraft.new("-", Phase.SAGA_OPENED)
        opened = self.bench.store.append(placeholder)

        async def lifecycle(saga_id: str, *, acting: bool = True) -> Lifecycle:
            return Lifecycle(opened, None, opened, None)

        async def nothing_missing(*_: Any) -> None:
            return None

        self.saved = (authority.lifecycle, ToolRunner._approval_missing)
        authority.lifecycle = lifecycle  # type: ignore[method-assign]
        ToolRunner._approval_missing = nothing_missing  # type: ignore[method-assign,assignment]

    def __exit__(self, *_: object) -> None:
        assert self.saved is not None
        self.bench.activities.authority.lifecycle = self.saved[0]  # type: ignore[method-assign]
        ToolRunner._approval_missing = self.saved[1]  # type: ignore[method-assign]


async def _timed(work: Callable[[str], Awaitable[None]], sagas: list[str]) -> float:
    started = time.perf_counter()
    for saga in sagas:
        await work(saga)
    return time.perf_counter() - started


async def measure(bench: Bench) -> dict[str, list[float]]:
    """Per kind of activity: the ratio of each round, then (as context, not a figure)
    the median time per activity with and without the check, in microseconds."""
    ratios: dict[str, list[float]] = {"irreversible step": [], "compensation": []}
    times: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in ratios}
    for _ in range(ROUNDS):
        for name, make, work in (
            ("irreversible step", bench.approved_sagas, bench.pay),
            ("compensation", bench.compensating_sagas, bench.undo),
        ):
            plain_sagas, checked_sagas = make(SAGAS), make(SAGAS)
            with Unchecked(bench):
                plain = await _timed(work, plain_sagas)
            checked = await _timed(work, checked_sagas)
            ratios[name].append(checked / plain)
            times[name][0].append(plain / SAGAS * 1e6)
            times[name][1].append(checked / SAGAS * 1e6)
    for name, (plain_us, checked_us) in times.items():
        ratios[f"{name} (us, unchecked)"] = plain_us
        ratios[f"{name} (us, checked)"] = checked_us
    return ratios


def _report(backend: str, ratios: dict[str, list[float]]) -> None:
    for name, got in ratios.items():
        if "(us" in name:
            print(f"{backend:10} {name:32} median {statistics.median(got):,.0f} us per activity")
            continue
        shown = ", ".join(f"{r:.2f}" for r in got)
        print(
            f"{backend:10} {name:18} checked / unchecked: median {statistics.median(got):.2f} "
            f"(min {min(got):.2f}, max {max(got):.2f}; rounds {shown})"
        )


def _drop(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    print(f"{SAGAS} activities per variant per round, {ROUNDS} alternating rounds")
    with tempfile.TemporaryDirectory() as tmp:
        backends = [("sqlite", f"sqlite:///{tmp}/journal.db")]
        if not args.no_postgres:
            schema = f"bench_authority_{uuid.uuid4().hex[:8]}"
            backends.append(("postgres", f"{args.postgres}?schema={schema}"))
        for backend, url in backends:
            store = open_store(url)
            try:
                _report(backend, asyncio.run(measure(Bench(store, Path(tmp)))))
            finally:
                store.close()
                if backend == "postgres":
                    _drop(args.postgres, schema)


if __name__ == "__main__":
    main()
