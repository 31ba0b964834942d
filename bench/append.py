"""Benchmark 1: journal append against a plain single-row INSERT and commit.

Writers are separate processes (spawned once, reused for every round), each with its own
store and its own baseline connection, like separate worker processes: contention on one
saga then happens where it would in production, in the database, not behind one
process's GIL or its per-saga stripe lock. In each round every participating writer
starts at the same instant and appends for a fixed time; rounds alternate between the
baseline and the chained append (see bench.common.interleave).

- Chained: `store.append(EntryDraft.new(...))` — canonical JSON, seal (SHA-256), and the
  store's lock/compare-and-append, on the store's own pool.
- Baseline: one INSERT of a row of the same columns and sizes into a plain table (identity
  primary key), autocommit (the INSERT commits itself: one round trip), on a pool with the
  same settings (autocommit, lock_timeout, READ COMMITTED). For SQLite: the same file, the
  same pragmas (WAL, synchronous=FULL), one autocommitted INSERT.

After the rounds every saga's rows are counted against what the writers were told was
written, and every chain is verified: lost entries must be 0.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing as mp
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from bench.common import (
    DEFAULT_POSTGRES_URL,
    Report,
    Sizes,
    cpu_seconds,
    fmt_ms,
    fmt_rate,
    fmt_ratios,
    interleave,
    median,
    pair_ratios,
    percentile,
    run_id,
)

CASES: list[tuple[str, int, int]] = [("1w1s", 1, 1), ("8w1s", 8, 1), ("8w8s", 8, 8)]
"""(key, writers, sagas). With fewer writers in Sizes (the smoke test), 8 becomes that."""


def _case(writers: int, sagas: int, sizes: Sizes) -> tuple[int, int, str]:
    """(writers, sagas, label) of a case at these sizes."""
    w = min(writers, sizes.append_writers)
    n = min(sagas, w)
    return w, n, f"{w} writer{'s' if w > 1 else ''}, {n} saga{'s' if n > 1 else ''}"


INPUT = {"sku": "widget", "qty": 2, "order": "ord-000123"}
RESULT = {"reservation": "res-000123", "sku": "widget", "qty": 2, "warehouse": "eu-west-1"}
TOOL = "reserve_inventory"
_PLAIN_COLUMNS = (
    "saga_id, seq, step, attempt, tool, phase, input_json, result_json, error_json, "
    "actor_json, recorded_at, prev_hash, hash"
)
PLAIN_PG = (
    f"INSERT INTO {{table}} ({_PLAIN_COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
)
PLAIN_SQLITE = f"INSERT INTO plain_journal ({_PLAIN_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
WRITE_RETRIES = 5


def plain_table_sql(qualified: str, *, sqlite: bool) -> str:
    ident = (
        "id INTEGER PRIMARY KEY AUTOINCREMENT"
        if sqlite
        else "id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
    )
    cols = ", ".join(f"{c} {t}" for c, t in _plain_types())
    return f"CREATE TABLE IF NOT EXISTS {qualified} ({ident}, {cols})"


def _plain_types() -> list[tuple[str, str]]:
    ints = {"seq": "bigint", "step": "integer", "attempt": "integer"}
    return [(c, ints.get(c, "text") + " NOT NULL") for c in _PLAIN_COLUMNS.split(", ")]


# ---- the writer process ----------------------------------------------------------------------


@dataclass(frozen=True)
class WriterConfig:
    index: int
    postgres_url: str | None
    """Store URL including ?schema=…; None skips Postgres."""
    schema: str
    sqlite_path: str | None
    app_name: str = "sagacity-bench"
    """application_name of the writer's connections, so the benchmark can find their
    backends and charge their CPU."""


def _session_setup(conn: Any) -> None:
    """The store's per-connection settings, applied to the baseline pool too."""
    conn.execute(
        "SELECT set_config('lock_timeout', '5s', false),"
        " set_config('default_transaction_isolation', 'read committed', false)"
    )


