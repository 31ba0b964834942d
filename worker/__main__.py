"""`python -m sagacity.worker` — the sagacity command line (same as the `sagacity` script)."""

from sagacity.worker.cli._main import main

main()
