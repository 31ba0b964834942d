"""`sagacity log head`, `log prove` and `log consistency` attacked where they trusted the
log's stored rows: a leaf's saga_id column relabelled to lend an inserted saga a proof,
a cut saga's checkpoints renamed away, a leaf deleted with its nodes and heads kept, and
a head's size column forged (a traceback, once). Each audits the whole log as `verify`
does, so each fails naming the fault. Done for real on PostgreSQL (superuser, guards
off) and SQLite, each tamper shown to have happened first."""

from __future__ import annotations

from pathlib import Path

from sagacity.journal._phases import Phase
from tests.support.cli import Ran
from tests.support.evidence import EvidenceRig, hand_made


def _leaves(rig: EvidenceRig) -> list[tuple[int, str, int]]:
    rows = rig.tamper.rows("SELECT log_index, saga_id, entries FROM {cp} ORDER BY log_index")
    return [(int(i), str(s), int(n)) for i, s, n in rows]


async def _kept_head(rig: EvidenceRig, tmp_path: Path) -> Path:
    kept = await rig.cli("log", "head")
    assert kept.code == 0, kept.output
    path = tmp_path / "head.txt"
    path.write_text(kept.stdout, encoding="utf-8")
    return path


def _one_line(ran: Ran) -> None:
    assert "Traceback" not in ran.output
    assert len(ran.stderr.strip().splitlines()) == 1, ran.stderr


async def test_log_prove_lends_no_leaf_to_a_saga_its_note_does_not_name(rig: EvidenceRig) -> None:
    victim, lender = await rig.run_sagas(2, "lend")
    assert (await rig.cli("log", "prove", victim)).code == 0
    fake = f"refund-{victim}"
    chain = hand_made(fake, {"phase": Phase.SAGA_OPENED}, {"phase": Phase.SAGA_CLOSED})
    rig.tamper.insert(chain)
    index = next(i for i, saga_id, _ in _leaves(rig) if saga_id == lender)
    rig.tamper.run(
        (
            "UPDATE {cp} SET saga_id=?, entries=2, head_hash=? WHERE log_index=?",
            (fake, chain[1].hash, index),
        )
    )
    assert (index, fake, 2) in _leaves(rig)

    lent = await rig.cli("log", "prove", fake)
    assert lent.code == 1, lent.output
    assert f"{lender}: bad_checkpoint: log leaf {index}: its columns (saga '{fake}'" in (
        lent.stderr
    )
    _one_line(lent)


async def test_log_prove_finds_checkpoints_renamed_away_from_a_cut_saga(rig: EvidenceRig) -> None:
    victim, _ = await rig.run_sagas(2, "renamed")
    rig.tamper.run(
        ("DELETE FROM {journal} WHERE saga_id=? AND phase=?", (victim, "SAGA_CLOSED")),
        ("UPDATE {cp} SET saga_id=? WHERE saga_id=?", (f"{victim}~", victim)),
    )
    assert not [leaf for leaf in _leaves(rig) if leaf[1] == victim]
    assert Phase.SAGA_CLOSED not in {e.phase for e in rig.store.entries(victim)}

    for asked in (victim, f"{victim}~"):
        hidden = await rig.cli("log", "prove", asked)
        assert hidden.code == 1, hidden.output
        assert f"{victim}: bad_checkpoint: log leaf" in hidden.stderr
        assert f"its columns (saga '{victim}~'" in hidden.stderr
        _one_line(hidden)


async def test_log_head_consistency_and_prove_see_a_leaf_deleted_under_kept_nodes(
    rig: EvidenceRig, tmp_path: Path
) -> None:
    await rig.run_sagas(3, "gone")
    kept = await _kept_head(rig, tmp_path)
    last, victim, entries = _leaves(rig)[-1]
    closed = [e.seq for e in rig.store.entries(victim) if e.phase is Phase.SAGA_CLOSED]
    assert closed == [entries]  # the newest leaf is the victim's close checkpoint
    rig.tamper.run(
        ("DELETE FROM {cp} WHERE log_index=?", (last,)),
        ("DELETE FROM {journal} WHERE saga_id=? AND seq=?", (victim, entries)),
    )
    assert _leaves(rig)[-1][0] == last - 1
    assert rig.tamper.rows("SELECT MAX(size) FROM {heads}")[0][0] == last + 1  # heads kept

    for args in (["log", "head"], ["log", "consistency", str(kept)], ["log", "prove", victim]):
        ran = await rig.cli(*args)
        assert ran.code == 1, (args, ran.output)
        assert "(checkpoint log): log_broken: a signed tree head covers" in ran.stderr
        assert "leaves were deleted" in ran.stderr
        _one_line(ran)
    rolled = await rig.cli("log", "consistency", str(kept))
    assert "the log was rolled back" in rolled.stderr


async def test_a_forged_size_column_of_a_head_is_named_not_a_traceback(
    rig: EvidenceRig, tmp_path: Path
) -> None:
    await rig.run_sagas(2, "sized")
    kept = await _kept_head(rig, tmp_path)
    size = int(rig.tamper.rows("SELECT MAX(size) FROM {heads}")[0][0])
    forged = 10**6
    rig.tamper.run(
        ("DELETE FROM {heads} WHERE size=?", (size,)),
        ("UPDATE {heads} SET size=? WHERE size=?", (forged, size - 1)),
    )
    assert rig.tamper.rows("SELECT MAX(size) FROM {heads}")[0][0] == forged

    for args in (["log", "consistency", str(kept)], ["log", "head"]):
        ran = await rig.cli(*args)
        assert ran.code == 1, (args, ran.output)
        assert f"a tree head row's columns (size {forged}, root" in ran.stderr
        assert f"are not what its signed note says (size {size - 1}" in ran.stderr
        _one_line(ran)
    rolled = await rig.cli("log", "consistency", str(kept))
    assert "the log was rolled back" in rolled.stderr
