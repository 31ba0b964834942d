"""Sagacity's benchmarks: what the safety layer costs, as ratios against what a user would
run without it, measured side by side in one run (`make bench`, `make bench-full`).

- `bench.append`: journal append vs a plain INSERT (Postgres, SQLite; memory absolute).
- `bench.verify`: verification vs raw hashlib, streamed from Postgres, export + verify.
- `bench.saga_overhead`: a saga of no-op tools vs a plain Temporal workflow.
- `bench.parked`: sagas waiting for approval on one worker, then all approved.
- `bench.verify_jobs`: `verify --all --jobs 2` against `--jobs 1` (issue 16).
- `bench.agent_saga`: append, tool call and verify beside agent-saga (issue 16; the bench
  extra).
- `bench.growth`: append and verify as the journal grows, saga throughput with 1, 2 and 4
  worker processes (issue 16); `python -m bench.plots` draws it.

Each module's `run(sizes, postgres_url=...)` returns a `bench.common.Report`;
`python -m bench` runs them all, prints the tables and writes bench/results/*.json.
"""

__all__ = ["BENCHMARKS"]

BENCHMARKS = ("append", "verify", "saga", "parked", "verify_jobs", "agent_saga", "growth")