class _Writer:
    """Everything one writer process holds: stores, baseline connections, counters."""

    def __init__(self, cfg: WriterConfig) -> None:
        from sagacity.stores import open_store

        self.cfg = cfg
        self.stores: dict[str, Any] = {}
        self.plain: dict[str, Any] = {}
        self.counters: Counter[str] = Counter()
        if cfg.postgres_url:
            from psycopg_pool import ConnectionPool

            from sagacity.stores._postgres import split_schema

            store = open_store(cfg.postgres_url)
            self._instrument(store)
            self.stores["postgres"] = store
            conninfo, _ = split_schema(cfg.postgres_url)
            pool: ConnectionPool[Any] = ConnectionPool(
                conninfo,
                min_size=1,
                max_size=10,
                kwargs={
                    "autocommit": True,
                    "connect_timeout": 5,
                    "application_name": f"{cfg.app_name}-plain",
                },
                configure=_session_setup,
                open=False,
                name="bench-plain",
            )
            pool.open(wait=True, timeout=10)
            self.plain["postgres"] = pool
            self._pg_insert = PLAIN_PG.format(table=f'"{cfg.schema}".plain_journal').encode()
        if cfg.sqlite_path:
            import sqlite3

            self.stores["sqlite"] = open_store(f"sqlite:///{cfg.sqlite_path}")
            conn = sqlite3.connect(
                cfg.sqlite_path, timeout=30.0, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            self.plain["sqlite"] = conn

    def _instrument(self, store: Any) -> None:
        """Count the Postgres store's optimistic hits and locked fallbacks, if it has those
        paths (private names: when they change, the counts read n/a, nothing breaks)."""
        optimistic = getattr(store, "_append_optimistic", None)
        locked = getattr(store, "_append_locked", None)
        if optimistic is None or locked is None:
            return
        counters = self.counters

        def counted_optimistic(*args: Any, **kwargs: Any) -> Any:
            counters["optimistic_tries"] += 1
            entry = optimistic(*args, **kwargs)
            if entry is None:
                counters["optimistic_misses"] += 1
            return entry

        def counted_locked(*args: Any, **kwargs: Any) -> Any:
            counters["locked"] += 1
            return locked(*args, **kwargs)

        store._append_optimistic = counted_optimistic
        store._append_locked = counted_locked
        counters["instrumented"] = 1

    def run(
        self, backend: str, side: str, saga: str, start_at: float, seconds: float
    ) -> dict[str, Any]:
        from sagacity._errors import JournalWriteError, StoreUnavailableError
        from sagacity.journal._entry import EntryDraft, render_timestamp
        from sagacity.journal._phases import Phase

        for key in ("optimistic_tries", "optimistic_misses", "locked"):
            self.counters[key] = 0
        latencies: list[float] = []
        errors = 0
        written = 0
        step_base = self.cfg.index * 10_000_000
        op: Callable[[int], None]
        if side == "chained":
            store = self.stores[backend]

            def op(i: int) -> None:
                nonlocal errors
                draft = EntryDraft.new(
                    saga, Phase.EXECUTED, step=step_base + i, tool=TOOL, input=INPUT, result=RESULT
                )
                for attempt in range(WRITE_RETRIES):
                    try:
                        store.append(draft)
                        return
                    except (JournalWriteError, StoreUnavailableError):
                        errors += 1
                        if attempt == WRITE_RETRIES - 1:
                            raise
                        time.sleep(0.01)

        else:
            from sagacity.journal._canonical import canonical_text

            input_json, result_json = canonical_text(INPUT), canonical_text(RESULT)
            prev = "0" * 64

            if backend == "postgres":
                pool = self.plain["postgres"]
                query = self._pg_insert

                def op(i: int) -> None:
                    params = (
                        saga, i, step_base + i, 1, TOOL, "EXECUTED", input_json, result_json,
                        "null", "null", render_timestamp(datetime.now(UTC)), prev, prev,
                    )  # fmt: skip
                    with pool.connection() as conn:
                        conn.execute(query, params, prepare=True)

            else:
                conn = self.plain["sqlite"]

                def op(i: int) -> None:
                    params = (
                        saga, i, step_base + i, 1, TOOL, "EXECUTED", input_json, result_json,
                        "null", "null", render_timestamp(datetime.now(UTC)), prev, prev,
                    )  # fmt: skip
                    conn.execute(PLAIN_SQLITE, params)

        delay = start_at - time.time()
        if delay > 0:
            time.sleep(delay)
        cpu0 = time.process_time()
        began = time.perf_counter()
        deadline = began + seconds
        clock = time.perf_counter
        i = 0
        now = began
        while now < deadline:
            i += 1
            op(i)
            end = clock()
            latencies.append(end - now)
            written += 1
            now = end
        return {
            "written": written,
            "elapsed": now - began,
            "cpu": time.process_time() - cpu0,
            "latencies": latencies,
            "errors": errors,
            "saga": saga,
            "optimistic_tries": self.counters["optimistic_tries"],
            "optimistic_misses": self.counters["optimistic_misses"],
            "locked": self.counters["locked"],
            "instrumented": bool(self.counters["instrumented"]),
        }

    def close(self) -> None:
        for store in self.stores.values():
            store.close()
        for plain in self.plain.values():
            plain.close()


def _writer_main(cfg: WriterConfig, conn: Connection) -> None:
    """Entry point of a writer process: serve run commands until told to stop."""
    try:
        writer = _Writer(cfg)
    except BaseException as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", None))
    try:
        while True:
            cmd = conn.recv()
            if cmd[0] == "stop":
                break
            try:
                conn.send(("ok", writer.run(*cmd[1:])))
            except BaseException as exc:
                conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        writer.close()
        conn.close()


class WriterPool:
    """The writer processes, started once and reused by every round."""

    def __init__(self, configs: list[WriterConfig]) -> None:
        ctx = mp.get_context("spawn")
        self.procs: list[Any] = []
        self.conns: list[Connection] = []
        for cfg in configs:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_writer_main, args=(cfg, child), daemon=True)
            proc.start()
            child.close()
            self.procs.append(proc)
            self.conns.append(parent)
        for conn in self.conns:
            status, detail = conn.recv()
            if status != "ready":
                self.close()
                raise RuntimeError(f"append writer failed to start: {detail}")

    def run(
        self, backend: str, side: str, sagas: list[str], writers: int, seconds: float
    ) -> list[dict[str, Any]]:
        start_at = time.time() + 0.15
        for index in range(writers):
            saga = sagas[index % len(sagas)]
            self.conns[index].send(("run", backend, side, saga, start_at, seconds))
        results = []
        for index in range(writers):
            status, detail = self.conns[index].recv()
            if status != "ok":
                raise RuntimeError(f"append writer {index} failed: {detail}")
            results.append(detail)
        return results

    def close(self) -> None:
        for conn in self.conns:
            with contextlib.suppress(OSError, BrokenPipeError):
                conn.send(("stop",))
        for proc in self.procs:
            proc.join(timeout=15)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)


