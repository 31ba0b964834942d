"""Benchmark 2: verification against raw hashlib and against plain reads.

1. In memory (CPU time): `verify_chain` over prebuilt entries against
   `hashlib.sha256(...).hexdigest()` over the same entries' stored bytes (`material`),
   for two entry sizes, twice: as verify runs on entries read from a store, whose columns
   the reader compared with the bytes (`columns_checked=True`: one SHA-256 and a 32-byte
   link per entry), and on entry objects made in memory (every field compared with the
   bytes).
2. Streamed from Postgres: `verify_all(store)` against the same reads done with plain
   psycopg (same queries, same batches), hashing each row's material with raw hashlib.
3. Export then verify, in a fresh subprocess each (so its peak RSS is its own):
   `export_jsonl` + `verify_jsonl` against a plain dump (server-side cursor, json.dumps
   per row) read back with json.loads + sha256 per line. Peak RSS from VmHWM.

The Postgres data (sagas of 100 entries) is sealed in Python with `seal` and bulk-loaded
with COPY, which is the fixture, not the thing measured. Every side of a section runs in
the same rotated rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.common import (
    DEFAULT_POSTGRES_URL,
    Report,
    Sizes,
    fmt_bytes,
    fmt_rate,
    fmt_ratios,
    median,
    pair_ratios,
    peak_rss_bytes,
    rss_bytes,
    run_id,
)

ENTRIES_PER_SAGA = 100
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def build_chain(saga_id: str, n: int, *, result_bytes: int = 0) -> Iterator[Any]:
    """A realistic chain: SAGA_OPENED, INTENT/EXECUTED pairs, SAGA_CLOSED."""
    from sagacity.journal._chain import GENESIS, seal
    from sagacity.journal._entry import EntryDraft
    from sagacity.journal._phases import Phase

    prev = GENESIS
    filler = "x" * result_bytes
    for seq in range(1, n + 1):
        if seq == 1:
            draft = EntryDraft.new(saga_id, Phase.SAGA_OPENED, input={"plan": ["reserve"] * 3})
        elif seq == n and n > 2:
            draft = EntryDraft.new(saga_id, Phase.SAGA_CLOSED, result={"status": "COMPLETED"})
        else:
            step = seq // 2
            args = {"sku": "widget", "qty": seq % 7 + 1, "order": f"ord-{seq:06d}"}
            if seq % 2 == 0:
                draft = EntryDraft.new(
                    saga_id, Phase.INTENT, step=step, tool="reserve_inventory", input=args
                )
            else:
                draft = EntryDraft.new(
                    saga_id,
                    Phase.EXECUTED,
                    step=step,
                    tool="reserve_inventory",
                    input=args,
                    result={"reservation": f"res-{seq:06d}", "qty": args["qty"], "rows": filler},
                )
        at = EPOCH + timedelta(microseconds=seq)
        entry = seal(draft, seq=seq, prev_hash=prev, recorded_at=at)
        prev = entry.hash
        yield entry


def stored_row(entry: Any, columns: tuple[str, ...]) -> tuple[Any, ...]:
    """An entry as the journal table stores it (recorded_at as its hashed text; the
    payloads in its material only, their columns empty)."""
    record = {name: getattr(entry, name) for name in columns if name != "recorded_at"}
    record["phase"] = entry.phase.value
    record["recorded_at"] = entry.recorded_at_text
    record["material"] = entry.material
    record |= {"input_json": "", "result_json": "", "error_json": ""}
    return tuple(record[name] for name in columns)


def _rotate(rounds: int, sides: dict[str, Callable[[], float]]) -> dict[str, list[float]]:
    """Run every side once per round, starting with a different side each round; each
    callable returns seconds."""
    names = list(sides)
    out: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            out[name].append(sides[name]())
    return out


def _timed(
    fn: Callable[[], object], clock: Callable[[], float] = time.perf_counter
) -> Callable[[], float]:
    """`fn` made to return how long it took on `clock` (wall time unless told)."""

    def run() -> float:
        start = clock()
        fn()
        return clock() - start

    return run


# ---- 1. in memory ---------------------------------------------------------------------------


def _in_memory(report: Report, sizes: Sizes) -> None:
    """verify_chain against raw hashlib over the entries' stored bytes, in the same
    rotated rounds. Timed by CPU time (time.process_time): the work
    is single-threaded and CPU-bound, and on a shared machine wall time also counts the
    other sessions' turns."""
    from sagacity.journal._chain import verify_chain

    rows = []
    for label, result_bytes, is_target in (
        ("tool-call entries", 0, True),
        ("entries with 4 KB results", 4_096, False),
    ):
        saga = f"verify-mem-{result_bytes}"
        chain = list(build_chain(saga, sizes.verify_entries, result_bytes=result_bytes))
        hashed = [e.material for e in chain]
        outcome: dict[str, Any] = {}

        def hashing(materials: list[bytes]) -> Callable[[], None]:
            def run(sha256: Any = hashlib.sha256) -> None:
                for m in materials:
                    sha256(m).hexdigest()

            return run

        def verifying(
            entries: list[Any],
            key: str,
            out: dict[str, Any] = outcome,
            saga: str = saga,
            **kw: bool,
        ) -> Callable[[], None]:
            def run() -> None:
                out[key] = verify_chain(saga, entries, **kw)

            return run

        sides = {
            "raw": hashing(hashed),
            "verify_chain, columns checked at read": verifying(
                chain, "checked", columns_checked=True
            ),
            "verify_chain, every field compared": verifying(chain, "full"),
        }
        times = _rotate(
            sizes.verify_rounds, {k: _timed(f, time.process_time) for k, f in sides.items()}
        )
        n = len(chain)
        rates = {k: [n / t for t in v] for k, v in times.items()}
        for key in ("checked", "full"):
            verified = outcome[key]
            report.check(
                verified.ok and verified.entries == n,
                f"in-memory {key} chain of {n:,} {label} verifies",
                f"in-memory {key} chain of {label} did not verify: {verified.describe()}",
            )
        ratios: dict[str, list[float]] = {}
        for side in sides:
            ratios[side] = pair_ratios(rates["raw"], rates[side])
            rows.append(
                [label, side, f"{sum(map(len, hashed)) / n:,.0f} B",
                 fmt_rate(median(rates[side])), fmt_ratios(ratios[side])]
            )  # fmt: skip
        report.extra.setdefault("memory", {})[label] = {
            "entries": n,
            "rates": rates,
            "ratios": ratios,
        }
        if is_target:
            report.target(
                "verify vs raw hashlib (tool-call entries, columns checked at read)",
                median(ratios["verify_chain, columns checked at read"]),
                0.5,
                ">=",
            )
    report.table(
        f"Verify in memory — {sizes.verify_entries:,} entries, {sizes.verify_rounds} rotated "
        "rounds, CPU time; ratio = entries/s over raw hashlib's over the same "
        "stored bytes (median, min-max)",
        ["entries", "side", "hashed bytes", "entries/s", "ratio (spread)"],
        rows,
    )


