"""Each tamper a database owner can do, done for real (guards off, rows changed, the change
read back), on PostgreSQL and on SQLite; and each found by a command that names the saga
and what is wrong. A plain hash chain passes every one of these (shown in each test)."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

from sagacity.journal._chain import GENESIS, reseal, seal, verify_chain
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase
from sagacity.stores._base import utc_now
from sagacity.tlog._checkpoint import sign_saga_checkpoint, sign_tree_head
from sagacity.tlog._merkle import leaf_hash, nodes_completed, tree_root
from sagacity.tlog._note_keys import NoteSigner
from tests.support.evidence import EvidenceRig, insert_row


def _count(rig: EvidenceRig, saga_id: str) -> int:
    rows = rig.tamper.rows("SELECT COUNT(*) FROM {journal} WHERE saga_id=?", (saga_id,))
    return int(rows[0][0])


def _entries(rig: EvidenceRig, saga_id: str) -> list[JournalEntry]:
    return list(rig.store.entries(saga_id))


async def test_a_closed_sagas_cut_tail_is_found(rig: EvidenceRig) -> None:
    victim, bystander = await rig.run_sagas(2, "tail")
    total = _count(rig, victim)
    rig.tamper.run(("DELETE FROM {journal} WHERE saga_id=? AND seq>=?", (victim, total - 1)))
    assert _count(rig, victim) == total - 2  # SAGA_CLOSED and the entry before it are gone
    assert verify_chain(victim, rig.store.entries(victim)).ok  # the chain alone cannot tell

    found = await rig.cli("verify", "--all")
    assert found.code == 1
    assert f"{victim}: truncated: the chain holds {total - 2} entries" in found.output
    assert f"{bystander}: " not in found.output.replace(f"verified {bystander}", "")
    witnessed = await rig.cli("verify", victim, "--witness", "temporal")
    assert witnessed.code == 1
    assert f"{victim}: witness: Temporal history holds entries up to {total}" in witnessed.output


async def test_a_deleted_saga_is_found(rig: EvidenceRig) -> None:
    (victim,) = await rig.run_sagas(1, "gone")
    rig.tamper.run(("DELETE FROM {journal} WHERE saga_id=?", (victim,)))
    assert _count(rig, victim) == 0

    found = await rig.cli("verify", "--all")
    assert found.code == 1
    assert f"{victim}: deleted: the journal holds no entry of this saga" in found.output
    witnessed = await rig.cli("verify", "--all", "--witness", "temporal")
    assert f"{victim}: witness: its workflow" in witnessed.output
    assert "the saga's journal was deleted" in witnessed.output


async def test_a_chain_rewritten_with_recomputed_hashes_is_found(rig: EvidenceRig) -> None:
    (victim,) = await rig.run_sagas(1, "rewrite")
    chain = _entries(rig, victim)
    charge = next(e for e in chain if e.phase is Phase.EXECUTED and e.tool == "charge_card")
    forged: list[JournalEntry] = []
    prev = chain[charge.seq - 2].hash
    for entry in chain[charge.seq - 1 :]:
        if entry.seq == charge.seq:
            entry = replace(entry, result_json=entry.result_json.replace("1250", "9"))
        entry = reseal(replace(entry, prev_hash=prev))  # the stored bytes, rebuilt
        forged.append(entry)
        prev = entry.hash
    rig.tamper.run(
        *(
            (
                "UPDATE {journal} SET material=?, prev_hash=?, hash=? WHERE saga_id=? AND seq=?",
                (e.material, e.prev_hash, e.hash, victim, e.seq),
            )
            for e in forged
        )
    )
    stored = _entries(rig, victim)
    assert '"amount":9' in stored[charge.seq - 1].result_json  # the row really changed
    assert verify_chain(victim, stored).ok  # and the chain alone verifies

    found = await rig.cli("verify", victim)
    assert found.code == 1
    assert f"{victim}: rewritten: entry" in found.output
    witnessed = await rig.cli("verify", victim, "--witness", "temporal")
    assert f"{victim}: witness: entry {charge.seq} hashes to" in witnessed.output
    assert "in the journal, Temporal history recorded" in witnessed.output


def _fake_saga(saga_id: str, recorded_at: datetime) -> list[JournalEntry]:
    entries: list[JournalEntry] = []
    prev = GENESIS
    for seq, draft in enumerate(
        [
            EntryDraft.new(saga_id, Phase.SAGA_OPENED, input={"goal": "refund"}),
            EntryDraft.new(saga_id, Phase.EXECUTED, step=1, tool="charge_card", result={"x": 1}),
            EntryDraft.new(saga_id, Phase.SAGA_CLOSED, result={"status": "COMPLETED"}),
        ],
        start=1,
    ):
        entry = seal(draft, seq=seq, prev_hash=prev, recorded_at=recorded_at)
        entries.append(entry)
        prev = entry.hash
    return entries


async def test_a_fake_saga_inserted_is_found(rig: EvidenceRig) -> None:
    """A closed saga with no checkpoint is found once its close is older than the
    pending window (10 min): at once when the forger dates it earlier, at the first run
    past the window when it is dated now (until then verify names it as pending)."""
    await rig.run_sagas(1, "real")
    fake, backdated = "fake-saga-inserted", "fake-saga-backdated"
    entries = _fake_saga(fake, utc_now()) + _fake_saga(backdated, utc_now() - timedelta(hours=1))
    rig.tamper.run(*(insert_row(e) for e in entries))
    assert _count(rig, fake) == _count(rig, backdated) == 3
    assert verify_chain(fake, rig.store.entries(fake)).ok

    found = await rig.cli("verify", "--all")
    assert found.code == 1
    assert f"{backdated}: not_checkpointed: the chain is closed at 3 entries" in found.output
    assert f"{fake}: not_checkpointed" not in found.output
    assert "checkpoint pending (not a failure): 1 saga(s)" in found.output
    assert f"not signed yet: {fake};" in found.output
    later = await rig.cli("verify", "--all", SAGACITY_CHECKPOINT_PENDING_SECONDS="0")
    assert later.code == 1
    assert f"{fake}: not_checkpointed: the chain is closed at 3 entries" in later.output
    witnessed = await rig.cli("verify", fake, "--witness", "temporal")
    assert f"{fake}: witness: Temporal has no workflow with this id" in witnessed.output


Leaf = tuple[str, int, str, str]
"""(saga id, entries, head hash, signed note) of a checkpoint log row."""


def _leaves(rig: EvidenceRig) -> list[Leaf]:
    rows = rig.tamper.rows("SELECT saga_id, entries, head_hash, note FROM {cp} ORDER BY log_index")
    return [(str(a), int(b), str(c), str(d)) for a, b, c, d in rows]


def _rewrite_log(
    rig: EvidenceRig, leaves: list[Leaf], *, keep_heads_up_to: int, signer: NoteSigner | None
) -> None:
    """Replace the whole checkpoint log by `leaves` as its owner could: every node
    recomputed, the signed heads up to `keep_heads_up_to` kept and (with `signer`, a key
    of the attacker's) a new head signed over the result."""
    nodes: dict[tuple[int, int], bytes] = {}
    statements: list[tuple[str, tuple[object, ...]]] = [
        ("DELETE FROM {cp}", ()),
        ("DELETE FROM {nodes}", ()),
        ("DELETE FROM {heads} WHERE size>?", (keep_heads_up_to,)),
    ]
    for index, (saga_id, entries, head_hash, note) in enumerate(leaves):
        completed = nodes_completed(index, leaf_hash(note.encode()), lambda lv, ix: nodes[(lv, ix)])
        nodes.update({(level, idx): digest for level, idx, digest in completed})
        statements.append(
            (
                "INSERT INTO {cp} (log_index, saga_id, entries, head_hash, note) "
                "VALUES (?,?,?,?,?)",
                (index, saga_id, entries, head_hash, note),
            )
        )
    statements += [
        ("INSERT INTO {nodes} (level, idx, hash) VALUES (?,?,?)", (lv, ix, h))
        for (lv, ix), h in nodes.items()
    ]
    if signer is not None:
        root = tree_root(len(leaves), lambda lv, ix: nodes[(lv, ix)])
        head = sign_tree_head(signer, size=len(leaves), root=root)
        statements.append(
            (
                "INSERT INTO {heads} (size, root, note) VALUES (?,?,?)",
                (head.size, head.root, head.note),
            )
        )
    rig.tamper.run(*statements)


async def test_a_rewritten_checkpoint_log_fails_consistency_with_an_earlier_head(
    rig: EvidenceRig, tmp_path: Path
) -> None:
    victim, *_ = await rig.run_sagas(3, "log")
    kept = await rig.cli("log", "head")
    assert kept.code == 0, kept.output
    old_head = tmp_path / "head.txt"
    old_head.write_text(kept.stdout, encoding="utf-8")
    honest = _leaves(rig)

    # 1. The victim's checkpoint replaced by one of a rewritten chain, and the log's heads
    # re-signed, with a key of the attacker's own under the log's name.
    forger = NoteSigner.generate(rig.signer.name)
    at = next(i for i, leaf in enumerate(honest) if leaf[0] == victim)
    forged_note = sign_saga_checkpoint(
        forger, saga_id=victim, entries=honest[at][1], head_hash="ab" * 32, now=utc_now()
    )
    forged = [*honest[:at], (victim, honest[at][1], "ab" * 32, forged_note), *honest[at + 1 :]]
    _rewrite_log(rig, forged, keep_heads_up_to=0, signer=forger)
    assert _leaves(rig)[at][3] == forged_note  # the row really changed
    consistent = await rig.cli("log", "consistency", str(old_head))
    assert consistent.code == 1
    assert "no signature by a known key" in consistent.output
    found = await rig.cli("verify", "--all")
    assert found.code == 1
    assert f"{victim}: bad_checkpoint: log leaf {at}" in found.output

    # 2. The victim deleted from the journal and from the log, the later leaves moved
    # down, the nodes recomputed; only the signed heads from before it kept.
    rig.tamper.run(("DELETE FROM {journal} WHERE saga_id=?", (victim,)))
    without = [leaf for leaf in honest if leaf[0] != victim]
    _rewrite_log(rig, without, keep_heads_up_to=at, signer=None)
    assert len(_leaves(rig)) == len(without) < len(honest)
    assert not rig.tamper.rows("SELECT 1 FROM {cp} WHERE saga_id=?", (victim,))
    consistent = await rig.cli("log", "consistency", str(old_head))
    assert consistent.code == 1
    assert "the log was rolled back" in consistent.output
    found = await rig.cli("verify", "--all")
    assert found.code == 1
    assert "(checkpoint log): log_broken" in found.output


async def test_an_export_whose_inclusion_proof_does_not_match_is_refused(
    rig: EvidenceRig, tmp_path: Path
) -> None:
    victim, _ = await rig.run_sagas(2, "export")
    export = tmp_path / "export.jsonl"
    assert (await rig.cli("export", victim, "--out", str(export))).code == 0
    honest = await rig.cli("verify-file", str(export), "--log-key", rig.vkey)
    assert honest.code == 0, honest.output

    lines = export.read_text(encoding="utf-8").splitlines()
    at = next(i for i, line in enumerate(lines) if '"checkpoint"' in line)
    record = json.loads(lines[at])
    proof = record["inclusion_proof"]
    assert proof, "a proof to tamper with"
    proof[0] = base64.b64encode(bytes(32)).decode()
    lines[at] = json.dumps(record, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    export.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert json.loads(export.read_text().splitlines()[at])["inclusion_proof"][0] == proof[0]

    refused = await rig.cli("verify-file", str(export), "--log-key", rig.vkey)
    assert refused.code == 1
    assert f"{victim}: not_included: the inclusion proof does not put its checkpoint" in (
        refused.output
    )
