"""The one-pass reader of entry lines (sagacity.audit._export_read).

It must accept exactly the lines the writer writes, giving the entry the general reader
gives, and leave every other line to the general reader, which refuses it naming what is
wrong: each attack of the line table is replayed here, and each test
shows which reader decided (quick_entry's answer) and that the attack is real (the
respelled value hashes the same as the original).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings

import sagacity.audit._export as audit
from sagacity._errors import AuditFileError
from sagacity.audit._export import verify_jsonl
from sagacity.audit._export_lines import (
    _TEMPLATES,
    check_line,
    entry_record,
    hashed_record,
    render_line,
    value_line,
    value_text,
)
from sagacity.audit._export_read import quick_entry
from sagacity.journal._chain import GENESIS, BreakReason, seal
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase
from tests.pure.journal.test_entry import json_values
from tests.support.line_attacks import AMOUNT, SHARED_LINE_ATTACKS

T0 = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)


def _chain(drafts: list[EntryDraft]) -> list[JournalEntry]:
    entries, prev = [], GENESIS
    for seq, draft in enumerate(drafts, start=1):
        entry = seal(draft, seq=seq, prev_hash=prev, recorded_at=T0 + timedelta(seconds=seq))
        entries.append(entry)
        prev = entry.hash
    return entries


def _payment(saga: str = "pay") -> list[JournalEntry]:
    return _chain(
        [
            EntryDraft.new(saga, Phase.SAGA_OPENED, input={"goal": "pay"}),
            EntryDraft.new(
                saga, Phase.INTENT, step=1, tool="wire",
                input={"currency": "EUR", "amount": 5000, "to": {"iban": "DE89", "name": "Zoë"}},
            ),
            EntryDraft.new(saga, Phase.APPROVED, step=1, tool="wire", actor="ops@example.com"),
            EntryDraft.new(saga, Phase.SAGA_CLOSED, result={"status": "COMPLETED"}),
        ],
    )  # fmt: skip


def _lines(entries: list[JournalEntry]) -> list[str]:
    return [value_line(e) + "\n" for e in entries]


def _general(line: str) -> JournalEntry:
    """The general reader's entry of a line (its four passes)."""
    hashed, verbatim = hashed_record(1, audit._decode(line))
    entry = audit._entry(1, hashed)
    check_line(1, line, hashed, verbatim)
    return entry


def _edit(line: str, old: str, new: str) -> str:
    assert line.count(old) == 1, (old, line)
    return line.replace(old, new)


def test_the_layout_is_the_writers_template() -> None:
    """The literals the reader expects are the writer's own template for a line with
    every payload as a value: change one and the other must follow."""
    template = _TEMPLATES[frozenset()]
    literals = template.replace("%(", "\0").split("\0")
    expected = ['{"actor":', ',"attempt":', ',"error":', ',"format":', ',"hash":', ',"input":',
                ',"phase":', ',"prev_hash":', ',"recorded_at":', ',"result":',
                ',"saga_id":', ',"seq":', ',"step":', ',"tool":']  # fmt: skip
    assert [part.split(")s", 1)[-1] for part in literals][:-1] == expected
    assert template.endswith(")s}")


def test_every_written_line_is_read_in_one_pass_as_the_general_reader_reads_it() -> None:
    for line in _lines(_payment()):
        quick = quick_entry(line)
        assert quick is not None
        assert quick == _general(line)
        assert quick_entry(line.rstrip("\n")) == quick


@settings(max_examples=200, deadline=None)
@given(json_values, json_values)
def test_any_payload_reads_the_same_both_ways(given_value: Any, result: Any) -> None:
    try:
        draft = EntryDraft.new("s\u2028x", Phase.EXECUTED, step=1, tool="t\x85", input=given_value,
                               result=result)  # fmt: skip
    except ValueError:
        return  # no RFC 8785 form: never written
    [entry] = _chain([draft])
    line = value_line(entry) + "\n"
    assert line == render_line(entry_record(entry)) + "\n"  # the writer's two paths agree
    quick = quick_entry(line)
    assert quick == _general(line)
    assert quick is not None or "_text" in line  # only a verbatim text is left to the other


def test_a_file_read_in_one_pass_verifies_and_an_edit_of_the_last_line_shows() -> None:
    lines = _lines(_payment())
    [report] = verify_jsonl(lines)
    assert report.ok and report.closed and report.entries == 4
    lines[3] = _edit(lines[3], '"COMPLETED"', '"FAILED"')
    assert quick_entry(lines[3]) is not None  # the one-pass reader took it
    [report] = verify_jsonl(lines)
    assert (report.ok, report.first_broken_seq, report.reason) == (
        False, 4, BreakReason.HASH_MISMATCH,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('"tool":"wire"', '"tool":"wirf"'),  # a shown field edited, spelled as written
        (AMOUNT, '"amount":5001,'),  # a payload edited
        ('"seq":2', '"seq":3'),
        ('"step":1', '"step":2'),
        ('"phase":"INTENT"', '"phase":"APPROVED"'),
        ("T09:30:02.000000Z", "T09:30:03.000000Z"),
    ],
)
def test_an_edited_field_is_a_hash_mismatch_at_its_line(old: str, new: str) -> None:
    """The line's fields are the bytes hashed: a field edited (well spelled, so the
    one-pass reader takes the line) is other bytes than were hashed."""
    lines = _lines(_payment())
    lines[1] = _edit(lines[1], old, new)
    assert quick_entry(lines[1]) is not None
    [report] = verify_jsonl(lines)
    assert (report.ok, report.first_broken_seq) == (False, 2)
    assert report.reason in (BreakReason.HASH_MISMATCH, BreakReason.GAP)
    assert report.detail.startswith("line 2: ")


