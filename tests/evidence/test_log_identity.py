"""The checkpoint log as the evidence of a saga, attacked where it was trusted too much: by
its name (another log's checkpoint under the same name), by its saga_id column (a
checkpoint renamed or deleted to hide a cut tail from `verify SAGA`), and with no key at
all (a rewritten chain under a log re-signed by the attacker). Each tamper is done for
real on PostgreSQL (superuser, guards off) and SQLite, shown to have happened, and then
found by the command an auditor runs, naming the saga and the fault."""

from __future__ import annotations

import io
import json
from pathlib import Path

from sagacity.audit import export_jsonl
from sagacity.chain import verify_chain
from sagacity.entry import EntryDraft
from sagacity.note_keys import NoteSigner
from sagacity.phases import Phase
from sagacity.stores import open_store
from tests.evidence.conftest import EvidenceRig, rewrite, updates


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


async def test_verify_refuses_a_log_of_checkpoints_when_no_key_is_known(
    rig: EvidenceRig,
) -> None:
    victim, _ = await rig.run_sagas(2, "forged")
    chain = list(rig.store.entries(victim))
    forged = rewrite(chain, "1250", "9999999")
    attacker = NoteSigner.generate(rig.signer.name)
    rig.tamper.run(
        *updates(forged),
        ("DELETE FROM {cp}", ()),
        ("DELETE FROM {nodes}", ()),
        ("DELETE FROM {heads}", ()),
    )
    log = rig.store.checkpoint_log(attacker)
    for saga_id in rig.store.sagas():  # the log rebuilt and re-signed with the attacker's key
        head = rig.store.head(saga_id)
        assert head is not None
        log.record(head)
    assert any("9999999" in e.input_json for e in rig.store.entries(victim))
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
