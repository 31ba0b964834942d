"""Recipe v2: documented known answers, the layout, versions, and tampering in memory.

The vectors and the byte table are read from docs/hash-chain.md (section 7) and
recomputed by `independent_material`, written from the page with int.to_bytes and no
code of sagacity's, then by the production sealer. Store-level attacks are in
tests/store/test_recipe_v2_attacks.py.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import shutil
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagacity.audit import export_jsonl, verify_jsonl, verify_store
from sagacity.canonical import parse_canonical
from sagacity.chain import (
    GENESIS,
    BreakReason,
    compute_hash,
    entry_material,
    genesis,
    seal,
    v2_material,
    verify_chain,
)
from sagacity.entry import EntryDraft, JournalEntry
from sagacity.errors import AuditFileError
from sagacity.export_lines import value_line
from sagacity.export_writer import record_line
from sagacity.phases import Phase
from sagacity.recipe import (
    GENESIS,
    HEADER_SIZE,
    MAX_MATERIAL_BYTES,
    PREV_OFFSET,
    decode_material,
    entry_from_material,
)
from sagacity.stores.memory import MemoryJournalStore
from sagacity.stores.sqlite import SqliteJournalStore
from tests.unit.test_chain import SAGA, _doc_block, chains

VECTORS: list[dict[str, Any]] = json.loads(_doc_block("kat-v2-vectors", "json"))
V1_VECTORS: list[dict[str, Any]] = json.loads(_doc_block("kat-vectors", "json"))
LEGACY_DB = Path(__file__).resolve().parent / "data" / "journal-v1.db"
T0 = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)


def independent_material(record: dict[str, Any]) -> bytes:
    """Section 7's buffer as a reimplementer would write it from the page."""

    def u64(n: int) -> bytes:
        return n.to_bytes(8, "big")

    texts = [
        record[name].encode("utf-8")
        for name in ("saga_id", "tool", "phase", "actor", "input", "result", "error")
    ]
    tag = b"sagacity.journal.v2"
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


def test_v2_genesis_is_the_documented_constant() -> None:
    assert hashlib.sha256(b"sagacity.journal.v2.genesis").hexdigest() == GENESIS
    assert genesis(2) == GENESIS != genesis(1) == GENESIS
    assert VECTORS[0]["prev_hash"] == GENESIS
    for previous, vector in itertools.pairwise(VECTORS):
        assert vector["prev_hash"] == previous["hash"]


@pytest.mark.parametrize("index", range(3))
def test_v2_vector_is_recomputed_from_the_page(index: int) -> None:
    vector = VECTORS[index]
    assert hashlib.sha256(independent_material(vector)).hexdigest() == vector["hash"]
    entry = JournalEntry.from_record(vector)
    assert entry.recipe == 2 and entry.material == independent_material(vector)
    assert compute_hash(entry) == vector["hash"] and entry.to_record() == vector


@pytest.mark.parametrize("index", range(3))
def test_v2_vector_is_what_seal_produces(index: int) -> None:
    """The same payload values as the v1 vectors, sealed in v2 by the production code."""
    vector, v1 = VECTORS[index], V1_VECTORS[index]
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
    assert sealed.to_record() == vector
    same_fields = {k: v for k, v in v1.items() if k not in ("prev_hash", "hash")}
    assert {k: v for k, v in vector.items() if k in same_fields} == same_fields


def test_v2_material_table_matches_the_page() -> None:
    rows = [line.split() for line in _doc_block("kat-v2-material", "text").splitlines() if line]
    assert [row[0] for row in rows] == [
        "tag", "prev_hash", "seq", "step", "attempt", "recorded_at", "lengths", "texts",
    ]  # fmt: skip
    documented = bytes.fromhex("".join(row[1] for row in rows))
    assert documented == independent_material(VECTORS[0])
    assert len(documented) == 225 and hashlib.sha256(documented).hexdigest() == VECTORS[0]["hash"]


def test_v2_vectors_verify_as_export_files_in_both_formats() -> None:
    entries = [JournalEntry.from_record(v) for v in VECTORS]
    for write in (record_line, value_line):
        lines = [write(e) + "\n" for e in entries]
        assert all('"recipe":2' in line for line in lines)
        [report] = verify_jsonl(io.StringIO("".join(lines)))
        assert report.ok and report.entries == 3 and report.head_hash == VECTORS[-1]["hash"]


# -- the layout --------------------------------------------------------------------------


