"""`python -m worker` — the sagacity command line (same as the `sagacity` script)."""

from worker.cli import main

main()
