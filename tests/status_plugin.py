"""pytest plugin: write the session's exit status to SAGACITY_TEST_STATUS_FILE (see run.py)."""

from __future__ import annotations

import os

import pytest


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):
        return  # a pytest-xdist worker: the controller records the run's status
    path = os.environ.get("SAGACITY_TEST_STATUS_FILE")
    if path:
        with open(path, "w") as handle:
            handle.write(str(int(exitstatus)))
