"""The `sagacity` command line (also `python -m sagacity.worker`)."""

from __future__ import annotations

from sagacity.worker.cli._main import app, main

__all__ = ["app", "main"]
