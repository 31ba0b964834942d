"""Sagacity's benchmarks: what the safety layer costs, as ratios against what a user would
run without it, measured side by side in one run (`make bench`, `make bench-full`).

- `bench.append`: journal append vs a plain INSERT (Postgres, SQLite; memory absolute).
- `bench.verify`: verification vs raw hashlib, streamed from Postgres, export + verify.
- `bench.saga_overhead`: a saga of no-op tools vs a plain Temporal workflow.
- `bench.parked`: sagas waiting for approval on one worker, then all approved.

Each module's `run(sizes, postgres_url=...)` returns a `bench.common.Report`;
`python -m bench` runs them all, prints the tables and writes bench/results/*.json.
"""

__all__ = ["BENCHMARKS"]

BENCHMARKS = ("append", "verify", "saga", "parked")
