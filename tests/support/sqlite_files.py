"""A test tool's own SQLite file (a ledger, a shop): one connection per use."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def transaction(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection to `path` in one transaction (committed when the block ends, rolled
    back if it raises), closed afterwards; it waits up to 30 s for another writer."""
    db = sqlite3.connect(path, timeout=30)
    try:
        with db:
            yield db
    finally:
        db.close()