# ---- Postgres fixture -------------------------------------------------------------------------


def load_postgres(store_url: str, admin_url: str, schema: str, total: int) -> list[str]:
    """Open (migrate) the store at `store_url` and COPY `total` sealed entries into it,
    in sagas of ENTRIES_PER_SAGA. Returns the saga ids."""
    import psycopg

    from sagacity.stores import open_store
    from sagacity.stores._postgres import COLUMNS

    open_store(store_url).close()
    sagas = [f"verify-{i:06d}" for i in range(max(1, total // ENTRIES_PER_SAGA))]
    per_saga = max(1, total // len(sagas))
    columns = ", ".join(COLUMNS)
    with psycopg.connect(admin_url) as conn, conn.cursor() as cur:
        with cur.copy(f'COPY "{schema}".sagacity_journal ({columns}) FROM STDIN') as copy:
            for saga in sagas:
                for entry in build_chain(saga, per_saga):
                    copy.write_row(stored_row(entry, COLUMNS))
        conn.commit()
        conn.execute(f'ANALYZE "{schema}".sagacity_journal')
        conn.commit()
    return sagas


# ---- 2. streamed from Postgres -----------------------------------------------------------------


def _streamed(
    report: Report, sizes: Sizes, journal: tuple[str, str], admin_url: str, n: int
) -> None:
    """verify_all(store) against plain psycopg reads of the same rows in the same keyset
    batches, hashing each row's material, in rotated rounds."""
    import psycopg

    from sagacity.audit._export import verify_all
    from sagacity.stores import open_store
    from sagacity.stores._postgres import COLUMNS

    columns = ", ".join(COLUMNS)
    conn = psycopg.connect(admin_url, autocommit=True)
    store = open_store(journal[0])
    outcome: dict[str, Any] = {}
    table = f'"{journal[1]}".sagacity_journal'
    batch = getattr(store, "batch_size", 1000)

    def verify() -> None:
        outcome["verify"] = list(verify_all(store))

    def plain() -> None:
        sha256 = hashlib.sha256
        count = 0
        sagas = [
            r[0]
            for r in conn.execute(
                f"SELECT DISTINCT saga_id FROM {table} ORDER BY saga_id LIMIT %s", (1_000_000,)
            ).fetchall()
        ]
        for saga in sagas:
            last = 0
            while True:
                rows = conn.execute(
                    f"SELECT {columns} FROM {table} WHERE saga_id = %s AND seq > %s "
                    "ORDER BY seq LIMIT %s",
                    (saga, last, batch),
                    prepare=True,
                ).fetchall()
                for row in rows:
                    sha256(row[-1]).hexdigest()
                count += len(rows)
                if len(rows) < batch:
                    break
                last = rows[-1][1]
        outcome["plain"] = count

    sides: dict[str, Callable[[], None]] = {"plain": plain, "verify": verify}
    try:
        for run in sides.values():
            run()  # warm-up: prepared statements, caches
        times = _rotate(sizes.export_rounds + 1, {k: _timed(f) for k, f in sides.items()})
        cpu = _rotate(
            sizes.export_rounds + 1, {k: _timed(f, time.process_time) for k, f in sides.items()}
        )
    finally:
        conn.close()
        store.close()
    rates = {k: [n / t for t in v] for k, v in times.items()}
    reports = outcome["verify"]
    verified = sum(r.entries for r in reports)
    report.check(
        all(r.ok and r.closed for r in reports) and verified == n == outcome["plain"],
        f"streamed from Postgres: {len(reports):,} closed chains, {verified:,} entries, all verify",
        f"streamed verify from Postgres: {verified:,} entries of {n:,}; "
        f"{sum(not r.ok for r in reports)} chains broken",
    )
    ratios = pair_ratios(rates["plain"], rates["verify"])
    cpu_ratios = pair_ratios(cpu["verify"], cpu["plain"])
    plain_rate, verify_rate = fmt_rate(median(rates["plain"])), fmt_rate(median(rates["verify"]))
    rows = [
        ["plain psycopg reads + sha256 per row", plain_rate, "1.00", "1.00"],
        ["verify_all(store)", verify_rate, fmt_ratios(ratios), fmt_ratios(cpu_ratios)],
    ]
    report.target("streamed verify vs plain reads + hashing (Postgres)", median(ratios), 0.8, ">=")
    report.table(
        f"Streamed verify from PostgreSQL — {n:,} entries, sagas of {ENTRIES_PER_SAGA}; "
        "ratio = entries/s over plain reads + raw hashlib of the same rows (median, "
        "min-max), by wall time and by this process's CPU time",
        ["side", "entries/s", "wall ratio (spread)", "CPU ratio (spread)"],
        rows,
    )
    report.extra["streamed"] = {
        "entries": n, "rates": rates, "ratios": ratios, "cpu ratios": cpu_ratios,
    }  # fmt: skip


# ---- 3. export then verify, in a subprocess ------------------------------------------------------


def _child_run(kind: str, store_url: str, admin_url: str, schema: str, out: Path) -> dict[str, Any]:
    """Run one export+verify (or the plain equivalent) in a fresh interpreter."""
    cmd = [
        sys.executable, "-m", "bench.verify", kind,
        "--store-url", store_url, "--admin-url", admin_url, "--schema", schema, "--out", str(out),
    ]  # fmt: skip
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=900, cwd=Path(__file__).resolve().parents[1]
    )
    if done.returncode != 0:
        raise RuntimeError(f"{kind} child failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _export_verify(
    report: Report, sizes: Sizes, postgres_url: str, tag: str, workdir: Path
) -> None:
    """export_jsonl + verify_jsonl against a plain dump and reload, each in a fresh
    subprocess, in rotated rounds."""
    import psycopg

    rows = []
    admin = psycopg.connect(postgres_url, autocommit=True)
    sep = "&" if "?" in postgres_url else "?"
    try:
        for n in sizes.export_entries:
            schema = f"bench_{tag}_export_{n}"
            url = f"{postgres_url}{sep}schema={schema}"
            try:
                load_postgres(url, postgres_url, schema, n)
                out = workdir / f"export-{n}.jsonl"
                sides = ["plain", "sagacity"]
                runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
                for r in range(sizes.export_rounds):
                    for kind in sides[r % 2 :] + sides[: r % 2]:
                        runs[kind].append(_child_run(kind, url, postgres_url, schema, out))
                        out.unlink(missing_ok=True)
                rows += _export_rows(report, n, runs)
            finally:
                with contextlib.suppress(psycopg.Error):
                    admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        admin.close()
    report.table(
        "Export then verify (fresh subprocess per run; peak RSS = VmHWM; growth = peak - "
        "RSS after imports and connect); ratio = entries/s over the plain dump's of the "
        "same journal",
        ["entries", "side", "entries/s", "export s / verify s", "RSS at start",
         "peak RSS", "growth", "ratio (spread)"],
        rows,
    )  # fmt: skip


def _export_rows(report: Report, n: int, runs: dict[str, list[dict[str, Any]]]) -> list[list[str]]:
    sag = runs["sagacity"]
    ok = all(x["entries"] == n and x["verified"] == n and x["broken"] == 0 for x in sag)
    report.check(
        ok,
        f"export of {n:,} entries: every line written, read back and verified",
        f"export of {n:,}: {[(x['entries'], x['verified'], x['broken']) for x in sag]}",
    )
    rates = {k: [n / x["seconds"] for x in runs[k]] for k in ("plain", "sagacity")}
    ratios = pair_ratios(rates["plain"], rates["sagacity"])
    report.extra.setdefault("export", {})[f"{n}"] = {
        "runs": {k: runs[k] for k in ("plain", "sagacity")},
        "ratios": ratios,
    }
    report.target(f"export then verify vs plain dump ({n:,})", median(ratios), 0.7, ">=")
    rows = []
    for kind, label in (
        ("plain", "plain dump + json.loads + sha256"),
        ("sagacity", "export_jsonl + verify_jsonl"),
    ):
        xs = runs[kind]
        rows.append(
            [
                f"{n:,}", label,
                fmt_rate(median(rates[kind])),
                f"{median([x['export_s'] for x in xs]):.2f} / "
                f"{median([x['verify_s'] for x in xs]):.2f}",
                fmt_bytes(median([x['start_rss'] for x in xs])),
                fmt_bytes(median([x['peak_rss'] for x in xs])),
                fmt_bytes(median([x['peak_rss'] - x['start_rss'] for x in xs])),
                "1.00" if kind == "plain" else fmt_ratios(ratios),
            ]
        )  # fmt: skip
    return rows


def _child_measures(out: Path, start_rss: int, t0: float, t1: float, t2: float) -> dict[str, Any]:
    """What both children report beside their counts: export from t0 to t1, verify from
    t1 to t2, memory, and the size of the file between them."""
    return {
        "export_s": t1 - t0,
        "verify_s": t2 - t1,
        "seconds": t2 - t0,
        "start_rss": start_rss,
        "peak_rss": peak_rss_bytes(),
        "file_bytes": out.stat().st_size,
    }


def _sagacity_child(args: argparse.Namespace) -> dict[str, Any]:
    from sagacity.audit._export import export_jsonl, verify_jsonl
    from sagacity.stores import open_store

    store = open_store(args.store_url)
    store.head("warm-up")  # connect before the baseline RSS reading
    start_rss = rss_bytes()
    out = Path(args.out)
    t0 = time.perf_counter()
    with out.open("w", encoding="utf-8") as fh:
        entries = export_jsonl(store, fh)
    t1 = time.perf_counter()
    with out.open(encoding="utf-8") as fh:
        reports = verify_jsonl(fh)
    t2 = time.perf_counter()
    store.close()
    return {
        "entries": entries,
        "verified": sum(r.entries for r in reports if r.ok),
        "broken": sum(not r.ok for r in reports),
        "sagas": len(reports),
        **_child_measures(out, start_rss, t0, t1, t2),
    }


def _plain_child(args: argparse.Namespace) -> dict[str, Any]:
    import psycopg

    from sagacity.stores._postgres import COLUMNS

    conn = psycopg.connect(args.admin_url)
    conn.execute("SELECT 1")
    start_rss = rss_bytes()
    out = Path(args.out)
    t0 = time.perf_counter()
    entries = 0
    with out.open("w", encoding="utf-8") as fh, conn.cursor(name="dump") as cur:
        cur.itersize = 1000
        cur.execute(
            f'SELECT {", ".join(COLUMNS)} FROM "{args.schema}".sagacity_journal '
            "ORDER BY saga_id, seq"
        )
        for row in cur:
            record = dict(zip(COLUMNS, row, strict=True))
            record["material"] = record["material"].hex()  # its hashed bytes
            fh.write(json.dumps(record, ensure_ascii=False))
            fh.write("\n")
            entries += 1
    conn.commit()
    t1 = time.perf_counter()
    verified = 0
    sha256 = hashlib.sha256
    with out.open(encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            sha256(line.encode()).hexdigest()
            verified += bool(record)
    t2 = time.perf_counter()
    conn.close()
    return {
        "entries": entries,
        "verified": verified,
        "broken": 0,
        "sagas": 0,
        **_child_measures(out, start_rss, t0, t1, t2),
    }


# ---- the benchmark ------------------------------------------------------------------------------


def run(
    sizes: Sizes, *, postgres_url: str = DEFAULT_POSTGRES_URL, workdir: Path | None = None
) -> Report:
    import tempfile

    import psycopg

    report = Report(
        "verify", "Verify: in memory, streamed from Postgres, export then verify", sizes
    )
    tag = f"b{run_id()}"
    _in_memory(report, sizes)

    n = max(sizes.export_entries)
    sep = "&" if "?" in postgres_url else "?"
    schema = f"bench_{tag}_verify"
    journal = (f"{postgres_url}{sep}schema={schema}", schema)
    admin = psycopg.connect(postgres_url, autocommit=True)
    try:
        load_postgres(journal[0], postgres_url, schema, n)
        _streamed(report, sizes, journal, postgres_url, n)
    finally:
        with contextlib.suppress(psycopg.Error):
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        admin.close()

    with tempfile.TemporaryDirectory(prefix="sagacity-bench-", dir=workdir) as tmp:
        _export_verify(report, sizes, postgres_url, tag, Path(tmp))
    return report


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.verify", description="export child")
    parser.add_argument("kind", choices=["sagacity", "plain"])
    parser.add_argument("--store-url", required=True)
    parser.add_argument("--admin-url", required=True)
    parser.add_argument("--schema", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    result = _sagacity_child(args) if args.kind == "sagacity" else _plain_child(args)
    print(json.dumps(result), flush=True)
    os._exit(0)  # skip interpreter teardown: nothing to flush, and it is not measured


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
