"""Benchmark (issue 16): sagacity's journal beside agent-saga's write-ahead log, side by
side in alternating rounds of one run, on files/SQLite and on PostgreSQL.

agent-saga (PyPI `agent-saga`, with asyncpg for its PostgreSQL log) is an optional bench
dependency, in the `bench` extra, never a runtime one; without it this benchmark says how
to install it and skips. Its API is used as its own source documents it; nothing of it
is copied here.

Three measurements per backend, one writer, the same payloads on both sides:

- durable append: one entry made durable before the next is written. sagacity:
  `store.append` (committed when it returns). agent-saga: `wal.append` then
  `await wal.barrier(seq)` (its fence: "return only once the record is durable").
- durable tool call: everything a step writes before and after its (no-op) tool.
  sagacity: `store.begin_step(INTENT)` and `store.append(EXECUTED)`, the two store calls
  the tool runner (activities.tool_runner) makes. agent-saga: `SagaContext.execute` of a
  COMPENSABLE tool with a compensation, which appends STEP_INTENT + barrier, runs the
  tool, appends STEP_COMMITTED + barrier (its default durable_commit).
- verify: read every entry back from the backend and check the chain. sagacity:
  `verify_store` for every saga (streamed). agent-saga: `integrity.verify` over
  `FileWAL.records()` / `PostgresWAL.read_all()` (its `agent-saga verify` does the same).

Durability: SQLite runs in WAL mode with synchronous=FULL (an fsync of the log per
commit), agent-saga's FileWAL writes, flushes and fsyncs each batch: one fsync per
durable write on both. On PostgreSQL both commit each durable write with the server's
synchronous_commit (on); agent-saga's batch is one asyncpg executemany (one implicit
transaction). The file side compares a SQLite database with a JSON-lines file: the
backends differ by design, which is the point of the comparison.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import (
    DEFAULT_POSTGRES_URL,
    Report,
    Sizes,
    drop_schemas,
    fmt_rate,
    median,
    pair_ratios,
    run_id,
    spread,
)

INSTALL = (
    "agent-saga is not installed: pip install -e '.[bench]' (the bench extra: agent-saga "
    "and asyncpg) to compare with it"
)
TOOL = "reserve_inventory"
DIAGNOSTIC = "tool call, our claim as a plain append (diagnostic)"
"""Our side writes INTENT and EXECUTED with two optimistic appends instead of begin_step:
not a real step (no claim), the floor a one-round-trip claim would reach."""


@dataclass(frozen=True)
class Scale:
    rounds: int
    appends: int
    tool_calls: int
    verify_entries: int

    @classmethod
    def of(cls, sizes: Sizes) -> Scale:
        if sizes.mode == "full":
            return cls(rounds=8, appends=400, tool_calls=200, verify_entries=100_000)
        if sizes.mode == "quick":
            return cls(rounds=4, appends=150, tool_calls=80, verify_entries=20_000)
        return cls(rounds=2, appends=10, tool_calls=5, verify_entries=200)


def missing() -> str | None:
    """Why agent-saga cannot be compared here (None when it can)."""
    try:
        import agent_saga  # noqa: F401
        import asyncpg  # noqa: F401
    except ImportError:
        return INSTALL
    return None


def _args(i: int) -> dict[str, Any]:
    return {"sku": "widget", "qty": i % 7 + 1, "order": f"ord-{i:06d}"}


def _result(i: int) -> dict[str, Any]:
    return {"reservation": f"res-{i:06d}", "qty": i % 7 + 1}


# ---- one side each --------------------------------------------------------------------------


class Ours:
    """sagacity's store on one backend."""

    def __init__(self, url: str) -> None:
        from sagacity.stores import open_store

        self.store = open_store(url)
        self.sagas: list[str] = []

    async def appends(self, n: int) -> float:
        from sagacity.journal._entry import EntryDraft
        from sagacity.journal._phases import Phase

        saga = f"app-{uuid.uuid4().hex[:10]}"
        self.sagas.append(saga)
        drafts = [
            EntryDraft.new(saga, Phase.INTENT, step=i + 1, tool=TOOL, input=_args(i))
            for i in range(n)
        ]
        start = time.perf_counter()
        for draft in drafts:
            self.store.append(draft)
        return n / (time.perf_counter() - start)

    async def tool_calls(self, n: int) -> float:
        from sagacity.journal._entry import EntryDraft
        from sagacity.journal._phases import Phase

        saga = f"tool-{uuid.uuid4().hex[:10]}"
        self.sagas.append(saga)
        start = time.perf_counter()
        for i in range(n):
            args = _args(i)
            intent = EntryDraft.new(saga, Phase.INTENT, step=i + 1, tool=TOOL, input=args)
            claim = self.store.begin_step(intent)
            assert claim.claimed
            await _noop(**args)
            self.store.append(
                EntryDraft.new(
                    saga, Phase.EXECUTED, step=i + 1, tool=TOOL, input=args, result=_result(i)
                )
            )
        return n / (time.perf_counter() - start)

    async def two_appends(self, n: int) -> float:
        """Diagnostic, not a saga step: INTENT and EXECUTED as two plain appends, without
        the step claim (no step, head and fence reads under the lock). What a step would
        cost if the claim took one round trip like an optimistic append."""
        from sagacity.journal._entry import EntryDraft
        from sagacity.journal._phases import Phase

        saga = f"two-{uuid.uuid4().hex[:10]}"
        self.sagas.append(saga)
        start = time.perf_counter()
        for i in range(n):
            args = _args(i)
            self.store.append(EntryDraft.new(saga, Phase.INTENT, step=i + 1, tool=TOOL, input=args))
            await _noop(**args)
            self.store.append(
                EntryDraft.new(
                    saga, Phase.EXECUTED, step=i + 1, tool=TOOL, input=args, result=_result(i)
                )
            )
        return n / (time.perf_counter() - start)

    async def verify(self) -> tuple[float, int, bool]:
        from sagacity.audit._export import verify_store

        start = time.perf_counter()
        entries, ok = 0, True
        for saga in self.store.sagas():
            report = verify_store(self.store, saga)
            entries += report.entries
            ok = ok and report.ok
        return entries / (time.perf_counter() - start), entries, ok

    def close(self) -> None:
        self.store.close()


