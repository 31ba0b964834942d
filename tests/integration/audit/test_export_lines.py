"""The export's entry lines: payloads as JSON values, verified byte for byte.

The hashed text of a payload is the RFC 8785 form of its value, or `<field>_text`
verbatim where the stored text is not its own RFC 8785 form; a line must be exactly the
line an export writes, so a value respelled (5000.0, 5e3, keys reordered) is refused
even though it hashes the same.
"""

from __future__ import annotations

import io
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings

from sagacity._errors import AuditFileError
from sagacity.audit._export import entry_line, export_jsonl, verify_jsonl
from sagacity.audit._export_lines import (
    entry_record,
    is_canonical,
    record_entry,
    render_line,
    value_line,
    value_text,
)
from sagacity.journal._canonical import canonical_text
from sagacity.journal._chain import GENESIS, BreakReason, reseal, seal
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase
from sagacity.stores._memory import MemoryJournalStore
from tests.integration.journal.test_recipe import VECTORS
from tests.pure.journal.test_chain import _doc_block
from tests.pure.journal.test_entry import json_values
from tests.support.line_attacks import AMOUNT, SHARED_LINE_ATTACKS

T0 = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)


def _chain(saga_id: str, drafts: list[EntryDraft]) -> list[JournalEntry]:
    """A chain sealed one second apart from T0."""
    entries, prev = [], GENESIS
    for seq, draft in enumerate(drafts, start=1):
        at = T0 + timedelta(seconds=seq)
        entry = seal(draft, seq=seq, prev_hash=prev, recorded_at=at)
        entries.append(entry)
        prev = entry.hash
    return entries


def _hand_written(saga_id: str, phase: Phase, **texts: str) -> EntryDraft:
    """A draft with stored texts sagacity never writes (a hand-written row):
    the dataclass itself, past the canonicalizing constructor."""
    fields = {"input_json": "null", "result_json": "null", "error_json": "null"}
    fields |= {"actor_json": "null"} | {f"{k}_json": v for k, v in texts.items()}
    return EntryDraft(saga_id=saga_id, step=1, attempt=1, tool="t", phase=phase, **fields)


def _payment() -> list[JournalEntry]:
    return _chain(
        "pay",
        [
            EntryDraft.new("pay", Phase.SAGA_OPENED, input={"goal": "pay"}),
            EntryDraft.new(
                "pay", Phase.INTENT, step=1, tool="wire",
                input={"currency": "EUR", "amount": 5000, "to": {"iban": "DE89", "name": "Zoë"}},
            ),
            EntryDraft.new("pay", Phase.APPROVED, step=1, tool="wire", actor="ops@example.com"),
            EntryDraft.new("pay", Phase.SAGA_CLOSED, result={"status": "COMPLETED"}),
        ],
    )  # fmt: skip


def _lines(entries: list[JournalEntry]) -> list[str]:
    return [value_line(e) + "\n" for e in entries]


def _refused(lines: list[str], message: str) -> None:
    with pytest.raises(AuditFileError, match=message):
        verify_jsonl(lines)


# -- what a line holds ---------------------------------------------------------------------


def test_payloads_are_json_values_and_the_line_says_format_1() -> None:
    lines = _lines(_payment())
    intent, approved = json.loads(lines[1]), json.loads(lines[2])
    assert intent["format"] == 1
    to = {"iban": "DE89", "name": "Zoë"}
    assert intent["input"] == {"amount": 5000, "currency": "EUR", "to": to}
    assert (intent["result"], intent["error"], intent["actor"]) == (None, None, None)
    assert approved["actor"] == "ops@example.com"
    assert lines[1].startswith('{"actor":null,"attempt":1,"error":null,"format":1,"hash":"')
    assert '"input":{"amount":5000,"currency":"EUR","to":{"iban":"DE89","name":"Zoë"}},' in lines[1]
    [report] = verify_jsonl(lines)
    assert report.ok and report.closed and report.entries == 4


