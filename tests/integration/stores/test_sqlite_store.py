"""SQLite specifics: closing the store while another thread is mid-append is safe (the
thread gets a typed error, the process does not crash), and the file refuses edits."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from sagacity._errors import StoreUnavailableError
from sagacity.journal._chain import verify_chain
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import open_store


def test_close_while_another_thread_appends_is_safe(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/journal.db")
    started, errors, written = threading.Event(), [], []

    def writer() -> None:
        step = 0
        try:
            while True:
                step += 1
                written.append(store.append(EntryDraft.new("s", Phase.INTENT, step=step)))
                started.set()
        except StoreUnavailableError as exc:
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    assert started.wait(10)
    store.close()
    thread.join(10)

    assert not thread.is_alive()
    assert len(errors) == 1 and "closed" in str(errors[0])
    reopened = open_store(f"sqlite:///{tmp_path}/journal.db")
    entries = list(reopened.entries("s"))
    assert [e.seq for e in entries] == [e.seq for e in written]  # every acknowledged append
    assert verify_chain("s", entries).ok
    reopened.close()


@pytest.mark.parametrize(
    "statement",
    ["UPDATE journal SET tool='x'", "DELETE FROM journal", "DELETE FROM journal WHERE seq=1"],
)
def test_the_file_refuses_update_and_delete(tmp_path: Path, statement: str) -> None:
    store = open_store(f"sqlite:///{tmp_path}/journal.db")
    store.append(EntryDraft.new("s", Phase.SAGA_OPENED))
    store.close()
    raw = sqlite3.connect(tmp_path / "journal.db")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute(statement)
    assert raw.execute("SELECT count(*), min(tool) FROM journal").fetchone() == (1, "")
    raw.close()


def test_relative_and_absolute_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    relative = open_store("sqlite:///rel/journal.db")
    absolute = open_store(f"sqlite:////{tmp_path}/abs/journal.db".replace("/////", "////"))
    assert (tmp_path / "rel" / "journal.db").exists()
    assert (tmp_path / "abs" / "journal.db").exists()
    relative.close()
    absolute.close()


def test_verify_reports_an_unreadable_row_instead_of_crashing(tmp_path: Path) -> None:
    from sagacity.audit._export import verify_store
    from sagacity.journal._chain import BreakReason

    store = open_store(f"sqlite:///{tmp_path}/journal.db")
    for step in range(1, 4):
        store.append(EntryDraft.new("s", Phase.INTENT, step=step))
    raw = sqlite3.connect(tmp_path / "journal.db")
    raw.execute("DROP TRIGGER journal_no_update")
    raw.execute("UPDATE journal SET phase='PAID' WHERE seq=2")
    raw.commit()
    assert raw.execute("SELECT phase FROM journal WHERE seq=2").fetchone() == ("PAID",)
    raw.close()

    report = verify_store(store, "s")
    assert (report.ok, report.first_broken_seq, report.reason) == (False, 2, BreakReason.UNREADABLE)
    store.close()
