"""The hash recipe: documented known answers, the layout, and tampering in memory.

The vectors and the byte table are read from docs/hash-chain.md (section 6) and
recomputed by `independent_material`, written from the page with int.to_bytes and no
code of sagacity's, then by the production sealer. Store-level attacks are in
tests/integration/stores/test_recipe_attacks.py.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagacity._errors import AuditFileError
from sagacity.audit._export import verify_jsonl
from sagacity.audit._export_lines import entry_record, record_entry, value_line
from sagacity.journal._canonical import parse_canonical
from sagacity.journal._chain import GENESIS, BreakReason, entry_hash, reseal, seal, verify_chain
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase
from sagacity.journal._recipe import (
    HEADER_SIZE,
    MAX_MATERIAL_BYTES,
    PREV_OFFSET,
    TAG_FIELD,
    decode_material,
    entry_from_material,
)
from sagacity.stores._memory import MemoryJournalStore
from tests.pure.journal.test_chain import SAGA, _doc_block, _other_value, chains

VECTORS: list[dict[str, Any]] = json.loads(_doc_block("kat-vectors", "json"))
T0 = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)


def independent_material(record: dict[str, Any]) -> bytes:
    """Section 1's buffer as a reimplementer would write it from the page."""

    def u64(n: int) -> bytes:
        return n.to_bytes(8, "big")

    texts = [
        record[name].encode("utf-8")
        for name in ("saga_id", "tool", "phase", "actor", "input", "result", "error")
    ]
    tag = b"sagacity.journal.v1"
    return (
        u64(len(tag))
        + tag
        + bytes.fromhex(record["prev_hash"])
        + u64(record["seq"])
        + u64(record["step"])
        + u64(record["attempt"])
        + record["recorded_at"].encode("ascii")
        + b"".join(u64(len(t)) for t in texts)
        + b"".join(texts)
    )


# -- known answers -----------------------------------------------------------------------


def test_genesis_is_the_documented_constant() -> None:
    assert hashlib.sha256(b"sagacity.journal.v1.genesis").hexdigest() == GENESIS
    assert VECTORS[0]["prev_hash"] == GENESIS
    for previous, vector in itertools.pairwise(VECTORS):
        assert vector["prev_hash"] == previous["hash"]


@pytest.mark.parametrize("index", range(3))
def test_vector_is_recomputed_from_the_page(index: int) -> None:
    vector = VECTORS[index]
    assert hashlib.sha256(independent_material(vector)).hexdigest() == vector["hash"]
    entry = record_entry(vector)
    assert entry.material == independent_material(vector)
    assert entry_hash(entry.material) == vector["hash"] and entry_record(entry) == vector


@pytest.mark.parametrize("index", range(3))
def test_vector_is_what_seal_produces(index: int) -> None:
    """The documented payload values, sealed by the production code."""
    vector = VECTORS[index]
    draft = EntryDraft.new(
        vector["saga_id"],
        vector["phase"],
        step=vector["step"],
        attempt=vector["attempt"],
        tool=vector["tool"],
        input=parse_canonical(vector["input"]),
        result=parse_canonical(vector["result"]),
        error=parse_canonical(vector["error"]),
        actor=parse_canonical(vector["actor"]),
    )
    at = datetime.fromisoformat(vector["recorded_at"])
    sealed = seal(draft, seq=vector["seq"], prev_hash=vector["prev_hash"], recorded_at=at)
    assert entry_record(sealed) == vector


def test_material_table_matches_the_page() -> None:
    rows = [line.split() for line in _doc_block("kat-material", "text").splitlines() if line]
    assert [row[0] for row in rows] == [
        "tag", "prev_hash", "seq", "step", "attempt", "recorded_at", "lengths", "texts",
    ]  # fmt: skip
    documented = bytes.fromhex("".join(row[1] for row in rows))
    assert documented == independent_material(VECTORS[0])
    assert len(documented) == 225 and hashlib.sha256(documented).hexdigest() == VECTORS[0]["hash"]


def test_vectors_verify_as_an_export_file() -> None:
    lines = [value_line(record_entry(v)) + "\n" for v in VECTORS]
    [report] = verify_jsonl(io.StringIO("".join(lines)))
    assert report.ok and report.entries == 3 and report.head_hash == VECTORS[-1]["hash"]


# -- the layout --------------------------------------------------------------------------


def test_header_offsets_and_domain_separation() -> None:
    entry = record_entry(VECTORS[1])
    material = entry.material
    assert HEADER_SIZE == 166 and PREV_OFFSET == 27
    assert material[PREV_OFFSET : PREV_OFFSET + 32] == bytes.fromhex(VECTORS[0]["hash"])
    assert material[:27] == TAG_FIELD == b"\x00" * 7 + b"\x13sagacity.journal.v1"
    assert decode_material(material) | {"hash": entry.hash, "material": material} == {
        name: getattr(entry, name) for name in decode_material(material)
    } | {"hash": entry.hash, "material": material}
    assert entry_from_material(material, entry.hash) == entry


def test_a_buffer_that_is_no_entry_is_refused_before_decoding() -> None:
    material = record_entry(VECTORS[0]).material
    for bad, why in (
        (material[:100], "shorter than"),
        (material + b"x", "add up"),
        (b"\x00" * 8 + material[8:], "the tag"),
        (material.replace(b"SAGA_OPENED", b"SAGA_OPENEX"), "unknown phase"),
    ):
        with pytest.raises(ValueError, match=why):
            decode_material(bad)
    huge = bytes(MAX_MATERIAL_BYTES + 1)
    with pytest.raises(ValueError, match="over the"):
        decode_material(huge)