def test_the_known_answer_vectors_verify_as_lines() -> None:
    """Vector 3 (non-BMP keys in UTF-16 order, 1e21, -0.0, an empty-string result) goes out
    as values, and each field's RFC 8785 form is the documented hashed text."""
    entries = [record_entry(v) for v in VECTORS]
    lines = _lines(entries)
    assert all("_text" not in line for line in lines)
    third = json.loads(lines[2])
    assert list(third["input"]) == ["lines", "memo", "😀", "ﬁ"]  # the line keeps JCS order
    assert third["result"] == "" and third["actor"] == "ops-🦊@example.com"
    for line, vector in zip(lines, VECTORS, strict=True):
        record = json.loads(line)
        for field in ("input", "result", "error", "actor"):
            assert value_text(record[field]) == vector[field]
    [report] = verify_jsonl(lines)
    assert report.ok and report.head_hash == VECTORS[-1]["hash"]


def test_the_worked_examples_of_the_doc_are_what_the_code_writes_and_reads() -> None:
    """docs/hash-chain.md §4 shows vector 2 as a line, and a hand-written row
    going out verbatim; both are exactly what value_line writes, and both verify."""
    example = _doc_block("line-example", "json").strip()
    assert example == value_line(record_entry(VECTORS[1]))
    assert json.loads(example)["input"] == {"amount": 100, "currency": "EUR"}
    verbatim = _doc_block("line-verbatim", "json").strip()
    [entry] = _chain(
        "order-legacy",
        [EntryDraft("order-legacy", 0, 1, "", Phase.SAGA_OPENED,
                    '{"goal": "refund order 42"}', "null", "null", "null")],
    )  # fmt: skip
    entry = replace(entry, recorded_at=T0 + timedelta(microseconds=1))
    entry = reseal(entry)
    assert verbatim == value_line(entry)
    assert verify_jsonl([verbatim])[0].ok
    respelled = example.replace('"amount":100,', '"amount":100.0,')
    _refused([example, respelled], "^line 2: .*in field input")


def test_a_stored_text_that_is_not_canonical_goes_out_verbatim_and_verifies() -> None:
    odd = {
        "input": '{"b": 1, "a": 2}',  # spaces and key order
        "result": "5000.0",  # a number respelled
        "error": '"caf\\u00e9"',  # an escape RFC 8785 does not write
        "actor": "not json at all",
    }
    entries = _chain("legacy", [_hand_written("legacy", Phase.EXECUTED, **odd)])
    [line] = _lines(entries)
    record = json.loads(line)
    for field, text in odd.items():
        assert field not in record and record[f"{field}_text"] == text
    [report] = verify_jsonl([line])
    assert report.ok and report.head_hash == entries[0].hash


def test_is_canonical_is_exactly_the_fixed_point() -> None:
    for text in ["null", '""', "0", "-1", "1.5", "1e+21", '{"a":[1,{}]}', "100000000000000000000"]:
        assert is_canonical(text), text
    for text in [" null", "1.0", "-0", "5e3", "1E+21", '{"b":1,"a":2}', '{"a":1,"a":1}', "NaN",
                 '"\\u00e9"', "9007199254740993", "1e400", "[", "", "nul"]:  # fmt: skip
        assert not is_canonical(text), text


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_every_canonical_text_goes_out_as_a_value_and_comes_back(value: Any) -> None:
    text = canonical_text(value)
    assert is_canonical(text)
    assert value_text(json.loads(text)) == text
    entries = _chain("p", [_hand_written("p", Phase.EXECUTED, input=text, result=text)])
    [line] = _lines(entries)
    fields = json.loads(line)  # a payload may itself hold a key "_text": look at the line's
    assert not [key for key in fields if key.endswith("_text")]
    assert value_text(fields["input"]) == value_text(fields["result"]) == text
    assert verify_jsonl([line])[0].ok


def test_export_writes_one_line_per_entry_as_value_line_writes_it() -> None:
    store = MemoryJournalStore()
    for entry in _payment():
        store.append(
            EntryDraft(entry.saga_id, entry.step, entry.attempt, entry.tool, entry.phase,
                       entry.input_json, entry.result_json, entry.error_json, entry.actor_json)
        )  # fmt: skip
    stored = list(store.entries("pay"))
    out = io.StringIO()
    assert export_jsonl(store, out) == 4
    assert out.getvalue().splitlines() == [value_line(e) for e in stored]
    assert entry_line(stored[0]) == value_line(stored[0])
    assert verify_jsonl(out.getvalue().splitlines(keepends=True))[0].ok


