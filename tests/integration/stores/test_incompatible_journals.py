"""A journal made by another version of sagacity — a pre-release one, a newer one — or by
another program is refused when the store opens, with a message that says what was found
and what to do, and nothing in it is changed: not opened as if it were ours, its entries
then read as tampered and its first write failing on a function it does not have.

The pre-release files are made here as those versions left them: a SQLite journal
without the header's marks, a PostgreSQL schema whose version table holds more versions
than 1.0 has and no digests.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from sagacity import JournalError, open_store
from sagacity._errors import IncompatibleJournalError
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores._migrations import VERSION_TABLE, load_migrations
from sagacity.stores._sqlite_schema import APPLICATION_ID, JOURNAL_SCHEMA, SCHEMA_VERSION
from tests.support.cli import cli_env, invoke_sync


def _marks(path: Path) -> tuple[int, int]:
    with sqlite3.connect(path) as conn:
        return (
            conn.execute("PRAGMA application_id").fetchone()[0],
            conn.execute("PRAGMA user_version").fetchone()[0],
        )


def _rows(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT * FROM journal").fetchall()


def test_a_new_sqlite_journal_is_marked_and_opens_again(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    with open_store(f"sqlite:///{path}") as store:
        store.append(EntryDraft.new("s", Phase.SAGA_OPENED))
    assert _marks(path) == (APPLICATION_ID, SCHEMA_VERSION)
    with open_store(f"sqlite:///{path}") as again:
        assert [e.seq for e in again.entries("s")] == [1]


def _pre_release(path: Path) -> None:
    """The tables as a pre-release version made them (it set no header marks), one row."""
    with sqlite3.connect(path) as conn:
        conn.executescript(JOURNAL_SCHEMA)
        conn.execute(
            "INSERT INTO journal VALUES ('old', 1, 0, 1, '', 'SAGA_OPENED', '{}', 'null', "
            "'null', 'null', '2026-12-01T00:00:00.000000Z', 'x', 'y', X'00')"
        )


def _script(text: str) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        with sqlite3.connect(path) as conn:
            conn.executescript(text)

    return make


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (_pre_release, "no mark (a pre-release sagacity journal"),
        (_script("PRAGMA user_version = 1;"), "application_id 0x0 and schema version 1"),
        (
            _script(f"PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = 2;"),
            "application_id 0x73676379 and schema version 2",
        ),
        (_script("CREATE TABLE orders (id INTEGER);"), "another program's database"),
    ],
    ids=["pre-release", "a version but no id", "newer", "another program"],
)
def test_a_sqlite_file_that_is_not_this_versions_journal_is_refused_untouched(
    tmp_path: Path, make: Callable[[Path], None], said: str
) -> None:
    path = tmp_path / "journal.db"
    make(path)
    before, content = _marks(path), path.read_bytes()
    with pytest.raises(IncompatibleJournalError) as refused:
        open_store(f"sqlite:///{path}")
    message = str(refused.value)
    assert str(path) in message and said in message, message
    assert "give this worker a new journal file" in message
    assert isinstance(refused.value, JournalError)  # what a caller of `sagacity` catches
    assert _marks(path) == before and path.read_bytes() == content  # nothing written


def test_the_cli_says_so_in_one_line_and_leaves_the_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _pre_release(path)
    rows = _rows(path)
    ran = invoke_sync(["verify", "--all", "--journal", f"sqlite:///{path}"], cli_env())
    assert ran.code != 0
    assert "is not a journal of this sagacity" in ran.output, ran.output
    assert "Traceback" not in ran.output and "tampered" not in ran.output
    assert _rows(path) == rows


@pytest.fixture
def schema(postgres_url: str) -> Iterator[tuple[str, str]]:
    name = f"sagacity_old_{uuid.uuid4().hex[:12]}"
    yield name, f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={name}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _versions(postgres_url: str, schema: str, edit: str) -> list[tuple[object, ...]]:
    """Runs `edit` on the schema's version table (`{t}`), then returns the table."""
    table = sql.Identifier(schema, VERSION_TABLE)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        if edit:
            conn.execute(sql.SQL(edit).format(t=table))
        return conn.execute(sql.SQL("SELECT * FROM {} ORDER BY 1").format(table)).fetchall()


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (
            "ALTER TABLE {t} DROP COLUMN sha256;"
            " INSERT INTO {t} (version, name) VALUES (2, 'recipe_v2'), (6, 'registry_marks')",
            "(no digest recorded: a pre-release journal)",
        ),
        ("ALTER TABLE {t} DROP COLUMN sha256", "(no digest recorded: a pre-release journal)"),
        ("UPDATE {t} SET sha256 = repeat('0', 64)", "applied from another text than this"),
        (
            "INSERT INTO {t} (version, name, sha256) VALUES (2, 'later', repeat('1', 64))",
            "version 2 ('later'), which this sagacity does not have",
        ),
    ],
    ids=["pre-release", "pre-release 0001", "edited 0001", "newer"],
)
def test_a_postgres_schema_this_version_did_not_make_is_refused_untouched(
    postgres_url: str, schema: tuple[str, str], edit: str, said: str
) -> None:
    name, url = schema
    with open_store(url) as store:
        store.append(EntryDraft.new("s", Phase.SAGA_OPENED))
    before = _versions(postgres_url, name, edit)
    assert len(before) >= len(load_migrations())  # the edit really happened
    with pytest.raises(IncompatibleJournalError) as refused:
        open_store(url)
    message = str(refused.value)
    assert f"the journal schema {name!r} records" in message and said in message, message
    assert "(?schema=NAME in the journal URL) or a new database" in message
    assert _versions(postgres_url, name, "") == before  # nothing migrated over it


def test_a_file_name_with_uri_characters_is_checked_as_itself(tmp_path: Path) -> None:
    """The read-only look at a file goes through a SQLite URI: a '?' or '#' in its name
    must not become a URI parameter (and open, or create, another file)."""
    path = tmp_path / "journal?mode=rwc#x.db"
    with open_store(f"sqlite:///{tmp_path}/journal%3Fmode=rwc%23x.db") as store:
        store.append(EntryDraft.new("s", Phase.SAGA_OPENED))
    assert _marks(path) == (APPLICATION_ID, SCHEMA_VERSION)
    with open_store(f"sqlite:///{tmp_path}/journal%3Fmode=rwc%23x.db", read_only=True) as again:
        assert [e.seq for e in again.entries("s")] == [1]
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm"))) == [
        path.name
    ]