def test_sealing_a_first_entry_linked_elsewhere_than_genesis_is_refused() -> None:
    draft = EntryDraft.new(SAGA, Phase.SAGA_OPENED)
    with pytest.raises(ValueError, match="links to"):
        seal(draft, seq=1, prev_hash="0" * 64, recorded_at=T0)


# -- tampering in memory -----------------------------------------------------------------


def _v2(chain: list[JournalEntry]) -> list[JournalEntry]:
    """A chain of test_chain's strategy, sealed again by the production sealer."""
    out: list[JournalEntry] = []
    prev = GENESIS
    for entry in chain:
        draft = EntryDraft(
            entry.saga_id, entry.step, entry.attempt, entry.tool, entry.phase,
            entry.input_json, entry.result_json, entry.error_json, entry.actor_json,
        )  # fmt: skip
        out.append(seal(draft, seq=entry.seq, prev_hash=prev, recorded_at=entry.recorded_at))
        prev = out[-1].hash
    return out


FIELDS = [
    "saga_id", "seq", "step", "attempt", "tool", "phase", "input_json", "result_json",
    "error_json", "actor_json", "recorded_at", "prev_hash",
]  # fmt: skip


def _other(draw: st.DrawFn, entry: JournalEntry, field: str) -> object:
    return _other_value(draw, entry, field, texts=st.text(max_size=40), shift_us=10**9)


@settings(max_examples=300, deadline=None)
@given(chain=chains(), data=st.data())
def test_any_field_edited_without_the_bytes_is_tampered_at_that_entry(
    chain: list[JournalEntry], data: st.DataObject
) -> None:
    chain = _v2(chain)
    assert verify_chain(SAGA, chain).ok
    k = data.draw(st.integers(1, len(chain)), label="seq")
    field = data.draw(st.sampled_from(FIELDS), label="field")
    edited = replace(chain[k - 1], **{field: _other(data.draw, chain[k - 1], field)})
    assert getattr(edited, field) != getattr(chain[k - 1], field)
    report = verify_chain(SAGA, [*chain[: k - 1], edited, *chain[k:]])
    assert (report.ok, report.first_broken_seq, report.reason) == (False, k, BreakReason.TAMPERED)
    assert field in report.detail or "material" in report.detail


@settings(max_examples=150, deadline=None)
@given(chain=chains(), data=st.data())
def test_edited_bytes_are_found_with_or_without_the_field_check(
    chain: list[JournalEntry], data: st.DataObject
) -> None:
    chain = _v2(chain)
    k = data.draw(st.integers(1, len(chain)), label="seq")
    material = chain[k - 1].material
    at = data.draw(st.integers(HEADER_SIZE, len(material) - 1), label="byte")
    flipped = material[:at] + bytes([material[at] ^ 0x01]) + material[at + 1 :]
    edited = replace(chain[k - 1], material=flipped)
    tampered = [*chain[: k - 1], edited, *chain[k:]]
    full = verify_chain(SAGA, tampered)
    assert (full.ok, full.first_broken_seq) == (False, k)
    assert full.reason in (BreakReason.TAMPERED, BreakReason.HASH_MISMATCH)
    fast = verify_chain(SAGA, tampered, columns_checked=True)
    assert (fast.ok, fast.first_broken_seq, fast.reason) == (False, k, BreakReason.HASH_MISMATCH)


def test_resealed_bytes_break_the_next_link() -> None:
    chain = _v2(_plain_chain(4))
    forged = replace(chain[1], input_json='{"n":99}')
    forged = reseal(forged)
    for columns_checked in (False, True):
        report = verify_chain(SAGA, [chain[0], forged, *chain[2:]], columns_checked=columns_checked)
        assert (report.first_broken_seq, report.reason) == (3, BreakReason.BROKEN_LINK)


def _plain_chain(n: int) -> list[JournalEntry]:
    store = MemoryJournalStore()
    store.append(EntryDraft.new(SAGA, Phase.SAGA_OPENED, input={"goal": "test"}))
    for step in range(1, n):
        store.append(EntryDraft.new(SAGA, Phase.INTENT, step=step, tool="t", input={"n": step}))
    return list(store.entries(SAGA))


# -- a v1 journal written by the release before v2 -----------------------------------------


# -- export lines --------------------------------------------------------------------------


def _lines() -> list[str]:
    return [value_line(record_entry(v)) + "\n" for v in VECTORS]


def test_a_line_whose_hash_is_respelled_does_not_verify() -> None:
    lines = _lines()
    lines[0] = lines[0].replace(VECTORS[0]["hash"], VECTORS[0]["hash"].upper())
    [report] = verify_jsonl(io.StringIO("".join(lines)))
    assert (report.first_broken_seq, report.reason) == (1, BreakReason.HASH_MISMATCH)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('"format":1', '"format":2', "format 2 is not an export format"),
        ('"format":1', '"format":true', "format True is not an export format"),
        ('"format":1', '"format":1.0', "format 1.0 is not an export format"),
        (GENESIS, GENESIS.upper(), "64 lowercase hex"),
    ],
    ids=["format-2", "format-true", "format-float", "prev-upper"],
)
def test_a_line_with_a_respelled_format_or_prev_hash_is_refused(
    old: str, new: str, message: str
) -> None:
    lines = _lines()
    assert old in lines[0]
    lines[0] = lines[0].replace(old, new)
    with pytest.raises(AuditFileError, match=message):
        verify_jsonl(io.StringIO("".join(lines)))