# -- attacks on a line ------------------------------------------------------------


def _edit(line: str, old: str, new: str) -> str:
    assert line.count(old) == 1, (old, line)
    return line.replace(old, new)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        *SHARED_LINE_ATTACKS,
        ('"error":null,', '"error":null,"error_text":"x",', "holds both error and error_text"),
        ('"format":1,', '"format":true,', "format True is not"),
        ('"format":1,', '"format":"1",', "format '1' is not"),
        ('"format":1,', "", "missing field format"),
        ('"actor":null,', '"actor":null, ', "in field attempt"),
        ('"actor":null,"attempt":1,', '"attempt":1,"actor":null,', "in field actor"),
        (AMOUNT, '"amount":NaN,', "input has no RFC 8785 form"),
    ],
)
def test_a_respelled_or_reshaped_line_is_refused_naming_it(
    old: str, new: str, message: str
) -> None:
    lines = _lines(_payment())
    lines[1] = _edit(lines[1], old, new)
    _refused(lines, f"^line 2: .*{message}")


def test_a_changed_value_breaks_the_chain_at_its_line() -> None:
    lines = _lines(_payment())
    lines[1] = _edit(lines[1], AMOUNT, '"amount":5001,')
    [report] = verify_jsonl(lines)
    assert (report.ok, report.first_broken_seq, report.reason) == (
        False, 2, BreakReason.HASH_MISMATCH,
    )  # fmt: skip
    assert report.detail.startswith("line 2: ")


def test_null_and_the_text_null_are_different_payloads() -> None:
    lines = _lines(_payment())
    lines[2] = _edit(lines[2], '"actor":"ops@example.com"', '"actor":null')
    assert verify_jsonl(lines)[0].reason is BreakReason.HASH_MISMATCH
    lines = _lines(_payment())
    lines[1] = _edit(lines[1], '"actor":null', '"actor":"null"')
    report = verify_jsonl(lines)[0]
    assert (report.first_broken_seq, report.reason) == (2, BreakReason.HASH_MISMATCH)


def test_a_verbatim_text_edited_breaks_the_chain() -> None:
    entries = _chain("legacy", [_hand_written("legacy", Phase.EXECUTED, input='{"b": 1}')])
    [line] = _lines(entries)
    edited = _edit(line, '"input_text":"{\\"b\\": 1}"', '"input_text":"{\\"b\\": 2}"')
    assert verify_jsonl([edited])[0].reason is BreakReason.HASH_MISMATCH
    as_value = _edit(line, '"input_text":"{\\"b\\": 1}"', '"input":{"b":1}')
    assert verify_jsonl([as_value])[0].reason is BreakReason.HASH_MISMATCH  # other bytes


def test_the_line_breakers_stay_escaped() -> None:
    entries = _chain("s", [EntryDraft.new("s", Phase.EXECUTED, step=1, tool="t",
                                          result={"memo": "a\u2028b\x85c\u2029"})])  # fmt: skip
    [line] = _lines(entries)
    assert "\\u2028" in line and "\\u0085" in line and "\\u2029" in line
    assert len(line.splitlines()) == 1 and verify_jsonl([line])[0].ok
    raw = line.replace("\\u2028", "\u2028")
    _refused([raw], "^line 1: .*in field result")


def test_render_line_is_the_rfc8785_form_of_the_line_itself() -> None:
    """What the doc promises a reimplementer: the line is its object's RFC 8785 form."""
    for entry in [*_payment(), *(record_entry(v) for v in VECTORS)]:
        line = render_line(entry_record(entry))
        assert line == canonical_text(json.loads(line))
        assert line == value_line(entry)


def test_not_chained_entries_keep_their_null_hash() -> None:
    entry = replace(_payment()[0], hash="")
    line = value_line(entry)
    assert '"hash":""' in line
    assert verify_jsonl([line])[0].reason is BreakReason.NOT_CHAINED
    nulled = _edit(line, '"hash":""', '"hash":null')
    assert verify_jsonl([nulled])[0].reason is BreakReason.NOT_CHAINED
