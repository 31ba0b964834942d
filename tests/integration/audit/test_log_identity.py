"""The checkpoint log as the evidence of a saga, attacked where it was trusted too much: by
its name (another log's checkpoint under the same name), by a key of another trusted log
that cosigned this log's head, by its saga_id column (a checkpoint renamed or deleted to
hide a cut tail from `verify SAGA`), with no key at all (a rewritten chain under a log
re-signed by the attacker), and by a file planted under the key's own text. Each tamper
is done for real on PostgreSQL (superuser, guards off) and SQLite, shown to have
happened, and then found by the command an auditor runs, naming the saga and the
fault."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from sagacity.audit._export import entry_line, export_jsonl
from sagacity.journal._chain import verify_chain
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import open_store
from sagacity.stores._base import utc_now
from sagacity.tlog._checkpoint import sign_saga_checkpoint
from sagacity.tlog._note_keys import NoteSigner
from sagacity.tlog._signed_note import SignedNote, parse_note
from tests.support.evidence import EvidenceRig, hand_made, rewrite, updates


def _count(rig: EvidenceRig, table: str, saga_id: str) -> int:
    rows = rig.tamper.rows(f"SELECT COUNT(*) FROM {{{table}}} WHERE saga_id=?", (saga_id,))
    return int(rows[0][0])


def _staging_export(tmp_path: Path, name: str) -> tuple[NoteSigner, list[str]]:
    """A staging deployment's complete export: its own journal and log, its key under
    the same name as production's (two deployments set up with one default name)."""
    staging = NoteSigner.generate(name)
    store = open_store(f"sqlite:///{tmp_path}/staging.db")
    log = store.checkpoint_log(staging)
    store.append(EntryDraft.new("refund-to-attacker", Phase.SAGA_OPENED))
    store.append(
        EntryDraft.new(
            "refund-to-attacker", Phase.EXECUTED, step=1, tool="refund", result={"eur": 9999}
        )
    )
    log.record(store.append(EntryDraft.new("refund-to-attacker", Phase.SAGA_CLOSED, result={})))
    out = io.StringIO()
    export_jsonl(store, out, log=log, head=log.head())
    store.close()
    return staging, out.getvalue().splitlines()