class LockSampler:
    """Samples ungranted locks in pg_locks while a round runs: the lock queue a writer
    waits in (advisory locks for the chained append; any lock for the baseline)."""

    def __init__(self, conninfo: str, interval: float = 0.02) -> None:
        self.conninfo = conninfo
        self.interval = interval
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> LockSampler:
        import psycopg

        conn = psycopg.connect(self.conninfo, autocommit=True)

        def loop() -> None:
            try:
                while not self._stop.wait(self.interval):
                    row = conn.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()
                    self.samples.append(int(row[0]) if row else 0)
            finally:
                conn.close()

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def mean(self) -> float:
        return sum(self.samples) / len(self.samples) if self.samples else 0.0


# ---- the benchmark ----------------------------------------------------------------------------


@dataclass
class _Round:
    results: list[dict[str, Any]]
    lock_waiters: float = 0.0
    db_cpu: float = 0.0


@dataclass
class _Side:
    rates: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    written: Counter[str] = field(default_factory=Counter)
    cpu: float = 0.0
    db_cpu: float = 0.0
    optimistic_misses: int = 0
    locked: int = 0
    instrumented: bool = False
    lock_waiters: list[float] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.written.values())


def _collect(rounds: list[_Round]) -> _Side:
    side = _Side()
    for rnd in rounds:
        elapsed = max(r["elapsed"] for r in rnd.results)
        side.rates.append(sum(r["written"] for r in rnd.results) / elapsed if elapsed else 0.0)
        side.lock_waiters.append(rnd.lock_waiters)
        side.db_cpu += rnd.db_cpu
        for r in rnd.results:
            side.latencies.extend(r["latencies"])
            side.errors += r["errors"]
            side.written[r["saga"]] += r["written"]
            side.cpu += r["cpu"]
            side.optimistic_misses += r["optimistic_misses"]
            side.locked += r["locked"]
            side.instrumented = side.instrumented or r["instrumented"]
    return side


