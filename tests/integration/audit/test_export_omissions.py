"""Omissions an owner of the database makes before an export is taken, done for real (guards
off, rows deleted, read back), on PostgreSQL and SQLite: a closed saga cut back to look
open with the checkpoints that would betray it, a saga deleted with its checkpoints, a
saga deleted alone. A complete export (`export --all`) shows each; a partial export of
the victim alone cannot, and says so (shown)."""

from __future__ import annotations

from pathlib import Path

from tests.support.evidence import EvidenceRig


def _count(rig: EvidenceRig, table: str, saga_id: str) -> int:
    rows = rig.tamper.rows(f"SELECT COUNT(*) FROM {{{table}}} WHERE saga_id=?", (saga_id,))
    return int(rows[0][0])


async def _verify_export(rig: EvidenceRig, out: Path, *what: str) -> tuple[int, str]:
    made = await rig.cli("export", *what, "--out", str(out))
    assert made.code == 0, made.output
    checked = await rig.cli("verify-file", str(out), "--log-key", rig.vkey)
    return checked.code, checked.output


async def test_a_saga_cut_back_to_look_open_shows_in_a_complete_export(
    rig: EvidenceRig, tmp_path: Path
) -> None:
    victim, bystander = await rig.run_sagas(2, "cutback")
    total = _count(rig, "journal", victim)
    cut = total - 2
    rig.tamper.run(
        ("DELETE FROM {journal} WHERE saga_id=? AND seq>?", (victim, cut)),
        ("DELETE FROM {cp} WHERE saga_id=? AND entries>?", (victim, cut)),
    )
    assert _count(rig, "journal", victim) == cut  # its SAGA_CLOSED is gone
    remaining = rig.tamper.rows("SELECT MAX(entries) FROM {cp} WHERE saga_id=?", (victim,))
    assert remaining[0][0] is None or remaining[0][0] <= cut  # nothing left to betray it

    code, output = await _verify_export(rig, tmp_path / "victim.jsonl", victim)
    assert code == 0, output  # alone, the victim looks like a saga still running
    assert f"{victim}: {cut} entries, chain unbroken but OPEN" in output
    assert "partial export: a checkpoint left out of it cannot be seen" in output

    code, output = await _verify_export(rig, tmp_path / "all.jsonl", "--all")
    assert code == 1
    assert "(export): log_broken: this complete export holds" in output
    assert "is the first missing: checkpoints were removed" in output
    assert f"{bystander}: " not in output.replace(f"verified {bystander}", "")


async def test_a_saga_deleted_with_its_checkpoints_shows_in_a_complete_export(
    rig: EvidenceRig, tmp_path: Path
) -> None:
    (victim,) = await rig.run_sagas(1, "vanish")
    rig.tamper.run(
        ("DELETE FROM {journal} WHERE saga_id=?", (victim,)),
        ("DELETE FROM {cp} WHERE saga_id=?", (victim,)),
    )
    assert _count(rig, "journal", victim) == 0 and _count(rig, "cp", victim) == 0

    code, output = await _verify_export(rig, tmp_path / "all.jsonl", "--all")
    assert code == 1
    assert "(export): log_broken: this complete export holds 0 of the" in output
    assert victim not in output  # nothing of it is left to name; the gap is the evidence


async def test_a_deleted_saga_is_named_by_its_checkpoints_in_a_complete_export(
    rig: EvidenceRig, tmp_path: Path
) -> None:
    victim, _ = await rig.run_sagas(2, "deleted")
    rig.tamper.run(("DELETE FROM {journal} WHERE saga_id=?", (victim,)))
    assert _count(rig, "journal", victim) == 0 and _count(rig, "cp", victim) > 0

    code, output = await _verify_export(rig, tmp_path / "all.jsonl", "--all")
    assert code == 1
    assert f"{victim}: deleted: the journal holds no entry of this saga" in output