def test_header_offsets_and_domain_separation() -> None:
    entry = JournalEntry.from_record(VECTORS[1])
    material = entry.material
    assert HEADER_SIZE == 166 and PREV_OFFSET == 27
    assert material[PREV_OFFSET : PREV_OFFSET + 32] == bytes.fromhex(VECTORS[0]["hash"])
    v1 = entry_material(replace(entry, material=b""))
    # Both start with a length-prefixed tag; they differ in its last byte, so no byte
    # string is both a v1 and a v2 buffer.
    assert material[:26] == v1[:26] and material[26:27] == b"2" and v1[26:27] == b"1"
    assert compute_hash(replace(entry, material=b"")) != entry.hash
    assert decode_material(material) | {"hash": entry.hash, "material": material} == {
        name: getattr(entry, name) for name in decode_material(material)
    } | {"hash": entry.hash, "material": material}
    assert entry_from_material(material, entry.hash) == entry


def test_a_buffer_that_is_not_v2_is_refused_before_decoding() -> None:
    material = JournalEntry.from_record(VECTORS[0]).material
    for bad, why in (
        (material[:100], "shorter than"),
        (material + b"x", "add up"),
        (b"\x00" * 8 + material[8:], "v2 tag"),
        (material.replace(b"SAGA_OPENED", b"SAGA_OPENEX"), "unknown phase"),
    ):
        with pytest.raises(ValueError, match=why):
            decode_material(bad)
    huge = bytes(MAX_MATERIAL_BYTES + 1)
    with pytest.raises(ValueError, match="over the"):
        decode_material(huge)


def test_sealing_a_first_entry_with_the_other_recipes_genesis_is_refused() -> None:
    draft = EntryDraft.new(SAGA, Phase.SAGA_OPENED)
    with pytest.raises(ValueError, match="links to"):
        seal(draft, seq=1, prev_hash=GENESIS, recorded_at=T0)
    with pytest.raises(ValueError, match="links to"):
        seal(draft, seq=1, prev_hash=GENESIS, recorded_at=T0, recipe=1)


# -- tampering in memory -----------------------------------------------------------------


def _v2(chain: list[JournalEntry]) -> list[JournalEntry]:
    """A v1 chain of test_chain's strategy, sealed again in v2."""
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
    old = getattr(entry, field)
    if field in ("seq", "step", "attempt"):
        return draw(st.integers(0, 10**6).filter(lambda v: v != old))
    if field == "phase":
        return draw(st.sampled_from([p for p in Phase if p is not old]))
    if field == "recorded_at":
        return old + timedelta(microseconds=draw(st.integers(-(10**9), 10**9).filter(bool)))
    return draw(st.text(max_size=40).filter(lambda v: v != old))


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
    forged = replace(forged, material=v2_material(forged))
    forged = replace(forged, hash=compute_hash(forged))
    for columns_checked in (False, True):
        report = verify_chain(SAGA, [chain[0], forged, *chain[2:]], columns_checked=columns_checked)
        assert (report.first_broken_seq, report.reason) == (3, BreakReason.BROKEN_LINK)


def _plain_chain(n: int, recipe: int = 2) -> list[JournalEntry]:
    store = MemoryJournalStore(recipe=recipe)
    store.append(EntryDraft.new(SAGA, Phase.SAGA_OPENED, input={"goal": "test"}))
    for step in range(1, n):
        store.append(EntryDraft.new(SAGA, Phase.INTENT, step=step, tool="t", input={"n": step}))
    return list(store.entries(SAGA))


def test_a_chain_never_mixes_recipes() -> None:
    v2, v1 = _plain_chain(4), _plain_chain(4, recipe=1)
    assert {e.recipe for e in v2} == {2} and {e.recipe for e in v1} == {1}
    as_v1 = replace(v2[2], material=b"")
    as_v1 = replace(as_v1, hash=compute_hash(as_v1))  # even with a correct v1 hash
    report = verify_chain(SAGA, [*v2[:2], as_v1, *v2[3:]])
    assert (report.first_broken_seq, report.reason) == (3, BreakReason.MIXED_RECIPE)
    v1_next = replace(v1[2], material=v2_material(v1[2]))
    v1_next = replace(v1_next, hash=compute_hash(v1_next))
    report = verify_chain(SAGA, [*v1[:2], v1_next, *v1[3:]])
    assert (report.first_broken_seq, report.reason) == (3, BreakReason.MIXED_RECIPE)