async def _noop(**_: Any) -> dict[str, Any]:
    return {}


class Theirs:
    """agent-saga's write-ahead log on one backend (a FileWAL or a PostgresWAL)."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make
        self.wal: Any = None

    async def start(self) -> None:
        self.wal = self.make()
        await self.wal.start()

    async def appends(self, n: int) -> float:
        saga = f"app-{uuid.uuid4().hex[:10]}"
        payloads = [
            {"saga_id": saga, "step_id": f"s{i + 1}", "tool": TOOL, "kwargs": _args(i)}
            for i in range(n)
        ]
        start = time.perf_counter()
        for payload in payloads:
            seq = self.wal.append("STEP_INTENT", payload)
            await self.wal.barrier(seq)
        return n / (time.perf_counter() - start)

    async def tool_calls(self, n: int) -> float:
        from agent_saga.context import SagaContext
        from agent_saga.semantics import ActionSemantics, Compensation

        ctx = SagaContext(wal=self.wal, saga_id=f"tool-{uuid.uuid4().hex[:10]}")
        await ctx.begin()

        def undo(result: Any) -> Compensation:
            return Compensation(fn=_noop, kwargs={"reservation": "res"}, description="release")

        start = time.perf_counter()
        for i in range(n):
            await ctx.execute(
                TOOL, ActionSemantics.COMPENSABLE, _noop, forward_kwargs=_args(i), compensate=undo
            )
        rate = n / (time.perf_counter() - start)
        await ctx.finish()
        return rate

    async def fill(self, entries: int, per_saga: int) -> None:
        """The verify fixture: the same payloads as sagacity's filled chains, written
        with one barrier at the end (group commit: the fixture, not the measurement)."""
        for s in range(max(1, entries // per_saga)):
            saga = f"verify-{s:06d}"
            for seq in range(1, per_saga + 1):
                self.wal.append(
                    "STEP_COMMITTED" if seq % 2 else "STEP_INTENT",
                    {"saga_id": saga, "step_id": f"s{seq // 2}", "tool": TOOL,
                     "kwargs": _args(seq), "result": _result(seq)},
                )  # fmt: skip
        await self.wal.barrier()

    async def verify(self) -> tuple[float, int, bool]:
        from agent_saga.integrity import verify

        start = time.perf_counter()
        records = await self.wal.read_all()
        report = verify(records)
        return report.checked / (time.perf_counter() - start), report.checked, report.intact

    async def close(self) -> None:
        if self.wal is not None:
            await self.wal.close()


# ---- the run --------------------------------------------------------------------------------


async def _pairs(
    rounds: int, ours: Callable[[], Awaitable[float]], theirs: Callable[[], Awaitable[float]]
) -> tuple[list[float], list[float]]:
    """(agent-saga rates, sagacity rates), alternating which side goes first."""
    base: list[float] = []
    meas: list[float] = []
    for r in range(rounds):
        if r % 2 == 0:
            base.append(await theirs())
            meas.append(await ours())
        else:
            meas.append(await ours())
            base.append(await theirs())
    return base, meas


async def _backend(
    report: Report, scale: Scale, name: str, ours: Ours, theirs: Theirs, fill: Callable[[], int]
) -> dict[str, Any]:
    rows: list[list[Any]] = []
    data: dict[str, Any] = {}
    for side in (ours, theirs):  # warm-up, not counted: connections, prepared statements
        await side.appends(5)
        await side.tool_calls(3)
    cases = (
        ("durable append", "appends", "appends", scale.appends),
        ("durable tool call", "tool_calls", "tool_calls", scale.tool_calls),
        (DIAGNOSTIC, "two_appends", "tool_calls", scale.tool_calls),
    )
    for what, mine, theirs_method, count in cases:
        base, meas = await _pairs(
            scale.rounds,
            lambda m=mine, c=count: getattr(ours, m)(c),
            lambda m=theirs_method, c=count: getattr(theirs, m)(c),
        )
        ratios = pair_ratios(base, meas)
        rows.append([what, fmt_rate(median(base)), fmt_rate(median(meas)),
                     f"{median(ratios):.2f}x", spread(ratios)])  # fmt: skip
        data[what] = {"agent_saga": base, "sagacity": meas, "ratios": ratios}
        if what != DIAGNOSTIC:
            report.target(f"{what} vs agent-saga ({name})", median(ratios), 1.5, ">=")
    # The verify fixture: the same number of entries with the same payloads on both sides.
    filled = fill()
    await theirs.fill(scale.verify_entries, 100)
    outcomes: dict[str, list[tuple[float, int, bool]]] = {"ours": [], "theirs": []}

    async def ours_verify() -> float:
        outcomes["ours"].append(await ours.verify())
        return outcomes["ours"][-1][0]

    async def theirs_verify() -> float:
        outcomes["theirs"].append(await theirs.verify())
        return outcomes["theirs"][-1][0]

    base, meas = await _pairs(scale.rounds, ours_verify, theirs_verify)
    ratios = pair_ratios(base, meas)
    rows.append(["verify (read back + check)", fmt_rate(median(base)), fmt_rate(median(meas)),
                 f"{median(ratios):.2f}x", spread(ratios)])  # fmt: skip
    data["verify"] = {"agent_saga": base, "sagacity": meas, "ratios": ratios, "filled": filled}
    report.target(f"verify vs agent-saga ({name})", median(ratios), 5.0, ">=")
    report.table(
        f"{name}: per second, one writer, {scale.rounds} alternating rounds",
        ["operation", "agent-saga /s", "sagacity /s", "sagacity / agent-saga", "spread"],
        rows,
    )
    mine = outcomes["ours"]
    report.check(
        all(ok for _, _, ok in mine) and len({n for _, n, _ in mine}) == 1,
        f"{name}: every sagacity chain verifies ({mine[0][1]:,} entries, "
        f"appends and tool calls included)",
        f"{name}: sagacity chains broken or entries changed between rounds: {mine}",
    )
    report.check(
        all(ok for _, _, ok in outcomes["theirs"]),
        f"{name}: agent-saga's chain verifies ({outcomes['theirs'][0][1]:,} records)",
        f"{name}: agent-saga's chain does not verify",
    )
    return data


async def _run(sizes: Sizes, postgres_url: str) -> Report:
    report = Report("agent_saga", "Against agent-saga: append, tool call, verify", sizes)
    reason = missing()
    if reason is not None:
        report.notes.append(f"skipped: {reason}")
        report.extra["skipped"] = reason
        return report
    import asyncpg
    from agent_saga.wal import FileWAL, PostgresWAL

    from bench.journal_fill import copy_postgres, fill_sqlite, saga_rows

    logging.getLogger("agent_saga").setLevel(logging.ERROR)
    scale = Scale.of(sizes)
    per_saga = 100
    fixture = [f"verify-{s:06d}" for s in range(max(1, scale.verify_entries // per_saga))]
    tag = f"b{run_id()}"
    with tempfile.TemporaryDirectory(prefix="bench-agent-saga-") as tmp:
        db = Path(tmp) / "journal.db"
        ours = Ours(f"sqlite:///{db}")
        theirs = Theirs(lambda: FileWAL(Path(tmp) / "wal.jsonl", encryptor=None))
        await theirs.start()
        try:
            report.extra["files"] = await _backend(
                report, scale, "files (SQLite vs FileWAL)", ours, theirs,
                lambda: fill_sqlite(db, saga_rows(fixture, per_saga)),
            )  # fmt: skip
        finally:
            ours.close()
            await theirs.close()

    schema = f"bench_{tag}_agentsaga"
    store_url = f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={schema}"
    pool = None
    try:
        ours = Ours(store_url)
        pool = await asyncpg.create_pool(
            postgres_url, min_size=1, max_size=4, server_settings={"search_path": schema}
        )
        theirs = Theirs(lambda: PostgresWAL(pool=pool, table_name="saga_wal", encryptor=None))
        await theirs.start()
        try:
            report.extra["postgres"] = await _backend(
                report, scale, "PostgreSQL", ours, theirs,
                lambda: copy_postgres(postgres_url, schema, saga_rows(fixture, per_saga)),
            )  # fmt: skip
        finally:
            ours.close()
            await theirs.close()
    finally:
        if pool is not None:
            await pool.close()
        drop_schemas(postgres_url, schema)
    from importlib.metadata import version

    report.extra["agent_saga_version"] = version("agent-saga")
    report.notes.append(
        f"agent-saga {version('agent-saga')}, asyncpg {version('asyncpg')}; one writer; "
        "ratios are sagacity / agent-saga (above 1: sagacity faster)"
    )
    return report


def run(sizes: Sizes, *, postgres_url: str = DEFAULT_POSTGRES_URL) -> Report:
    return asyncio.run(_run(sizes, postgres_url))
