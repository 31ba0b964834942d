"""The pure tier: values in memory only. No disk, no server, no subprocess, no socket.

Every test here is watched by `pure_guard` (tests/purity.py says what it refuses and how
it sees it); a test that needs a folder, a journal file, the dev server, PostgreSQL or a
CLI process belongs in tests/integration or tests/system.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.purity import Purity, impure_fixtures

PURE_HOME = Path("/nonexistent/sagacity-pure-tier-home")
"""SAGACITY_HOME here: a folder that does not exist, which the guard would refuse to create."""


@pytest.fixture(scope="session", autouse=True)
def session_data_home() -> Path:
    """Replaces tests/conftest.py's, which makes a folder: nothing here builds a worker."""
    return PURE_HOME


@pytest.fixture(autouse=True)
def private_data_home(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Replaces tests/conftest.py's, which makes a folder per test: sagacity's data home
    points nowhere, so nothing can read the real one and writing it fails."""
    monkeypatch.setenv("SAGACITY_HOME", str(PURE_HOME))
    monkeypatch.setenv("XDG_DATA_HOME", str(PURE_HOME / "xdg"))
    return PURE_HOME


@pytest.fixture(autouse=True)
def pure_guard(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """Fails the test that asks for a folder or a server, and the one that touches the
    disk, starts a process or opens a socket (yields what it found so far)."""
    refused = impure_fixtures(request)
    if refused:
        pytest.fail(f"{request.node.nodeid} is in the pure tier but " + "; ".join(refused))
    with Purity.get().watch() as found:
        yield found
    if found:
        pytest.fail(
            f"{request.node.nodeid} is in the pure tier but "
            + "; ".join(dict.fromkeys(found))
            + ": move it to tests/integration or tests/system",
            pytrace=False,
        )
