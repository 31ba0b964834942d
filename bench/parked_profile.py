"""Where a parked saga's memory goes: tracemalloc inside one worker process.

`python -m bench.parked_profile [--n 300] [--rounds 2] [--top 25]` starts a dev server and,
in this process, a saga worker (journal in memory, the no-op toolbox) and a plain worker
(bench.plain_worker) on their own task queues. Per round and side (alternating, ABBA): a
warm-up of a few workflows approved to completion, then tracemalloc is started, N
workflows are started and polled until parked, a snapshot is taken and compared with the
one taken before they started. The difference is grouped by file (and, with --traces, by
the innermost frames), per parked workflow, next to the process's RSS difference; then
every workflow is approved and its result awaited (the approve-all time, as in
bench.parked). Diagnostic only: the in-process client's own allocations are counted on
both sides alike, and nothing here is a target.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import os
import sys
import time
import tracemalloc
from collections import defaultdict
from typing import Any

from bench.common import rss_bytes
from bench.parked import WARM_UP, _gather_bounded, _park_all, _Side


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]  # fmt: skip


def _malloc_in_use() -> int:
    """Bytes in use in glibc malloc (the Rust core, protobuf, and with PYTHONMALLOC=malloc
    every Python object too)."""
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return int(info.uordblks + info.hblkhd)


def _group(stats: list[tracemalloc.StatisticDiff], depth: int) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for s in stats:
        frames = s.traceback[:depth] if depth else s.traceback[:1]
        key = " <- ".join(
            f"{_short(f.filename)}:{f.lineno}" if depth else _short(f.filename) for f in frames
        )
        out[key] += s.size_diff
    return out


def _short(path: str) -> str:
    for marker in ("site-packages/", "wt-parked/", "/lib/python3.11/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


async def _round(side: _Side, n: int, prefix: str, top: int, depth: int) -> dict[str, Any]:
    warm = await _gather_bounded([side.start(f"{prefix}-warm-{i}", i) for i in range(WARM_UP)])
    pend = await _park_all(side, warm)
    await _gather_bounded([side.approve(warm[i], p) for i, p in pend.items()])
    await _gather_bounded([h.result() for h in warm])
    await asyncio.sleep(0.5)
    gc.collect()
    tracemalloc.start(max(depth, 1))
    before = tracemalloc.take_snapshot()
    rss0 = rss_bytes(os.getpid())
    malloc0 = _malloc_in_use()
    handles = await _gather_bounded([side.start(f"{prefix}-{i}", i) for i in range(n)])
    pending = await _park_all(side, handles)
    await asyncio.sleep(1.0)
    gc.collect()
    after = tracemalloc.take_snapshot()
    rss1 = rss_bytes(os.getpid())
    malloc1 = _malloc_in_use()
    traced = sum(s.size_diff for s in after.compare_to(before, "filename"))
    groups = _group(after.compare_to(before, "traceback"), depth)
    tracemalloc.stop()
    t0 = time.perf_counter()
    await _gather_bounded([side.approve(handles[i], p) for i, p in pending.items()])
    decided = time.perf_counter() - t0
    results = await _gather_bounded([h.result() for h in handles], limit=len(handles))
    elapsed = time.perf_counter() - t0
    failed = [r for r in results if isinstance(r, BaseException) or not side.completed(r)]
    print(
        f"\n== {side.kind}: {n} parked, traced {traced / n / 1024:.1f} KiB/wf, "
        f"RSS {(rss1 - rss0) / n / 1024:.1f} KiB/wf, malloc {(malloc1 - malloc0) / n / 1024:.1f} "
        f"KiB/wf; decisions {n / decided:.1f}/s, approve-all {elapsed:.2f} s "
        f"({n / elapsed:.1f}/s), {len(failed)} not completed",
        flush=True,
    )
    for key, size in sorted(groups.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {size / n / 1024:8.2f} KiB  {key}")
    return {
        "traced": traced / n,
        "rss": (rss1 - rss0) / n,
        "malloc": (malloc1 - malloc0) / n,
        "approve_s": elapsed,
        "decide_s": decided,
    }


async def _main(n: int, rounds: int, top: int, depth: int) -> None:
    from bench.noop import toolbox
    from bench.plain_worker import plain_worker
    from sagacity.stores import open_store
    from sagacity.worker._app import new_worker
    from sagacity.worker._devserver import start_dev_server

    env = await start_dev_server()
    store = open_store("memory://")
    tag = f"prof{os.getpid()}"
    try:
        saga = new_worker(env.client, store=store, toolbox=toolbox(), task_queue=f"{tag}-saga")
        plain = plain_worker(env.client, f"{tag}-plain")
        async with saga, plain:
            out: dict[str, list[dict[str, Any]]] = {"plain": [], "saga": []}
            for r in range(rounds):
                order = ["plain", "saga"] if r % 2 == 0 else ["saga", "plain"]
                for kind in order:
                    side = _Side(kind, env.client, f"{tag}-{kind}")
                    out[kind].append(await _round(side, n, f"{tag}-{kind}-r{r}", top, depth))
            for key in ("traced", "rss", "malloc"):
                s = [x[key] for x in out["saga"]]
                p = [x[key] for x in out["plain"]]
                print(
                    f"{key}: saga {[round(x / 1024, 1) for x in s]} KiB, plain "
                    f"{[round(x / 1024, 1) for x in p]} KiB, ratio per round "
                    f"{[round(a / b, 2) for a, b in zip(s, p, strict=True)]}"
                )
            ratios = [
                p["approve_s"] / s["approve_s"]
                for s, p in zip(out["saga"], out["plain"], strict=True)
            ]
            print(f"approve rate saga/plain per round: {[round(x, 2) for x in ratios]}")
            decide = [
                p["decide_s"] / s["decide_s"]
                for s, p in zip(out["saga"], out["plain"], strict=True)
            ]
            print(f"decision rate saga/plain per round: {[round(x, 2) for x in decide]}")
    finally:
        store.close()
        await env.shutdown()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.parked_profile")
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--depth", type=int, default=0, help="frames per group (0: by file)")
    args = parser.parse_args(argv)
    asyncio.run(_main(args.n, args.rounds, args.top, args.depth))
    sys.stdout.flush()
    os._exit(0)  # skip the SDK's interpreter-exit crash (sdk-python issue 300)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