def _backends(conninfo: str, app_prefix: str) -> list[int]:
    """PIDs of the server processes serving the writers' connections."""
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name LIKE %s",
            (app_prefix + "%",),
        ).fetchall()
    return [int(row[0]) for row in rows]


def _run_backend(
    pool: WriterPool, backend: str, sizes: Sizes, tag: str, postgres_url: str | None
) -> tuple[dict[str, _Side], dict[str, _Side]]:
    chained: dict[str, _Side] = {}
    plain: dict[str, _Side] = {}
    for key, case_writers, case_sagas in CASES:
        writers, sagas, _label = _case(case_writers, case_sagas, sizes)

        def one(
            side: str, r: int, key: str = key, writers: int = writers, n: int = sagas
        ) -> _Round:
            names = [f"{tag}-{backend}-{key}-r{r}-{side}-s{k}" for k in range(n)]
            if postgres_url is None:
                return _Round(pool.run(backend, side, names, writers, sizes.append_seconds))
            pids = _backends(postgres_url, tag)
            before = sum(cpu_seconds(pid) for pid in pids)
            with LockSampler(postgres_url) as sampler:
                results = pool.run(backend, side, names, writers, sizes.append_seconds)
            used = sum(cpu_seconds(pid) for pid in pids) - before
            return _Round(results, sampler.mean, used)

        # a short unrecorded warm-up of both sides (connections, prepared statements)
        pool.run(backend, "plain", [f"{tag}-{backend}-{key}-warm-plain"], writers, 0.2)
        pool.run(backend, "chained", [f"{tag}-{backend}-{key}-warm-chained"], writers, 0.2)
        base, meas = interleave(
            sizes.append_rounds,
            functools.partial(one, "plain"),
            functools.partial(one, "chained"),
        )
        plain[key] = _collect(base)
        chained[key] = _collect(meas)
    return chained, plain


def _us(total_seconds: float, count: int) -> str:
    return f"{total_seconds / count * 1e6:.0f}" if count and total_seconds else "-"


def _rows(
    report: Report,
    backend: str,
    chained: dict[str, _Side],
    plain: dict[str, _Side],
    sizes: Sizes,
) -> list[list[Any]]:
    rows = []
    for key, case_writers, case_sagas in CASES:
        _w, _n, label = _case(case_writers, case_sagas, sizes)
        c, p = chained[key], plain[key]
        ratios = pair_ratios(p.rates, c.rates)
        misses = f"{c.optimistic_misses / c.total:.2f}" if c.instrumented and c.total else "n/a"
        locked = f"{c.locked / c.total:.0%}" if c.instrumented and c.total else "n/a"
        for side, name, extra in (
            (p, "plain INSERT", ["-", "1.00"]),
            (c, "chained", [f"{misses} / {locked}", fmt_ratios(ratios)]),
        ):
            rows.append(
                [
                    label, name, fmt_rate(median(side.rates)),
                    f"{fmt_ms(percentile(side.latencies, 50) * 1e3)} / "
                    f"{fmt_ms(percentile(side.latencies, 99) * 1e3)}",
                    f"{_us(side.cpu, side.total)} / {_us(side.db_cpu, side.total)}",
                    f"{side.errors} / {median(side.lock_waiters):.2f}", *extra,
                ]
            )  # fmt: skip
        report.extra.setdefault(backend, {})[key] = {
            "chained_rates": c.rates,
            "plain_rates": p.rates,
            "ratios": ratios,
            "chained_p50_ms": percentile(c.latencies, 50) * 1e3,
            "chained_p99_ms": percentile(c.latencies, 99) * 1e3,
            "plain_p50_ms": percentile(p.latencies, 50) * 1e3,
            "plain_p99_ms": percentile(p.latencies, 99) * 1e3,
            "chained_client_cpu_us": c.cpu / c.total * 1e6 if c.total else None,
            "plain_client_cpu_us": p.cpu / p.total * 1e6 if p.total else None,
            "chained_db_cpu_us": c.db_cpu / c.total * 1e6 if c.total else None,
            "plain_db_cpu_us": p.db_cpu / p.total * 1e6 if p.total else None,
            "write_errors": c.errors,
            "optimistic_misses": c.optimistic_misses,
            "locked_appends": c.locked,
            "appends": c.total,
            "lock_waiters_mean": c.lock_waiters,
        }
    return rows