def test_an_edit_resealed_consistently_breaks_the_next_link() -> None:
    """Fields and hash edited together (the line re-hashed): the next line's link."""
    entries = _payment()
    forged = seal(
        EntryDraft.new("pay", Phase.INTENT, step=1, tool="wire", input={"amount": 1}),
        seq=2, prev_hash=entries[0].hash, recorded_at=entries[1].recorded_at,
    )  # fmt: skip
    lines = _lines(entries)
    lines[1] = value_line(forged) + "\n"
    assert quick_entry(lines[1]) is not None
    [report] = verify_jsonl(lines)
    assert (report.ok, report.first_broken_seq, report.reason) == (
        False, 3, BreakReason.BROKEN_LINK,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        *SHARED_LINE_ATTACKS,
        ('"seq":2,', '"seq":2,"seq":2,', "duplicate field 'seq'"),
        ('"seq":2,', '"seq":2.0,', "seq must be an integer"),
        ('"seq":2,', '"seq":02,', "not JSON"),
        ('"tool":"wire"', '"tool":"w\\u0069re"', "in field tool"),
        ('"phase":"INTENT"', '"phase":"intent"', "unknown phase"),
        (
            '"recorded_at":"2026-03-01T09:30:02.000000Z"',
            '"recorded_at":"2026-03-01T09:30:02Z"',
            "recorded_at .* is not a UTC timestamp",
        ),
        ('"seq":2,', '"seq":18446744073709551616,', "seq 18446744073709551616 is outside 0 to"),
        ('"step":1,', '"step":-1,', "step -1 is outside 0 to 2\\*\\*64-1"),
        ('"attempt":1,', '"attempt":-18446744073709551617,', "attempt -1844.* is outside"),
    ],
)
def test_a_respelled_or_reshaped_line_is_left_to_the_general_reader_which_refuses_it(
    old: str, new: str, message: str
) -> None:
    lines = _lines(_payment())
    lines[1] = _edit(lines[1], old, new)
    assert quick_entry(lines[1]) is None
    with pytest.raises(AuditFileError, match=f"^line 2: .*{message}"):
        verify_jsonl(lines)


def test_a_respelling_is_a_real_attack_it_hashes_the_same() -> None:
    """Without the exact-form rule 5e3 would verify: its hashed text is the original's."""
    line = _lines(_payment())[1]
    respelled = _edit(line, AMOUNT, '"amount":5e3,')
    original, edited = json.loads(line)["input"], json.loads(respelled)["input"]
    assert value_text(edited) == value_text(original)
    assert quick_entry(respelled) is None


def test_trailing_bytes_after_the_object_are_not_read_in_one_pass() -> None:
    line = _lines(_payment())[1]
    for tail in (" \n", "}\n", "\n\n", " "):
        assert quick_entry(line.rstrip("\n") + tail) is None


def test_a_hash_not_in_lowercase_hex_is_left_to_the_general_reader_and_breaks() -> None:
    lines = _lines(_payment())
    digest = json.loads(lines[1])["hash"]
    lines[1] = _edit(lines[1], digest, digest.upper())
    assert quick_entry(lines[1]) is None
    [report] = verify_jsonl(lines)
    assert (report.ok, report.first_broken_seq, report.reason) == (
        False, 2, BreakReason.HASH_MISMATCH,
    )  # fmt: skip


def test_an_entry_with_a_stored_text_not_canonical_goes_out_verbatim_and_verifies() -> None:
    """The writer's quick path is for values only: a text no value gives back (a row
    written outside sagacity) still goes out as `<field>_text`, read the general way."""
    draft = EntryDraft(
        saga_id="by-hand", step=0, attempt=1, tool="", phase=Phase.SAGA_OPENED,
        input_json='{"goal": "refund"}', result_json="null", error_json="null",
        actor_json="null",
    )  # fmt: skip
    [entry] = _chain([draft])
    line = value_line(entry) + "\n"
    assert '"input_text":"{\\"goal\\": \\"refund\\"}"' in line
    assert quick_entry(line) is None
    [report] = verify_jsonl([line])
    assert report.ok and report.entries == 1


def test_the_largest_counters_an_entry_holds_still_verify_as_a_chain() -> None:
    """The range is the material's, not narrower: seq 2**64-1 packs and reads back."""
    [entry] = _chain([EntryDraft.new("big", Phase.SAGA_OPENED, input={"n": 1})])
    line = value_line(entry) + "\n"
    big = _edit(line, '"attempt":1,', f'"attempt":{2**64 - 1},')
    assert (quick_entry(big) or _general(big)).attempt == 2**64 - 1
    [report] = verify_jsonl([big])
    assert (report.ok, report.reason) == (False, BreakReason.HASH_MISMATCH)  # edited, not crashed
