"""Reading commands create no journal (issue 36): `sagacity journal ID --journal
postgres://…` on a database with no journal made a schema and six tables. Now every
reader says plainly there is no journal there, in one line, and the database (or the
directory, for SQLite) is as it was."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.stores.test_read_only_open import pg_state
from tests.integration.worker.cli.test_cli_errors import NO_TEMPORAL, assert_one_line_error
from tests.support.cli import invoke_sync
from tests.support.pg_fixtures import fresh_schema_url

READERS = [
    ["journal", "s1"],
    ["export", "s1"],
    ["export", "--all"],
    ["verify", "s1"],
    ["verify", "--all"],
]  # `log head`/`proof`/`consistency` open it as these do (open_journal), after their key


@pytest.fixture
def schema_url(postgres_url: str) -> Iterator[str]:
    yield from fresh_schema_url(postgres_url, "sagacity_cli_ro")


@pytest.mark.postgres
@pytest.mark.parametrize("command", READERS, ids=" ".join)
def test_a_read_of_a_database_with_no_journal_creates_nothing(
    postgres_url: str, schema_url: str, command: list[str]
) -> None:
    env = {"TEMPORAL_ADDRESS": NO_TEMPORAL}
    ran = invoke_sync([*command, "--journal", schema_url], env)
    assert_one_line_error(ran, "no sagacity journal in schema")
    assert pg_state(postgres_url, schema_url) == (False, [])


@pytest.mark.parametrize("command", READERS, ids=" ".join)
def test_a_read_of_an_empty_sqlite_file_creates_nothing(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "journal.db"
    path.touch()
    env = {"TEMPORAL_ADDRESS": NO_TEMPORAL}
    ran = invoke_sync([*command, "--journal", f"sqlite:///{path}"], env)
    assert_one_line_error(ran, f"no journal at {path}: the file is empty")
    assert [p.name for p in tmp_path.iterdir()] == ["journal.db"]
    assert path.stat().st_size == 0