_COLUMNS = [
    "case", "side", "appends/s", "p50 / p99 ms", "CPU µs client / DB", "errors / lock waiters",
    "misses / locked path", "ratio (spread)",
]  # fmt: skip


def _check_chains(report: Report, store: Any, backend: str, sides: dict[str, _Side]) -> None:
    """Every saga holds exactly what the writers were told was written, and verifies."""
    from sagacity.audit._export import verify_store

    expected: Counter[str] = Counter()
    for side in sides.values():
        expected.update(side.written)
    lost = 0
    broken = []
    checked = 0
    for saga, count in expected.items():
        report_ = verify_store(store, saga)
        checked += 1
        if report_.entries != count:
            lost += count - report_.entries
        if not report_.ok:
            broken.append(report_.describe())
    report.check(
        lost == 0 and not broken,
        f"{backend}: {sum(expected.values()):,} chained appends in {checked} sagas all stored "
        "(0 lost) and every chain verifies",
        f"{backend}: {lost} entries lost, {len(broken)} chains broken: {broken[:3]}",
    )
    report.extra.setdefault(backend, {})["lost"] = lost


def _check_plain_pg(report: Report, conninfo: str, schema: str, sides: dict[str, _Side]) -> None:
    import psycopg

    expected = sum(side.total for side in sides.values())
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute(
            f"SELECT count(*) FROM \"{schema}\".plain_journal WHERE saga_id NOT LIKE '%%-warm-%%'"
        ).fetchone()
    found = int(row[0]) if row else 0
    report.check(
        found == expected,
        f"postgres baseline: {found:,} plain rows, as written",
        f"postgres baseline: {found:,} plain rows, expected {expected:,}",
    )


def run(sizes: Sizes, *, postgres_url: str = DEFAULT_POSTGRES_URL) -> Report:
    import psycopg

    from sagacity.stores import open_store

    report = Report("append", "Journal append vs plain INSERT", sizes)
    tag = f"b{run_id()}"
    schema = f"bench_{tag}_append"
    store_url = f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={schema}"
    tmpdir = tempfile.TemporaryDirectory(prefix="sagacity-bench-")
    sqlite_path = str(Path(tmpdir.name) / "journal.db")
    admin = psycopg.connect(postgres_url, autocommit=True)
    pool: WriterPool | None = None
    try:
        # Create both schemas' tables up front, so writers only ever append.
        parent_pg = open_store(store_url)
        parent_sqlite = open_store(f"sqlite:///{sqlite_path}")
        admin.execute(plain_table_sql(f'"{schema}".plain_journal', sqlite=False))
        import sqlite3

        with contextlib.closing(sqlite3.connect(sqlite_path)) as db:
            db.execute(plain_table_sql("plain_journal", sqlite=True))
            db.commit()
        writers = max(_case(w, n, sizes)[0] for _k, w, n in CASES)
        pool = WriterPool(
            [
                WriterConfig(
                    i,
                    f"{store_url}&application_name={tag}-w{i}",
                    schema,
                    sqlite_path,
                    f"{tag}-w{i}",
                )
                for i in range(writers)
            ]
        )
        pg_chained, pg_plain = _run_backend(pool, "postgres", sizes, tag, postgres_url)
        sq_chained, sq_plain = _run_backend(pool, "sqlite", sizes, tag, None)
        pool.close()
        pool = None

        report.table(
            f"PostgreSQL {schema} — {sizes.append_rounds} interleaved rounds of "
            f"{sizes.append_seconds:g}s per side; ratio = chained/plain appends/s "
            "(median of per-round ratios, min-max)",
            _COLUMNS,
            _rows(report, "postgres", pg_chained, pg_plain, sizes),
        )
        report.table(
            "SQLite (WAL, synchronous=FULL, one file, writers are processes); ratio as above",
            _COLUMNS,
            _rows(report, "sqlite", sq_chained, sq_plain, sizes),
        )
        _check_chains(report, parent_pg, "postgres", pg_chained)
        _check_chains(report, parent_sqlite, "sqlite", sq_chained)
        _check_plain_pg(report, postgres_url, schema, pg_plain)
        parent_pg.close()
        parent_sqlite.close()

        memory_rows, memory_store, memory_written = _memory(sizes, tag)
        report.table(
            "Memory store (threads in one process; no baseline: absolute numbers)",
            ["case", "appends/s", "p50 ms", "p99 ms"],
            memory_rows,
        )
        _check_chains(
            report,
            memory_store,
            "memory",
            {"all": _Side(written=memory_written)},
        )

        targets = report.extra["postgres"]
        report.target("append 1 writer (Postgres)", median(targets["1w1s"]["ratios"]), 0.6, ">=")
        report.target(
            "append 8 writers, 8 sagas (Postgres)", median(targets["8w8s"]["ratios"]), 0.5, ">="
        )
        report.target(
            "append 8 writers, 1 saga (Postgres)",
            median(targets["8w1s"]["ratios"]),
            0.4,
            ">=",
            note=(
                f"write errors {targets['8w1s']['write_errors']}, optimistic misses "
                f"{targets['8w1s']['optimistic_misses']} of {targets['8w1s']['appends']:,} appends"
            ),
        )
        one_writer = median(pg_chained["1w1s"].rates)
        report.notes.append(
            "one saga's appends are serialized, each with its own durable commit, so 8 writers "
            "on one saga cannot beat one writer's chained rate "
            f"({fmt_rate(one_writer)}/s here): the 8w1s ratio is bounded by "
            f"{one_writer / median(pg_plain['8w1s'].rates):.2f}x against 8 plain writers "
            "(which share group commits); 8w1s chained reached "
            f"{median(pg_chained['8w1s'].rates) / one_writer:.0%} of that bound"
        )
        report.extra["postgres"]["serial_bound_ratio"] = one_writer / median(pg_plain["8w1s"].rates)
    finally:
        if pool is not None:
            pool.close()
        with contextlib.suppress(psycopg.Error):
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        admin.close()
        tmpdir.cleanup()
    return report