def test_a_saga_keeps_the_recipe_of_its_first_entry() -> None:
    store = MemoryJournalStore(recipe=1)
    store.append(EntryDraft.new("old", Phase.SAGA_OPENED))
    store.recipe = 2  # the deployment upgrades
    later = store.append(EntryDraft.new("old", Phase.INTENT, step=1, tool="t"))
    fresh = store.append(EntryDraft.new("new", Phase.SAGA_OPENED))
    assert (later.recipe, fresh.recipe) == (1, 2)
    assert verify_store(store, "old").ok and verify_store(store, "new").ok


# -- a v1 journal written by the release before v2 -----------------------------------------


def test_a_sqlite_journal_written_before_v2_upgrades_in_place(tmp_path: Path) -> None:
    """data/journal-v1.db was written by the code before recipe v2 (a SqliteJournalStore
    of commit 1722997): opening it adds the material column and nothing else; its chains
    verify, go on in v1, and export and verify-file as before; a new saga is v2."""
    path = tmp_path / "journal.db"
    shutil.copy(LEGACY_DB, path)
    with sqlite3.connect(path) as conn:
        assert "material" not in [row[1] for row in conn.execute("PRAGMA table_info(journal)")]
        before = conn.execute("SELECT * FROM journal ORDER BY saga_id, seq").fetchall()
        triggers = conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'").fetchall()
    with SqliteJournalStore(path) as store:
        assert [verify_store(store, s).ok for s in store.sagas()] == [True, True]
        closed = list(store.entries("legacy-closed"))
        assert {e.recipe for e in closed} == {1} and closed[0].prev_hash == GENESIS
        later = store.append(EntryDraft.new("legacy-open", Phase.SAGA_CLOSED))
        assert later.recipe == 1 and verify_store(store, "legacy-open").closed
        assert store.append(EntryDraft.new("after-v2", Phase.SAGA_OPENED)).recipe == 2
        out = io.StringIO()
        export_jsonl(store, out)
        reports = verify_jsonl(io.StringIO(out.getvalue()))
        assert [r.ok for r in reports] == [True, True, True]
        assert out.getvalue().count('"recipe":2') == 1
    with sqlite3.connect(path) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(journal)")]
        assert columns[-1] == "material"
        rows = conn.execute("SELECT * FROM journal ORDER BY saga_id, seq").fetchall()
        assert [row[:-1] for row in rows if row[0] != "after-v2"][: len(before)] == before
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("UPDATE journal SET tool='x'")
        # The registry marks' table is new beside the journal, with its own guards.
        found = "SELECT name FROM sqlite_master WHERE type='trigger' AND tbl_name<>?"
        assert conn.execute(found, ("registry_marks",)).fetchall() == triggers


# -- export lines --------------------------------------------------------------------------


def _v2_lines() -> list[str]:
    return [value_line(JournalEntry.from_record(v)) + "\n" for v in VECTORS]


def test_a_v2_line_whose_hash_is_respelled_does_not_verify() -> None:
    lines = _v2_lines()
    lines[0] = lines[0].replace(VECTORS[0]["hash"], VECTORS[0]["hash"].upper())
    [report] = verify_jsonl(io.StringIO("".join(lines)))
    assert (report.first_broken_seq, report.reason) == (1, BreakReason.HASH_MISMATCH)


def test_a_v2_line_without_its_recipe_does_not_verify() -> None:
    lines = _v2_lines()
    lines[0] = lines[0].replace(',"recipe":2', "")
    assert '"recipe"' not in lines[0]
    [report] = verify_jsonl(io.StringIO("".join(lines)))
    assert (report.ok, report.first_broken_seq, report.reason) == (
        False,
        1,
        BreakReason.HASH_MISMATCH,
    )
    lines = _v2_lines()
    lines[1] = lines[1].replace(',"recipe":2', "")
    [report] = verify_jsonl(io.StringIO("".join(lines)))
    assert (report.first_broken_seq, report.reason) == (2, BreakReason.MIXED_RECIPE)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('"recipe":2', '"recipe":1', "recipe 1 is not one"),
        ('"recipe":2', '"recipe":true', "recipe True is not one"),
        ('"recipe":2', '"recipe":2.0', "recipe 2.0 is not one"),
        (GENESIS, GENESIS.upper(), "64 lowercase hex"),
    ],
    ids=["recipe-1", "recipe-true", "recipe-float", "prev-upper"],
)
def test_a_v2_line_with_a_respelled_recipe_or_hash_is_refused(
    old: str, new: str, message: str
) -> None:
    lines = _v2_lines()
    assert old in lines[0]
    lines[0] = lines[0].replace(old, new)
    with pytest.raises(AuditFileError, match=message):
        verify_jsonl(io.StringIO("".join(lines)))
