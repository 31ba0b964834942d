"""Canonical text survives a SQLite journal file: the on-disk half of the round trip whose
in-memory half is tests/pure/journal/test_entry.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings

from sagacity.stores import JournalStore, open_store
from tests.pure.journal.test_entry import FLOAT_EDGES, _round_trip, json_values


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JournalStore]:
    path: Path = tmp_path_factory.mktemp("sqlite") / "journal.db"
    store = open_store(f"sqlite:///{path}")
    yield store
    store.close()


@settings(max_examples=100, deadline=None)
@given(value=json_values)
@example(value=FLOAT_EDGES)
def test_canonical_text_survives_the_sqlite_store(sqlite_store: JournalStore, value: Any) -> None:
    _round_trip(sqlite_store, value)