def _memory(sizes: Sizes, tag: str) -> tuple[list[list[Any]], Any, Counter[str]]:
    """Threads appending to one MemoryJournalStore: the cost of sealing, no I/O."""
    from sagacity.journal._entry import EntryDraft
    from sagacity.journal._phases import Phase
    from sagacity.stores import MemoryJournalStore

    store = MemoryJournalStore()
    written: Counter[str] = Counter()
    rows = []
    lock = threading.Lock()
    for key, case_writers, case_sagas in CASES:
        writers, sagas, label = _case(case_writers, case_sagas, sizes)
        rates: list[float] = []
        latencies: list[float] = []
        for r in range(sizes.append_rounds):
            names = [f"{tag}-memory-{key}-r{r}-s{k}" for k in range(sagas)]
            barrier = threading.Barrier(writers)
            results: list[tuple[int, float]] = []

            def work(
                index: int,
                names: list[str] = names,
                barrier: Any = barrier,
                results: list[tuple[int, float]] = results,
                latencies: list[float] = latencies,
            ) -> None:
                saga = names[index % len(names)]
                local: list[float] = []
                barrier.wait()
                began = time.perf_counter()
                deadline = began + sizes.append_seconds / 2
                now = began
                i = 0
                while now < deadline:
                    i += 1
                    store.append(
                        EntryDraft.new(
                            saga,
                            Phase.EXECUTED,
                            step=index * 10_000_000 + i,
                            tool=TOOL,
                            input=INPUT,
                            result=RESULT,
                        )
                    )
                    end = time.perf_counter()
                    local.append(end - now)
                    now = end
                with lock:
                    latencies.extend(local)
                    written[saga] += len(local)
                    results.append((len(local), now - began))

            threads = [threading.Thread(target=work, args=(i,)) for i in range(writers)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = max(e for _n, e in results)
            rates.append(sum(n for n, _e in results) / elapsed)
        rows.append(
            [
                label,
                fmt_rate(median(rates)),
                fmt_ms(percentile(latencies, 50) * 1e3),
                fmt_ms(percentile(latencies, 99) * 1e3),
            ]
        )
    return rows, store, written