async def test_a_saga_of_another_trusted_log_with_the_same_name_is_refused(
    rig: EvidenceRig, tmp_path: Path
) -> None:
    await rig.run_sagas(2, "prod")
    kept = await rig.cli("log", "head")
    assert kept.code == 0, kept.output
    (tmp_path / "head.txt").write_text(kept.stdout, encoding="utf-8")
    export = tmp_path / "prod.jsonl"
    assert (await rig.cli("export", "--all", "--out", str(export))).code == 0
    staging, lines = _staging_export(tmp_path, rig.signer.name)
    assert staging.name == rig.signer.name and staging.key_hash != rig.signer.key_hash

    pasted = []
    for line in lines[1:]:  # the staging saga's checkpoint and entries, not its head
        record = json.loads(line)
        if "checkpoint" in record:  # passed off as leaves signed after production's head
            record = {**record, "log_index": 10**6 + len(pasted), "inclusion_proof": None}
        pasted.append(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
    spliced = tmp_path / "spliced.jsonl"
    spliced.write_text(export.read_text(encoding="utf-8") + "\n".join(pasted) + "\n", "utf-8")
    assert "refund-to-attacker" in spliced.read_text(encoding="utf-8")
    both = tmp_path / "both.keys"
    both.write_text(f"{rig.vkey}\n{staging.verifier.encode()}\n", encoding="utf-8")

    found = await rig.cli(
        "verify-file", str(spliced), "--log-key", str(both), "--require-complete",
        "--known-head", str(tmp_path / "head.txt"),
    )  # fmt: skip
    assert found.code == 1, found.output
    assert "refund-to-attacker: bad_checkpoint: line" in found.output
    assert f"a checkpoint signed by {rig.signer.name} (key {staging.key_hash.hex()})" in (
        found.output
    )
    assert f"but the tree head by {rig.signer.name} (key {rig.signer.key_hash.hex()})" in (
        found.output
    )
    honest = await rig.cli(
        "verify-file", str(export), "--log-key", str(both), "--require-complete",
        "--known-head", str(tmp_path / "head.txt"),
    )  # fmt: skip
    assert honest.code == 0, honest.output


async def test_a_checkpoint_renamed_or_deleted_cannot_hide_a_cut_tail_from_verify_saga(
    rig: EvidenceRig,
) -> None:
    victim, other, bystander = await rig.run_sagas(3, "hidden")
    for saga_id in (victim, other):
        total = _count(rig, "journal", saga_id)
        rig.tamper.run(("DELETE FROM {journal} WHERE saga_id=? AND seq=?", (saga_id, total)))
        assert _count(rig, "journal", saga_id) == total - 1  # SAGA_CLOSED is gone
        report = verify_chain(saga_id, rig.store.entries(saga_id))
        assert report.ok and not report.closed  # the chain alone: a saga still running
    # The victim's checkpoints renamed away; the other's deleted.
    rig.tamper.run(
        ("UPDATE {cp} SET saga_id=? WHERE saga_id=?", (victim + "~", victim)),
        ("DELETE FROM {cp} WHERE saga_id=?", (other,)),
    )
    assert _count(rig, "cp", victim) == 0 and _count(rig, "cp", victim + "~") > 0
    assert _count(rig, "cp", other) == 0

    found = await rig.cli("verify", victim)
    assert found.code == 1, found.output
    assert f"{victim}: truncated: the chain holds" in found.output
    assert f"{victim}: bad_checkpoint: log leaf" in found.output
    assert f"its columns (saga '{victim}~'" in found.output
    assert "checkpoint log of" in found.output  # the whole log was read
    gone = await rig.cli("verify", other)
    assert gone.code == 1, gone.output
    assert "(checkpoint log): log_broken" in gone.output
    every = await rig.cli("verify", "--all")
    assert every.code == 1
    assert f"{victim}: truncated" in every.output  # filed under the saga its note names
    clean = await rig.cli("verify", bystander)
    assert clean.code == 1 and "(checkpoint log): log_broken" in clean.output  # one log


async def forged_and_resigned(rig: EvidenceRig, prefix: str) -> tuple[str, NoteSigner]:
    """Two sagas run; the first's amount rewritten with its bytes and hashes made to
    agree, the checkpoints deleted, and the log rebuilt and re-signed with an attacker's
    key of the log's own name. The victim saga, and the attacker's key."""
    victim, _ = await rig.run_sagas(2, prefix)
    attacker = NoteSigner.generate(rig.signer.name)
    rig.tamper.run(
        *updates(rewrite(list(rig.store.entries(victim)), "1250", "9999999")),
        ("DELETE FROM {cp}", ()),
        ("DELETE FROM {nodes}", ()),
        ("DELETE FROM {heads}", ()),
    )
    log = rig.store.checkpoint_log(attacker)
    for saga_id in rig.store.sagas():
        head = rig.store.head(saga_id)
        assert head is not None
        log.record(head)
    assert any("9999999" in e.input_json for e in rig.store.entries(victim))
    return victim, attacker


async def test_verify_refuses_a_log_of_checkpoints_when_no_key_is_known(
    rig: EvidenceRig,
) -> None:
    victim, _ = await forged_and_resigned(rig, "forged")
    assert verify_chain(victim, rig.store.entries(victim)).ok

    for args in (["--all"], [victim]):
        refused = await rig.cli("verify", *args, SAGACITY_LOG_VERIFIER="")
        assert refused.code == 1, refused.output
        assert "holds signed checkpoints, but no log key is known" in refused.stderr
        assert "--skip-signatures" in refused.stderr
    skipped = await rig.cli("verify", "--all", "--skip-signatures", SAGACITY_LOG_VERIFIER="")
    assert skipped.code == 0, skipped.output
    assert "signatures NOT checked (--skip-signatures): they vouch for nothing" in skipped.output
    keyed = await rig.cli("verify", "--all")
    assert keyed.code == 1
    assert f"{victim}: bad_checkpoint" in keyed.output
    both = await rig.cli("verify", "--all", "--skip-signatures", "--log-key", rig.vkey)
    assert both.code == 2 and "contradict" in both.output


def _cosigned(note: str, signer: NoteSigner) -> str:
    """`note` with `signer`'s signature added to its own."""
    parsed = parse_note(note)
    added = parse_note(signer.sign(parsed.text)).signatures
    return SignedNote(parsed.text, parsed.signatures + added).encode()


async def test_a_head_cosigned_by_another_trusted_key_lends_that_log_no_checkpoint(
    rig: EvidenceRig, tmp_path: Path
) -> None:
    """Finding 3 of the second attack: an auditor trusts production's and staging's keys,
    the attacker holds staging's. A checkpoint counted as the head's log when the two
    shared any signer, so staging's cosignature on production's real head let a saga made
    up and signed with staging's key in, as a leaf newer than the head."""
    await rig.run_sagas(2, "cosigned")
    kept = tmp_path / "head.txt"
    kept.write_text((await rig.cli("log", "head")).stdout, encoding="utf-8")
    export = tmp_path / "prod.jsonl"
    assert (await rig.cli("export", "--all", "--out", str(export))).code == 0
    staging = NoteSigner.generate(rig.signer.name)
    both = tmp_path / "both.keys"
    both.write_text(f"{rig.vkey}\n{staging.verifier.encode()}\n", encoding="utf-8")
    lines = export.read_text(encoding="utf-8").splitlines()
    head = json.loads(lines[0])
    size = int(parse_note(head["tree_head"]).text.split("\n")[1])

    bonus = f"bonus-{rig.task_queue}"
    chain = hand_made(bonus, {"phase": Phase.SAGA_OPENED}, {"phase": Phase.SAGA_CLOSED})
    note = sign_saga_checkpoint(
        staging, saga_id=bonus, entries=2, head_hash=chain[1].hash, now=utc_now()
    )
    made_up = [
        json.dumps({"checkpoint": note, "inclusion_proof": None, "log_index": size}),
        *(entry_line(entry) for entry in chain),
    ]
    cosigned = {**head, "tree_head": _cosigned(head["tree_head"], staging)}
    assert len(parse_note(cosigned["tree_head"]).signatures) == 2
    audit = ["--log-key", str(both), "--require-complete", "--known-head", str(kept)]
    two_logs = "(export): log_broken: line 1: tree head: signed by 2 keys you trust"
    foreign = f"{bonus}: bad_checkpoint: line {len(lines) + 1}: a checkpoint signed by"
    for name, first, problem in (("cosigned", cosigned, two_logs), ("plain", head, foreign)):
        forged = tmp_path / f"{name}.jsonl"
        body = [json.dumps(first), *lines[1:], *made_up]
        forged.write_text("\n".join(body) + "\n", encoding="utf-8")
        found = await rig.cli("verify-file", str(forged), *audit)
        assert found.code == 1, found.output
        assert problem in found.output
    honest = await rig.cli("verify-file", str(export), *audit)
    assert honest.code == 0, honest.output
    assert f"log {rig.signer.name} (key {rig.signer.key_hash.hex()})" in honest.output


async def test_a_file_planted_under_the_keys_own_text_does_not_replace_it(
    rig: EvidenceRig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 2 of the second attack: the key text `NAME+HASH+KEY` is also a relative
    path, and a file under that name in the folder the auditor works in (say, the one an
    export came in) was read instead of the key, for --log-key and SAGACITY_LOG_VERIFIER
    alike. Here the journal is rewritten, its log rebuilt and re-signed with the
    attacker's key, exported, and the attacker's key planted under the real key's text."""
    victim, attacker = await forged_and_resigned(rig, "planted")
    folder = tmp_path / "bundle"
    folder.mkdir()
    made = await rig.cli("export", "--all", "--out", str(folder / "all.jsonl"))
    assert made.code == 0, made.output
    planted = folder / rig.vkey
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.write_text(attacker.verifier.encode() + "\n", encoding="utf-8")
    monkeypatch.chdir(folder)

    planted_read = await rig.cli("verify-file", "all.jsonl", "--log-key", f"@{rig.vkey}")
    assert planted_read.code == 0, planted_read.output  # the file does hold a key that passes
    for args in (["--log-key", rig.vkey], []):  # [] : SAGACITY_LOG_VERIFIER, the same text
        offline = await rig.cli("verify-file", "all.jsonl", "--require-complete", *args)
        assert offline.code == 1, offline.output
        assert "(export): log_broken: line 1: tree head: no signature by a known key" in (
            offline.output
        )
        online = await rig.cli("verify", "--all", *args)
        assert online.code == 1, online.output
        assert f"{victim}: bad_checkpoint: log leaf" in online.output
