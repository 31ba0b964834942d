"""A SQLite journal whose rows hold what its schema does not allow: SQLite keeps a BLOB in
a TEXT column, and TEXT whose bytes are not UTF-8 (`CAST(x'ff' AS TEXT)`, `material ||
x'00'`). Real files, edited with the guard triggers dropped, the edit shown to be there,
then read through the store and the real CLI: every such row is reported unreadable at
its saga and seq, the listing of sagas ends and hides none, and the other sagas still get
their verdicts, with one process or several."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from sagacity._errors import UnreadableEntryError
from sagacity.audit._export import verify_all, verify_store
from sagacity.journal._chain import BreakReason
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores._sqlite import SqliteJournalStore
from tests.support.cli import Ran, invoke_sync


def _saga(store: SqliteJournalStore, saga_id: str) -> None:
    store.append(EntryDraft.new(saga_id, Phase.SAGA_OPENED, input={"goal": "pay"}))
    for step in (1, 2):
        store.append(
            EntryDraft.new(saga_id, Phase.EXECUTED, step=step, tool="pay", result={"n": step})
        )
    store.append(EntryDraft.new(saga_id, Phase.SAGA_CLOSED, result={"status": "COMPLETED"}))


def _journal(tmp_path: Path, names: list[str]) -> Path:
    db = tmp_path / "journal.db"
    with closing(SqliteJournalStore(db)) as store:
        for name in names:
            _saga(store, name)
    return db


def _edit(db: Path, *statements: str) -> None:
    """Statements run with the append-only triggers dropped, then put back."""
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        triggers = conn.execute("SELECT name, sql FROM sqlite_master WHERE type='trigger'")
        saved = triggers.fetchall()
        for name, _ in saved:
            conn.execute(f'DROP TRIGGER "{name}"')
        for statement in statements:
            conn.execute(statement)
        for _, definition in saved:
            conn.execute(definition)


def _verify_all_twice(db: Path) -> Ran:
    """`verify --all` of the journal in one process and in two: the same code and output
    both ways (the run in one process is returned)."""
    runs = [
        invoke_sync(["verify", "--all", "--journal", f"sqlite:///{db}", "--jobs", jobs], {})
        for jobs in ("1", "2")
    ]
    assert (runs[1].code, runs[1].stdout, runs[1].stderr) == (
        runs[0].code,
        runs[0].stdout,
        runs[0].stderr,
    )
    return runs[0]


def _types(db: Path, sql: str) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(db)) as conn:
        conn.text_factory = bytes
        return conn.execute(sql).fetchall()


def test_a_closing_row_retyped_blob_is_its_own_broken_saga_not_hidden(tmp_path: Path) -> None:
    db = _journal(tmp_path, ["alpha", "victim", "zulu"])
    _edit(
        db,
        "UPDATE journal SET saga_id=CAST(saga_id AS BLOB) "
        "WHERE saga_id='victim' AND phase='SAGA_CLOSED'",
    )
    victim_rows = (
        "SELECT typeof(saga_id), phase FROM journal WHERE CAST(saga_id AS BLOB)=x'76696374696d'"
    )
    assert _types(db, victim_rows + " ORDER BY seq")[2:] == [
        (b"text", b"EXECUTED"),
        (b"blob", b"SAGA_CLOSED"),
    ]
    odd = "\x00BLOB x'76696374696d'"  # the bytes of "victim"
    with closing(SqliteJournalStore(db)) as store:
        assert list(store.sagas()) == ["alpha", "victim", "zulu", odd]
        reports = {r.saga_id: r for r in verify_all(store)}
    assert reports["victim"].ok and not reports["victim"].closed  # its tail cut: open
    blob = reports[odd]
    assert not blob.ok and blob.first_broken_seq == 4
    assert blob.reason is BreakReason.UNREADABLE
    assert "column saga_id is stored as BLOB x'76696374696d' (b'victim')" in blob.detail
    ran = invoke_sync(["verify", "--all", "--journal", f"sqlite:///{db}"], {})
    assert ran.code == 1, ran.output
    assert "BROKEN \\u0000BLOB x'76696374696d': first broken seq 4 (unreadable)" in ran.output
    assert "b'victim'" in ran.output
    closed = invoke_sync(["verify", "--all", "--journal", f"sqlite:///{db}", "--json"], {})
    assert closed.code == 1 and '"victim"' in closed.stdout


def test_six_hundred_blob_saga_ids_are_listed_once_each_and_the_walk_ends(
    tmp_path: Path,
) -> None:
    """More BLOB ids than one page (500): paging on str(b'...') repeated the last page
    forever; paged on the stored value it ends, each listed once, each reported."""
    db = _journal(tmp_path, ["alpha", "zulu"])
    with closing(sqlite3.connect(db)) as conn:
        row = conn.execute("SELECT * FROM journal WHERE saga_id='alpha' AND seq=1").fetchone()
        marks = ",".join("?" * len(row))
        for i in range(600):
            conn.execute(
                f"INSERT INTO journal VALUES ({marks})", (f"junk{i:04d}".encode(), *row[1:])
            )
        conn.commit()
    assert _types(db, "SELECT count(*) FROM journal WHERE typeof(saga_id)='blob'") == [(600,)]
    with closing(SqliteJournalStore(db)) as store:
        listed = list(store.sagas())
        assert len(listed) == len(set(listed)) == 602
        assert listed[:2] == ["alpha", "zulu"] and listed[2] == "\x00BLOB x'6a756e6b30303030'"
        junk = verify_store(store, listed[-1])
    assert not junk.ok and junk.first_broken_seq == 1 and "BLOB" in junk.detail
    ran = _verify_all_twice(db)
    assert ran.code == 1, ran.output
    assert ran.output.count("(unreadable): seq 1: column saga_id is stored as BLOB") == 600


def test_paging_passes_saga_ids_that_are_not_utf8_or_spelled_like_a_listed_name(
    tmp_path: Path,
) -> None:
    """A page ending on text that is not UTF-8, or on text spelled like the name a BLOB
    is listed under, goes on from that very value: nothing after it skipped."""
    db = _journal(tmp_path, ["alpha"])
    with closing(sqlite3.connect(db)) as conn:
        row = conn.execute("SELECT * FROM journal WHERE saga_id='alpha' AND seq=1").fetchone()
        marks = ",".join("?" * (len(row) - 1))
        for i in range(520):  # saga ids b'\xffNNNN' as TEXT: not UTF-8
            conn.execute(
                f"INSERT INTO journal VALUES (CAST(? AS TEXT),{marks})",
                (b"\xff" + f"{i:04d}".encode(), *row[1:]),
            )
        conn.execute(f"INSERT INTO journal VALUES (?,{marks})", ("\x00BLOB x'61'", *row[1:]))
        conn.execute(f"INSERT INTO journal VALUES (?,{marks})", ("zz", *row[1:]))
        conn.commit()
    assert _types(db, "SELECT count(*) FROM journal WHERE saga_id >= CAST(x'ff' AS TEXT)") == [
        (520,)
    ]
    with closing(SqliteJournalStore(db)) as store:
        listed = list(store.sagas())
        assert len(listed) == len(set(listed)) == 523
        assert "zz" in listed and "alpha" in listed
        spelled = "\x00TEXT x'" + b"\x00BLOB x'61'".hex() + "'"
        assert spelled in listed and "\x00BLOB x'61'" not in listed
        assert "\x00TEXT x'ff30303030'" in listed
        for name in (spelled, "\x00TEXT x'ff30303030'"):
            report = verify_store(store, name)
            assert not report.ok and report.first_broken_seq == 1, report


A4_EDITS = {  # the edit of s031 seq 3, and what shows it happened
    "material-made-text": (
        "UPDATE journal SET material=material||x'00' WHERE saga_id='s031' AND seq=3",
        "typeof(material)='text' AND hex(material) LIKE '%00'",
    ),
    "tool-not-utf8": (
        "UPDATE journal SET tool=CAST(x'ff' AS TEXT) WHERE saga_id='s031' AND seq=3",
        "typeof(tool)='text' AND hex(tool)='FF'",
    ),
    "tool-blob": (
        "UPDATE journal SET tool=CAST(tool AS BLOB) WHERE saga_id='s031' AND seq=3",
        "typeof(tool)='blob' AND tool=x'706179'",
    ),
    "hash-blob": (
        "UPDATE journal SET hash=CAST(hash AS BLOB) WHERE saga_id='s031' AND seq=3",
        "typeof(hash)='blob'",
    ),
    "recorded-at-not-utf8": (
        "UPDATE journal SET recorded_at=CAST(x'c3' AS TEXT) WHERE saga_id='s031' AND seq=3",
        "typeof(recorded_at)='text' AND hex(recorded_at)='C3'",
    ),
}


@pytest.mark.parametrize("edit", sorted(A4_EDITS))
def test_a_column_of_the_wrong_type_is_unreadable_at_its_seq_and_the_rest_verified(
    tmp_path: Path, edit: str
) -> None:
    db = _journal(tmp_path, [f"s{i:03d}" for i in range(60)])
    statement, shows = A4_EDITS[edit]
    edited = f"SELECT count(*) FROM journal WHERE saga_id='s031' AND seq=3 AND {shows}"
    assert _types(db, edited) == [(0,)]
    _edit(db, statement)
    assert _types(db, edited) == [(1,)]
    with closing(SqliteJournalStore(db)) as store:
        reports = list(verify_all(store))
    assert len(reports) == 60
    broken = [r for r in reports if not r.ok]
    assert [(r.saga_id, r.first_broken_seq, r.reason) for r in broken] == [
        ("s031", 3, BreakReason.UNREADABLE)
    ]
    assert "saga 's031' seq 3: column" in broken[0].detail
    ran = _verify_all_twice(db)
    assert ran.code == 1, ran.output
    assert "BROKEN s031: first broken seq 3 (unreadable)" in ran.output
    assert "1 of 60 sagas broken; first: s031" in ran.output
    one = invoke_sync(["verify", "s031", "--journal", f"sqlite:///{db}"], {})
    assert one.code == 1 and "seq 3" in one.output, one.output


def test_a_junk_row_whose_saga_id_is_not_utf8_is_reported_and_the_rest_verified(
    tmp_path: Path,
) -> None:
    db = _journal(tmp_path, [f"s{i:03d}" for i in range(60)])
    _edit(
        db,
        "INSERT INTO journal SELECT CAST(x'ff' AS TEXT), seq, step, attempt, tool, phase, "
        "input_json, result_json, error_json, actor_json, recorded_at, prev_hash, hash, "
        "material FROM journal WHERE saga_id='s001' AND seq=1",
    )
    assert _types(db, "SELECT saga_id FROM journal WHERE saga_id > 's999'") == [(b"\xff",)]
    ran = _verify_all_twice(db)
    assert ran.code == 1, ran.output
    assert "BROKEN \\u0000TEXT x'ff': first broken seq 1 (unreadable)" in ran.output
    assert "1 of 61 sagas broken" in ran.output


def test_appending_after_a_row_that_is_not_utf8_is_a_typed_error_not_a_retry(
    tmp_path: Path,
) -> None:
    """Before, sqlite3 failed while fetching the head and the append said "retry" forever."""
    db = _journal(tmp_path, ["s"])
    _edit(db, "UPDATE journal SET tool=CAST(x'ff' AS TEXT) WHERE saga_id='s' AND seq=4")
    with (
        closing(SqliteJournalStore(db)) as store,
        pytest.raises(UnreadableEntryError, match="column tool is stored as TEXT that is"),
    ):
        store.append(EntryDraft.new("s", Phase.EXECUTED, step=3, tool="pay"))


_TEXT_COLUMNS = (
    "saga_id", "tool", "phase", "input_json", "result_json", "error_json", "actor_json",
    "recorded_at", "prev_hash", "hash",
)  # fmt: skip
_RETYPED = {
    **{f"{column}-blob": f"{column}=CAST({column} AS BLOB)" for column in _TEXT_COLUMNS},
    **{f"{column}-not-utf8": f"{column}=CAST(x'80' AS TEXT)" for column in _TEXT_COLUMNS},
    **{f"{column}-blob": f"{column}=CAST({column} AS BLOB)" for column in ("step", "attempt")},
    **{f"{column}-real": f"{column}={column}+0.5" for column in ("seq", "step", "attempt")},
    "seq-blob": "seq=CAST(seq AS BLOB)",
    "material-text": "material=CAST(material AS TEXT)",
}


@pytest.mark.parametrize("edit", sorted(_RETYPED))
def test_any_column_retyped_breaks_that_saga_at_that_row_both_ways_of_reading(
    tmp_path: Path, edit: str
) -> None:
    """Each column in turn holds a value of a storage type sagacity never writes: the
    saga breaks at that row (seq 2; a moved seq shows as the gap it leaves) on both
    paths verify reads rows by, and the sagas around it verify."""
    db = _journal(tmp_path, ["a", "m", "z"])
    ((rowid,),) = _types(db, "SELECT rowid FROM journal WHERE saga_id='m' AND seq=2")
    shown = ", ".join(f"typeof({c}), hex({c})" for c in ("material", "seq", *_TEXT_COLUMNS))
    stored = f"SELECT {shown}, typeof(step), typeof(attempt) FROM journal WHERE rowid={rowid}"
    before = _types(db, stored)
    _edit(db, f"UPDATE journal SET {_RETYPED[edit]} WHERE rowid={rowid}")
    assert _types(db, stored) != before  # the edit is in the file
    with closing(SqliteJournalStore(db)) as store:
        listed = list(store.sagas())
        rows = [verify_store(store, saga) for saga in listed]
        seen: list[str] = []
        entries = [verify_store(store, saga, seen.append) for saga in listed]
    assert rows == entries
    broken = [(r.saga_id, r.first_broken_seq) for r in rows if not r.ok]
    if edit.startswith("saga_id"):  # the row is a saga of its own; "m" has a gap there
        assert len(broken) == 2 and broken[0] == ("m", 2), rows
        assert broken[1][0].startswith("\x00") and broken[1][1] == 2
    else:
        assert broken == [("m", 2)], rows
    assert all(r.ok for r in rows if r.saga_id in ("a", "z"))
