"""No false alarms: honest sagas (completed, compensated, continued as new) verify with
every kind of evidence, on PostgreSQL and SQLite, online and from an export."""

from __future__ import annotations

from pathlib import Path

from tests.support.evidence import EvidenceRig


async def test_honest_sagas_verify_with_every_kind_of_evidence(
    rig: EvidenceRig, tmp_path: Path
) -> None:
    count = 200 if rig.kind == "postgres" else 30
    first = await rig.run_sagas(count // 2, "honest")
    kept = await rig.cli("log", "head")
    assert kept.code == 0, kept.output
    (tmp_path / "head-1.txt").write_text(kept.stdout, encoding="utf-8")
    second = await rig.run_sagas(count - count // 2, "honest")
    ids = first + second
    statuses = [rig.results[saga_id].status.value for saga_id in ids]
    kinds = ("COMPLETED", "COMPENSATED", "COMPLETED")  # plan_for(i), per run_sagas call
    expected = [kinds[i % 3] for i in range(count // 2)] * 2
    assert statuses == expected
    assert all(r.checkpoint for r in rig.results.values()), "every result carries its checkpoint"
    continued = 0
    for saga_id in ids[2:30:3]:
        history = await rig.client.get_workflow_handle(saga_id).fetch_history()
        started = history.events[0].workflow_execution_started_event_attributes
        continued += bool(started.continued_execution_run_id)
    assert continued == len(ids[2:30:3]), "their last run continues another"

    verified = await rig.cli("verify", "--all", "--witness", "temporal", "--require-closed")
    assert verified.code == 0, verified.output
    assert f"verified {count} sagas" in verified.output
    key = f"sagacity.test/evidence (key {rig.signer.key_hash.hex()})"
    assert f"checkpoints of {count} saga(s) (signatures checked with {key})" in verified.output
    assert "checkpoint log of" in verified.output and "signed tree head" in verified.output
    runs = count + 2 * len(ids[2::3])  # five steps, continued as new every two: three runs
    assert f"Temporal history of {count} saga(s) ({runs} saga run(s) read" in verified.output
    assert "more than once" not in verified.output  # continued as new is one start
    assert "no saga" not in verified.output  # every run under the ids is a saga's

    grown = await rig.cli("log", "consistency", str(tmp_path / "head-1.txt"))
    assert grown.code == 0, grown.output
    assert "only by appending" in grown.output
    proved = await rig.cli("log", "prove", ids[-1])
    assert proved.code == 0 and "proof of" in proved.output, proved.output
    head_now = await rig.cli("log", "head")
    assert head_now.code == 0 and "rebuilt from the log's leaves" in head_now.output

    export = tmp_path / "all.jsonl"
    exported = await rig.cli("export", "--all", "--out", str(export))
    assert exported.code == 0, exported.output
    kept = str(tmp_path / "head-1.txt")
    checked = await rig.cli(
        "verify-file",
        str(export),
        "--log-key",
        rig.vkey,
        "--require-complete",
        "--known-head",
        kept,
    )
    assert checked.code == 0, checked.output
    head = rig.store.checkpoint_log().head()
    assert head is not None and head.size > count  # the closes and the periodic ones
    proofs = f"{head.size} checkpoint(s) (signatures checked with {key}); "
    proofs += f"complete export: every leaf of the tree head of log {key} of size {head.size}, "
    proofs += f"{head.size} inclusion proof(s) checked; the export's head extends your known head"
    assert proofs in checked.output
