"""A journal opened read-only (`open_store(url, read_only=True)`, what every reading
command uses) creates nothing (issue 36: `sagacity journal ID --journal postgres://…`
made a schema and six tables). Where there is no journal it says so (NoJournalError);
where there is one it reads it as a writer's opening would."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from sagacity._errors import IncompatibleJournalError, NoJournalError
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import _migrations as migrations_module
from sagacity.stores import open_store
from sagacity.stores._migrations import Migration, load_migrations
from tests.support.pg_fixtures import fresh_schema_url

OPENED = EntryDraft.new("s1", Phase.SAGA_OPENED)


@pytest.fixture
def schema_url(postgres_url: str) -> Iterator[str]:
    yield from fresh_schema_url(postgres_url, "sagacity_ro")


def pg_state(postgres_url: str, url: str) -> tuple[bool, list[str]]:
    """Whether the URL's schema exists, and its tables."""
    schema = url.rsplit("schema=", 1)[1]
    with psycopg.connect(postgres_url) as conn:
        exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
            "ORDER BY table_name",
            (schema,),
        )
        return exists.fetchone() is not None, [str(row[0]) for row in tables.fetchall()]


@pytest.mark.postgres
def test_postgres_read_only_on_no_journal_creates_nothing(
    postgres_url: str, schema_url: str
) -> None:
    with pytest.raises(NoJournalError, match="no sagacity journal in schema"):
        open_store(schema_url, read_only=True)
    assert pg_state(postgres_url, schema_url) == (False, [])


@pytest.mark.postgres
def test_postgres_read_only_reads_a_journal_a_writer_made(
    postgres_url: str, schema_url: str
) -> None:
    with open_store(schema_url) as writer:
        writer.append(OPENED)
    made = pg_state(postgres_url, schema_url)
    with open_store(schema_url, read_only=True) as reader:
        assert [e.phase for e in reader.entries("s1")] == [Phase.SAGA_OPENED]
    assert pg_state(postgres_url, schema_url) == made


@pytest.mark.postgres
def test_postgres_read_only_does_not_migrate_an_older_journal(
    postgres_url: str, schema_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_store(schema_url).close()
    made = pg_state(postgres_url, schema_url)
    later = Migration(len(load_migrations()) + 1, "later", "CREATE TABLE @schema@.later (x int);")
    monkeypatch.setattr(migrations_module, "load_migrations", lambda: [*load_migrations(), later])
    with pytest.raises(IncompatibleJournalError, match="start a worker of this version"):
        open_store(schema_url, read_only=True)
    assert pg_state(postgres_url, schema_url) == made  # nothing migrated


def test_sqlite_read_only_creates_no_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "journal.db"
    with pytest.raises(NoJournalError, match="does not exist"):
        open_store(f"sqlite:///{path}", read_only=True)
    assert not path.parent.exists()

    path.parent.mkdir()
    path.touch()
    with pytest.raises(NoJournalError, match="is empty"):
        open_store(f"sqlite:///{path}", read_only=True)
    assert path.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.joinpath("sub").iterdir()) == ["journal.db"]


def test_sqlite_read_only_reads_a_journal_a_writer_made(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/journal.db"
    with open_store(url) as writer:
        writer.append(OPENED)
    with open_store(url, read_only=True) as reader:
        assert [e.phase for e in reader.entries("s1")] == [Phase.SAGA_OPENED]
