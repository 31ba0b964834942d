"""Audit export and offline verification from the file alone."""

from __future__ import annotations

import gc
import io
import json
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sagacity._errors import AuditFileError
from sagacity.audit._export import export_jsonl, verify_all, verify_jsonl, verify_store
from sagacity.journal._chain import BreakReason
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores._memory import MemoryJournalStore

T0 = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)


def _store(sagas: dict[str, int], *, payload: object = None) -> MemoryJournalStore:
    """One chain per saga: opened, `n` INTENT/EXECUTED pairs, closed when n is even."""
    ticks = iter(T0 + timedelta(microseconds=i) for i in range(10**6))
    store = MemoryJournalStore(clock=lambda: next(ticks))
    for saga, n in sagas.items():
        store.append(EntryDraft.new(saga, Phase.SAGA_OPENED, input={"goal": saga}))
        for step in range(1, n + 1):
            args = {"step": step, "n": payload}
            store.append(EntryDraft.new(saga, Phase.INTENT, step=step, tool="t", input=args))
            store.append(EntryDraft.new(saga, Phase.EXECUTED, step=step, tool="t", result=step))
        if n % 2 == 0:
            store.append(EntryDraft.new(saga, Phase.SAGA_CLOSED, result="COMPLETED"))
    return store


def _export(store: MemoryJournalStore) -> list[str]:
    out = io.StringIO()
    export_jsonl(store, out)
    return out.getvalue().splitlines(keepends=True)


SAGAS = {"saga-b": 3, "saga-a": 2, "saga-😀": 4}


def test_export_then_offline_verify_round_trip() -> None:
    store = _store(SAGAS)
    out = io.StringIO()
    written = export_jsonl(store, out)
    assert written == sum(len(list(store.entries(s))) for s in SAGAS) == 23
    reports = verify_jsonl(io.StringIO(out.getvalue()))
    assert [r.saga_id for r in reports] == ["saga-a", "saga-b", "saga-😀"]
    assert reports == list(verify_all(store))  # offline and store verify agree exactly
    for report in reports:
        head = store.head(report.saga_id)
        assert head is not None
        assert report.ok and report.entries == head.seq and report.head_hash == head.hash
        assert report.closed == (head.phase is Phase.SAGA_CLOSED)


def test_export_lines_are_sorted_compact_utf8_and_in_seq_order() -> None:
    store = _store({"s": 1}, payload="Zoë 😀 \u2028 line\nbreak")
    lines = _export(store)
    records = [json.loads(line) for line in lines]
    assert [r["seq"] for r in records] == [1, 2, 3]
    assert list(records[0]) == sorted(records[0]) and ", " not in lines[0]
    assert "😀" in lines[1] and "\\u2028" in lines[1]  # raw UTF-8, line separators escaped
    entry = next(store.entries("s", after_seq=1))
    assert records[1]["format"] == 1
    assert records[1]["input"] == entry.input == {"step": 1, "n": "Zoë 😀 \u2028 line\nbreak"}
    assert (records[1]["actor"], records[1]["error"]) == (None, None)
    # U+2028 escaped means str.splitlines() cannot cut an entry in two.
    assert len("".join(lines).splitlines()) == 3
    assert verify_jsonl("".join(lines).splitlines())[0].ok


def test_export_of_chosen_sagas_in_the_given_order() -> None:
    store = _store(SAGAS)
    out = io.StringIO()
    assert export_jsonl(store, out, ["saga-b", "nope", "saga-a"]) == 7 + 6
    assert [r.saga_id for r in verify_jsonl(io.StringIO(out.getvalue()))] == ["saga-b", "saga-a"]


def test_verify_store_reports_the_first_broken_entry() -> None:
    from dataclasses import replace

    store = _store({"s": 2})
    chain = list(store.entries("s"))
    store.replace_for_test("s", [*chain[:3], replace(chain[3], result_json="2"), *chain[4:]])
    report = verify_store(store, "s")
    # An entry's result is in its stored bytes: a field that says otherwise is named.
    assert (report.ok, report.first_broken_seq, report.reason) == (
        False,
        4,
        BreakReason.TAMPERED,
    )
    assert "result_json" in report.detail
    assert verify_store(store, "unknown").entries == 0


def _line_of(lines: list[str], saga: str, seq: int) -> int:
    """Index of an entry's line in an export."""
    for index, line in enumerate(lines):
        record = json.loads(line)
        if (record["saga_id"], record["seq"]) == (saga, seq):
            return index
    raise AssertionError(f"{saga} seq {seq} not exported")


def test_tampered_line_is_detected_at_its_seq_with_its_line_number() -> None:
    lines = _export(_store(SAGAS))
    index = _line_of(lines, "saga-b", 4)
    assert lines[index].count('"input":{"n":null,"step":2}') == 1
    lines[index] = lines[index].replace(
        '"input":{"n":null,"step":2}', '"input":{"n":null,"step":3}'
    )
    reports = {r.saga_id: r for r in verify_jsonl(lines)}
    broken = reports["saga-b"]
    assert (broken.ok, broken.first_broken_seq, broken.reason) == (
        False,
        4,
        BreakReason.HASH_MISMATCH,
    )
    assert broken.detail.startswith(f"line {index + 1}: ")
    assert reports["saga-a"].ok and reports["saga-😀"].ok


