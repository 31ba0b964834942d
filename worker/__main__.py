"""`python -m sagacity.worker` — the sagacity command line (same as the `sagacity` script)."""

from sagacity.worker.cli import main

main()
