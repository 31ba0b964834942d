"""Debian's Chromium for the browser tests (the Temporal UI, the inbox): where it is, the
flags it runs with, and one fixture that skips on a laptop without it and fails under CI.
Nothing is downloaded: Playwright drives the installed binary through executable_path."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

__all__ = ["CHROMIUM", "CHROMIUM_FLAGS", "chromium"]

CHROMIUM = os.environ.get("SAGACITY_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    # --headless and --user-data-dir are passed by Playwright (headless=True and the
    # persistent context's fresh profile directory).
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _browser_problem() -> str | None:
    if not Path(CHROMIUM).exists():
        return (
            f"no Chromium at {CHROMIUM}; install Debian's chromium with .ci/install-browser "
            "or point SAGACITY_TEST_CHROMIUM at a Chromium/Chrome binary"
        )
    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is not installed; pip install -e '.[dev]'"
    return None


@pytest.fixture(scope="module")
def chromium() -> str:
    """Path of the Chromium binary; skips on a laptop without one, fails under CI."""
    problem = _browser_problem()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail("CI is set, so a missing browser is a failure: " + problem)
        pytest.skip(problem)
    return CHROMIUM