def test_deleted_and_swapped_lines_are_gaps() -> None:
    lines = _export(_store({"s": 3}))
    deleted = verify_jsonl(lines[:2] + lines[3:])[0]
    swapped = verify_jsonl([*lines[:2], lines[3], lines[2], *lines[4:]])[0]
    for report in (deleted, swapped):
        assert (report.first_broken_seq, report.reason) == (3, BreakReason.GAP)


def test_saga_reappearing_after_another_saga_is_wrong_saga() -> None:
    lines = _export(_store({"a": 2, "b": 1}))
    a_lines = [line for line in lines if '"saga_id":"a"' in line]
    b_lines = [line for line in lines if '"saga_id":"b"' in line]
    spliced = a_lines[:3] + b_lines + a_lines[3:]
    reports = {r.saga_id: r for r in verify_jsonl(spliced)}
    assert reports["b"].ok
    moved = reports["a"]
    assert (moved.ok, moved.first_broken_seq, moved.reason) == (False, 4, BreakReason.WRONG_SAGA)
    assert moved.detail.startswith(f"line {3 + len(b_lines) + 1}: saga resumes with seq 4")
    # Two exports joined: the second copy of a saga is refused the same way.
    doubled = {r.saga_id: r for r in verify_jsonl(a_lines + b_lines + a_lines)}
    assert (doubled["a"].reason, doubled["a"].first_broken_seq) == (BreakReason.WRONG_SAGA, 7)


def test_truncated_file_still_verifies_but_the_head_moves() -> None:
    """The documented limit: only a checkpointed head (or SAGA_CLOSED) shows truncation."""
    lines = _export(_store({"s": 2}))
    full, cut = verify_jsonl(lines)[0], verify_jsonl(lines[:-2])[0]
    assert cut.ok and not cut.closed and full.closed and cut.head_hash != full.head_hash


def test_blank_lines_are_ignored_and_null_hash_is_not_chained() -> None:
    lines = _export(_store({"s": 1}))
    digest = json.loads(lines[1])["hash"]
    unchained = lines[1].replace(f'"hash":"{digest}"', '"hash":null')
    report = verify_jsonl(["\n", lines[0], "  \n", unchained, lines[2]])[0]
    assert (report.first_broken_seq, report.reason) == (2, BreakReason.NOT_CHAINED)


GOOD_LINE = _export(_store({"s": 1}))[0]
GOOD = json.loads(GOOD_LINE)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "expected a JSON object"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "hash"}), "missing field.*hash"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "seq"}), "missing field.*seq"),
        (json.dumps(GOOD | {"note": "unhashed"}), "unexpected field.*note"),
        (json.dumps(GOOD | {"seq": "1"}), "seq must be an integer"),
        (json.dumps(GOOD | {"step": True}), "step must be an integer"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "input"}), "missing field input"),
        (json.dumps(GOOD | {"hash": 5}), "hash must be a string or null"),
        (json.dumps(GOOD | {"phase": "DONE"}), "unknown phase"),
        (json.dumps(GOOD | {"recorded_at": "2026-3-1T09:30:00.5Z"}), "recorded_at"),
        (json.dumps(GOOD | {"recorded_at": "2026-03-01 09:30:00"}), "recorded_at"),
        (json.dumps(GOOD)[:-1] + ',"seq":2}', "duplicate field 'seq'"),
        (json.dumps(GOOD | {"tool": "\ud800"}), "tool is not valid Unicode"),
    ],
    ids=lambda value: value if len(value) < 30 else None,
)
def test_malformed_line_names_its_number(line: str, message: str) -> None:
    lines = [GOOD_LINE, "\n", line + "\n"]
    with pytest.raises(AuditFileError, match=f"^line 3: .*{message}"):
        verify_jsonl(lines)


def test_ten_thousand_entries_verify_in_bounded_memory(tmp_path: Path) -> None:
    store = _store({f"saga-{i}": 1250 for i in range(4)}, payload="x" * 200)
    path = tmp_path / "journal.jsonl"
    with path.open("w", encoding="utf-8") as out:
        written = export_jsonl(store, out)
    assert written == 4 * 2502 >= 10_000
    expected = list(verify_all(store))
    del store
    gc.collect()
    size = path.stat().st_size
    tracemalloc.start()
    try:
        with path.open(encoding="utf-8") as lines:
            reports = verify_jsonl(lines)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert reports == expected and all(r.ok for r in reports)
    print(f"verify_jsonl: {written} entries, file {size:,} B, peak traced {peak:,} B")
    assert peak < size / 5, f"peak {peak:,} B is not far below the file's {size:,} B"
