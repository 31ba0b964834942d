"""`sagacity journal`, `verify`, `export` and `verify-file` over a SQLite journal file, the
way an auditor would run them: against the file by URL, with no Temporal anywhere."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import JournalStore, open_store
from tests.support.cli import Ran, cli_env, invoke_sync

Journal = tuple[JournalStore, dict[str, str]]


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    url = f"sqlite:///{tmp_path}/journal.db"
    store = open_store(url)
    for saga in ("saga-a", "saga-b", "saga-c"):
        store.append(EntryDraft.new(saga, Phase.SAGA_OPENED, input={"plan": ["charge_card"]}))
        store.append(EntryDraft.new(saga, Phase.INTENT, step=1, tool="charge_card", input={"a": 1}))
        store.append(
            EntryDraft.new(
                saga, Phase.EXECUTED, step=1, tool="charge_card", result={"charge": "ch_1"}
            )
        )
        store.append(EntryDraft.new(saga, Phase.SAGA_CLOSED, result={"status": "COMPLETED"}))
    yield store, {"SAGACITY_JOURNAL_URL": url}
    store.close()


def run(env: dict[str, str], *args: str) -> Ran:
    return invoke_sync(list(args), env)


def tamper(db: Path, saga_id: str, seq: int, old: bytes, new: bytes) -> tuple[bytes, bytes]:
    """Edit a row the way an insider with database access would: drop the append-only
    trigger, then rewrite the entry's stored hashed bytes (an entry keeps the result only
    there). Returns the stored bytes before and after."""
    assert len(old) == len(new)  # the edit keeps every length prefix: a quiet change
    con = sqlite3.connect(db)
    try:
        query = "SELECT material FROM journal WHERE saga_id=? AND seq=?"
        (before,) = con.execute(query, (saga_id, seq)).fetchone()
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            con.execute(
                "UPDATE journal SET material=? WHERE saga_id=? AND seq=?", (b"x", saga_id, seq)
            )
        con.execute("DROP TRIGGER journal_no_update")
        con.execute(
            "UPDATE journal SET material=? WHERE saga_id=? AND seq=?",
            (bytes(before).replace(old, new), saga_id, seq),
        )
        con.commit()
        (after,) = con.execute(query, (saga_id, seq)).fetchone()
    finally:
        con.close()
    return bytes(before), bytes(after)


def test_journal_shows_the_entries_in_seq_order(journal: Journal) -> None:
    store, env = journal
    ran = run(env, "journal", "saga-b")
    assert ran.code == 0, ran.output
    rows = [line for line in ran.stdout.splitlines() if line.startswith("│")]
    assert [r.split("│")[2].strip() for r in rows] == [
        "SAGA_OPENED",
        "INTENT",
        "EXECUTED",
        "SAGA_CLOSED",
    ]
    head = store.head("saga-b")
    assert head is not None and head.hash[:12] in ran.stdout


def test_journal_json_has_real_values(journal: Journal) -> None:
    """`journal --json`: payloads and actors as JSON values (null, objects), which jq and
    json read without decoding JSON text inside JSON; the hashes as stored."""
    store, env = journal
    ran = run(env, "journal", "saga-b", "--json")
    assert ran.code == 0, ran.output
    entries = json.loads(ran.stdout)
    stored = list(store.entries("saga-b"))
    assert [e["phase"] for e in entries] == [e.phase.value for e in stored]
    assert [e["hash"] for e in entries] == [e.hash for e in stored]
    assert all(e["actor"] is None for e in entries)  # null, not the text "null"
    executed = next(e for e in entries if e["phase"] == "EXECUTED")
    assert executed["result"] == {"charge": "ch_1"} and executed["input"] is None
    assert entries[0]["input"] == {"plan": ["charge_card"]}


def test_journal_prints_markup_in_values_as_text(journal: Journal) -> None:
    store, env = journal
    store.append(EntryDraft.new("saga-[/x]", Phase.SAGA_OPENED, actor="[bold]eve[/]"))
    ran = run(env, "journal", "saga-[/x]")
    assert ran.code == 0, ran.output
    assert "[bold]eve[/]" in ran.stdout and "saga-[/x]" in ran.stdout
    verified = run(env, "verify", "saga-[/x]")
    assert verified.code == 0 and "saga-[/x]" in verified.stdout


def test_verify_one_and_all(journal: Journal) -> None:
    _, env = journal
    one = run(env, "verify", "saga-a")
    assert one.code == 0, one.output
    assert "verified saga-a: 4 entries, chain intact (closed)" in one.stdout

    every = run(env, "verify", "--all")
    assert every.code == 0, every.output
    assert "verified 3 sagas, 12 entries: 3 closed, 0 open" in every.stdout
    assert "open:" not in every.stdout

    verbose = run(env, "verify", "--all", "-v")
    assert all(f"verified {s}" in verbose.stdout for s in ("saga-a", "saga-b", "saga-c"))


def test_a_tampered_row_breaks_verify_naming_the_seq(journal: Journal, tmp_path: Path) -> None:
    _, env = journal
    before, after = tamper(tmp_path / "journal.db", "saga-b", 3, b'"ch_1"', b'"ch_9"')
    assert b'{"charge":"ch_1"}' in before and b'{"charge":"ch_9"}' in after  # it changed

    one = run(env, "verify", "saga-b")
    assert one.code == 1
    assert "BROKEN saga-b: first broken seq 3 (hash_mismatch)" in one.stdout
    assert one.stderr.strip().splitlines() == [
        "error: journal of saga saga-b is broken at seq 3 (hash_mismatch)"
    ]
    assert run(env, "verify", "saga-a").code == 0  # the others still verify

    every = run(env, "verify", "--all")
    assert every.code == 1
    assert "BROKEN saga-b: first broken seq 3" in every.stdout
    assert "saga-a" not in every.stdout  # only broken sagas are listed
    assert "1 of 3 sagas broken; first: saga-b at seq 3 (hash_mismatch)" in every.stderr

    out = tmp_path / "evidence.jsonl"
    assert run(env, "export", "--all", "--out", str(out)).code == 0
    offline = run(env, "verify-file", str(out))
    assert offline.code == 1
    assert "first broken seq 3 (hash_mismatch)" in offline.stdout
    assert "1 of 3 sagas broken; first: saga-b at seq 3" in offline.stderr


def cut_tail(db: Path, copy: Path, saga_id: str, keep: int) -> int:
    """Copy the journal and, in the copy only, delete the saga's entries after seq
    `keep` (SAGA_CLOSED among them), as an insider would: the append-only triggers are
    dropped first. Returns how many rows went."""
    source = sqlite3.connect(db)
    con = sqlite3.connect(copy)
    try:
        source.backup(con)  # a consistent copy, the write-ahead log included
        source.close()
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            con.execute("DELETE FROM journal WHERE saga_id=? AND seq>?", (saga_id, keep))
        con.execute("DROP TRIGGER journal_no_delete")
        gone = con.execute("DELETE FROM journal WHERE saga_id=? AND seq>?", (saga_id, keep))
        con.commit()
        return gone.rowcount
    finally:
        con.close()


def test_a_closed_saga_that_lost_its_tail_is_reported_open(
    journal: Journal, tmp_path: Path
) -> None:
    store, env = journal
    copy = tmp_path / "cut.db"
    assert cut_tail(tmp_path / "journal.db", copy, "saga-b", keep=2) == 2  # EXECUTED, CLOSED
    cut = {"SAGACITY_JOURNAL_URL": f"sqlite:///{copy}"}
    with open_store(cut["SAGACITY_JOURNAL_URL"]) as cut_store:
        assert [e.phase for e in cut_store.entries("saga-b")] == [Phase.SAGA_OPENED, Phase.INTENT]

    every = run(cut, "verify", "--all")
    assert every.code == 0, every.output  # nothing is broken: the chain is only shorter
    assert "every chain intact" not in every.output  # what the old summary claimed
    assert f"verified 3 sagas, 10 entries: 2 closed, 1 open ({copy})" in every.stdout
    assert [line for line in every.stdout.splitlines() if line.startswith("open:")] == [
        f"open: saga-b (2 entries, head {cut_store_head(copy, 'saga-b')}, no SAGA_CLOSED)"
    ]
    assert "no evidence tells those apart" in every.stderr

    strict = run(cut, "verify", "--all", "--require-closed")
    assert strict.code == 1
    assert strict.stderr.strip().splitlines()[-1] == (
        "error: 1 of 3 chains open (no SAGA_CLOSED): saga-b; --require-closed expects every "
        "saga closed"
    )
    one = run(cut, "verify", "saga-b")
    assert one.code == 0 and "chain unbroken but OPEN" in one.stdout
    assert "chain intact" not in one.stdout
    one_strict = run(cut, "verify", "saga-b", "--require-closed")
    assert one_strict.code == 1 and "is open (no SAGA_CLOSED)" in one_strict.stderr

    # The original journal is untouched and still passes the strict check.
    assert run(env, "verify", "--all", "--require-closed").code == 0
    assert len(list(store.entries("saga-b"))) == 4


def cut_store_head(db: Path, saga_id: str) -> str:
    with open_store(f"sqlite:///{db}") as store:
        head = store.head(saga_id)
    assert head is not None
    return head.hash[:16]


def test_verify_file_reports_an_export_whose_tail_was_cut(journal: Journal, tmp_path: Path) -> None:
    _, env = journal
    out = tmp_path / "all.jsonl"
    assert run(env, "export", "--all", "--out", str(out)).code == 0
    lines = out.read_text().splitlines()
    kept = [line for line in lines if json.loads(line)["saga_id"] != "saga-c"]
    saga_c = [line for line in lines if json.loads(line)["saga_id"] == "saga-c"]
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(kept + saga_c[:-1]) + "\n")  # saga-c's SAGA_CLOSED dropped

    offline = run({}, "verify-file", str(cut))
    assert offline.code == 0, offline.output
    assert "every chain intact" not in offline.output
    assert f"verified 3 sagas, 11 entries: 2 closed, 1 open ({cut})" in offline.stdout
    assert "open: saga-c (3 entries" in offline.stdout
    assert "saga-c: 3 entries, chain unbroken but OPEN" in offline.stdout

    strict = run({}, "verify-file", str(cut), "--require-closed")
    assert strict.code == 1
    assert f"error: {cut}: 1 of 3 chains open (no SAGA_CLOSED): saga-c" in strict.stderr
    assert run({}, "verify-file", str(out), "--require-closed").code == 0


def test_export_one_saga_to_stdout_and_all_to_a_file(journal: Journal, tmp_path: Path) -> None:
    _, env = journal
    one = run(env, "export", "saga-c")
    assert one.code == 0, one.output
    lines = one.stdout.splitlines()
    assert [json.loads(line)["seq"] for line in lines] == [1, 2, 3, 4]
    assert {json.loads(line)["saga_id"] for line in lines} == {"saga-c"}
    assert "exported 4 entries of 1 saga(s) to stdout" in one.stderr

    out = tmp_path / "all.jsonl"
    every = run(env, "export", "--all", "-o", str(out))
    assert every.code == 0, every.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["saga_id"], r["seq"]) for r in records] == [
        (s, n) for s in ("saga-a", "saga-b", "saga-c") for n in (1, 2, 3, 4)
    ]
    assert not (tmp_path / "all.jsonl.partial").exists()
    assert "exported 12 entries of 3 saga(s)" in every.stderr

    checked = run(env, "verify-file", str(out))
    assert checked.code == 0, checked.output
    assert checked.stdout.count("verified saga-") == 3
    assert f"verified 3 sagas, 12 entries: 3 closed, 0 open ({out})" in checked.stdout


def test_export_writes_payloads_as_values_in_the_one_format(
    journal: Journal, tmp_path: Path
) -> None:
    _, env = journal
    out = tmp_path / "a.jsonl"
    assert run(env, "export", "saga-a", "-o", str(out)).code == 0
    values = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["format"] for r in values] == [1, 1, 1, 1]
    assert values[1]["input"] == {"a": 1} and values[2]["result"] == {"charge": "ch_1"}
    assert values[0]["actor"] is None
    assert run({}, "verify-file", str(out)).code == 0
    gone = run(env, "export", "saga-a", "--format", "1")
    assert gone.code == 2 and "--format" in gone.output  # one format: no option to pick one


def test_verify_file_reports_a_bad_line_in_one_line(tmp_path: Path, journal: Journal) -> None:
    _, env = journal
    out = tmp_path / "one.jsonl"
    assert run(env, "export", "saga-a", "--out", str(out)).code == 0
    lines = out.read_text().splitlines()
    out.write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")

    ran = run({}, "verify-file", str(out))
    assert ran.code == 1
    assert ran.stderr.strip().splitlines() == [
        "error: line 2: not JSON (Expecting property name enclosed in double quotes at column 2)"
    ]

    dropped = tmp_path / "gap.jsonl"
    dropped.write_text("\n".join([lines[0], *lines[2:]]) + "\n")
    gap = run({}, "verify-file", str(dropped))
    assert gap.code == 1 and "first broken seq 2 (gap)" in gap.stdout

    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert run({}, "verify-file", str(empty)).stderr.startswith("error: ")
    missing = run({}, "verify-file", str(tmp_path / "nope.jsonl"))
    assert missing.code == 1 and "No such file or directory" in missing.stderr


def test_unknown_saga_and_missing_arguments(journal: Journal, tmp_path: Path) -> None:
    _, env = journal
    for command in ("journal", "verify", "export"):
        ran = run(env, command, "no-such-saga")
        assert ran.code == 1, command
        assert ran.stderr.strip().splitlines() == [
            f"error: no journal entries for saga 'no-such-saga' in {tmp_path}/journal.db"
        ], command
    for command in ("verify", "export"):
        neither = run(env, command)
        both = run(env, command, "saga-a", "--all")
        assert neither.code == both.code == 1
        assert "give a saga id or --all (not both)" in neither.stderr + both.stderr


def test_a_missing_journal_file_is_not_created(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/absent/journal.db"
    ran = run({"SAGACITY_JOURNAL_URL": url}, "verify", "--all")
    assert ran.code == 1
    assert f"no journal at {tmp_path}/absent/journal.db" in ran.stderr
    assert not (tmp_path / "absent").exists()


def test_export_into_a_reader_that_leaves_early_is_quiet(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/big.db"
    with open_store(url) as store:
        for step in range(1, 101):  # ~300 kB: far more than a pipe buffers
            store.append(
                EntryDraft.new("big", Phase.INTENT, step=step, tool="t", input={"x": "y" * 3000})
            )
    with subprocess.Popen(
        [sys.executable, "-m", "sagacity.worker", "export", "--all"],
        env=cli_env(SAGACITY_JOURNAL_URL=url),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        first = json.loads(proc.stdout.readline())  # `sagacity export --all | head -1`
        proc.stdout.close()
        stderr = proc.stderr.read().decode()
        code = proc.wait(timeout=60)
    assert (first["saga_id"], first["seq"]) == ("big", 1)
    assert code == 1
    assert stderr == ""  # no traceback, no error line: the reader chose to stop
