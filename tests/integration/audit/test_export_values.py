"""The export format on a real journal: sagas run on the dev server, a worker signing
checkpoints, `sagacity export` run as a user runs it and read by jq and by Python's json;
then the file edited the ways an attacker would, and a row written by hand that is not
canonical JSON, exported verbatim. On PostgreSQL and SQLite.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from sagacity.journal._chain import GENESIS, seal
from sagacity.journal._entry import EntryDraft, render_timestamp
from sagacity.journal._phases import Phase
from sagacity.stores._base import utc_now
from tests.support.cli import cli_env
from tests.support.evidence import EvidenceRig

JQ = "/usr/bin/jq"
CHARGE_INPUT = '"input":{"amount":1250,"card":"tok_visa","currency":"EUR"}'


def _export_through(rig: EvidenceRig, cwd: Path, *program: str) -> str:
    """`sagacity export --all | PROGRAM`, both real processes; returns what PROGRAM printed."""
    env = cli_env(**rig.env)
    with subprocess.Popen(
        [sys.executable, "-m", "sagacity.worker", "export", "--all"],
        env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    ) as export:  # fmt: skip
        assert export.stdout is not None and export.stderr is not None
        reader = subprocess.run(
            program, stdin=export.stdout, capture_output=True, text=True, timeout=120
        )
        export.stdout.close()
        stderr = export.stderr.read().decode()
        assert export.wait(timeout=120) == 0, stderr
    assert reader.returncode == 0, reader.stderr
    return reader.stdout


async def test_jq_and_json_read_the_values_of_a_real_export(
    rig: EvidenceRig, tmp_path: Path
) -> None:
    ids = await rig.run_sagas(6, "values")
    charges = sorted(
        [e.saga_id, e.input["amount"], e.input["currency"], True, True]
        for saga_id in ids
        for e in rig.store.entries(saga_id)
        if e.phase is Phase.INTENT and e.tool == "charge_card"
    )
    assert len(charges) >= 6 and {c[1] for c in charges} == {1250}

    query = (
        'select(.format == 1 and .phase == "INTENT" and .tool == "charge_card") '
        "| [.saga_id, .input.amount, .input.currency, .actor == null, .error == null]"
    )
    out = await asyncio.to_thread(_export_through, rig, tmp_path, JQ, "-c", query)
    assert sorted(json.loads(line) for line in out.splitlines()) == charges

    query = 'select(.phase == "SAGA_CLOSED") | [.saga_id, .result.status, .result.needs_human]'
    out = await asyncio.to_thread(_export_through, rig, tmp_path, JQ, "-c", query)
    closed = {tuple(json.loads(line)) for line in out.splitlines()}
    assert closed == {(s, rig.results[s].status.value, False) for s in ids}

    # Evidence lines are unchanged: the tree head first, checkpoints before entries.
    kinds = await asyncio.to_thread(
        _export_through, rig, tmp_path, JQ, "-r",
        'if .tree_head then "head" elif .checkpoint then "checkpoint" else "entry \\(.format)" end',
    )  # fmt: skip
    kinds_seen = kinds.splitlines()
    assert kinds_seen[0] == "head" and set(kinds_seen[1:]) == {"checkpoint", "entry 1"}

    # Python's json reads the same values the journal holds.
    export = tmp_path / "all.jsonl"
    assert (await rig.cli("export", "--all", "--out", str(export))).code == 0
    records = [json.loads(line) for line in export.read_text(encoding="utf-8").splitlines()]
    entries = {(r["saga_id"], r["seq"]): r for r in records if r.get("format") == 1}
    for saga_id in ids:
        for e in rig.store.entries(saga_id):
            record = entries.pop((saga_id, e.seq))
            values = (e.input, e.result, e.error, e.actor)
            assert (record["input"], record["result"], record["error"], record["actor"]) == values
            assert record["hash"] == e.hash
    assert entries == {}
    checked = await rig.cli("verify-file", str(export), "--log-key", rig.vkey, "--require-complete")
    assert checked.code == 0, checked.output
    assert f"verified {len(ids)} sagas" in checked.output


async def test_a_real_export_edited_is_refused_or_broken_naming_the_line(
    rig: EvidenceRig, tmp_path: Path
) -> None:
    await rig.run_sagas(3, "attack")
    export = tmp_path / "all.jsonl"
    assert (await rig.cli("export", "--all", "--out", str(export))).code == 0
    honest = export.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, line in enumerate(honest) if CHARGE_INPUT in line)
    number = at + 1
    canonical = json.dumps(json.dumps({"amount": 1250, "card": "tok_visa", "currency": "EUR"},
                                      separators=(",", ":")))  # fmt: skip
    as_text = f'"input_text":{canonical}'
    both = "holds both {0} and {0}_text".format
    amount, card, actor = '"amount":1250,', '"card":"tok_visa",', '"actor":null,'
    edits = {
        "an amount changed": (amount, '"amount":1251,', "(hash_mismatch)"),
        "keys reordered in input": ("{" + amount + card, "{" + card + amount, "field input"),
        "1250 as 1250.0": (amount, '"amount":1250.0,', "field input"),
        "1250 as 1.25e3": (amount, '"amount":1.25e3,', "field input"),
        "a _text beside its value": (actor, f'{actor}"actor_text":"x",', both("actor")),
        "input and input_text": (CHARGE_INPUT, f"{CHARGE_INPUT},{as_text}", both("input")),
        "the value swapped for its text": (
            CHARGE_INPUT,
            as_text,
            "input_text holds canonical JSON",
        ),
        "a key repeated in input": (amount, amount + amount, "duplicate field 'amount'"),
        "a field repeated": ('"format":1,', '"format":1,"format":1,', "duplicate field 'format'"),
        "the format marker dropped": ('"format":1,', "", "missing field format"),
    }
    for name, (old, new, expected) in edits.items():
        lines = list(honest)
        assert lines[at].count(old) == 1, name
        lines[at] = lines[at].replace(old, new)
        edited = tmp_path / f"{name.replace(' ', '-')}.jsonl"
        edited.write_text("".join(lines), encoding="utf-8")
        ran = await rig.cli("verify-file", str(edited), "--log-key", rig.vkey)
        assert ran.code == 1, (name, ran.output)
        assert f"line {number}: " in ran.output and expected in ran.output, (name, ran.output)
    honest_file = tmp_path / "honest.jsonl"
    honest_file.write_text("".join(honest), encoding="utf-8")
    assert (await rig.cli("verify-file", str(honest_file), "--log-key", rig.vkey)).code == 0


async def test_a_hand_written_row_that_is_not_canonical_goes_out_verbatim_and_verifies(
    rig: EvidenceRig, tmp_path: Path
) -> None:
    await rig.run_sagas(1, "real")
    legacy = "legacy-row"
    text = '{"goal": "refund", "amount": 5000.0}'  # spaces and 5000.0: not RFC 8785
    draft = EntryDraft(legacy, 0, 1, "", Phase.SAGA_OPENED, text, "null", "null", '"ops"')
    # A row written by a tool that did not canonicalize, its bytes and hash right.
    row = seal(draft, seq=1, prev_hash=GENESIS, recorded_at=utc_now())
    rig.tamper.run(
        (
            "INSERT INTO {journal} (saga_id, seq, step, attempt, tool, phase, input_json, "
            "result_json, error_json, actor_json, recorded_at, prev_hash, hash, material) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                row.saga_id, row.seq, row.step, row.attempt, row.tool, row.phase.value,
                "", "", "", row.actor_json, render_timestamp(row.recorded_at),
                row.prev_hash, row.hash, row.material,
            ),
        )
    )  # fmt: skip
    [stored] = list(rig.store.entries(legacy))
    assert stored.input_json == text and stored.hash == row.hash

    export = tmp_path / "all.jsonl"
    assert (await rig.cli("export", "--all", "--out", str(export))).code == 0
    lines = export.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if f'"saga_id":"{legacy}"' in line)
    record = json.loads(lines[at])
    assert record["input_text"] == text and "input" not in record
    assert record["actor"] == "ops" and record["result"] is None
    checked = await rig.cli("verify-file", str(export), "--log-key", rig.vkey)
    assert checked.code == 0, checked.output
    assert f"verified {legacy}: 1 entries, chain unbroken but OPEN" in checked.output
    assert "1 open chain(s) with no checkpoint: the chain alone vouches" in checked.output

    lines[at] = lines[at].replace("5000.0", "5001.0")
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(lines), encoding="utf-8")
    broken = await rig.cli("verify-file", str(edited), "--log-key", rig.vkey)
    assert broken.code == 1
    assert f"{legacy}: first broken seq 1 (hash_mismatch): line {at + 1}: " in broken.output

    lines[at] = lines[at].replace(
        f'"input_text":{json.dumps(text.replace("5000.0", "5001.0"))}',
        '"input":{"amount":5000,"goal":"refund"}',
    )  # the value it "means": other bytes than the ones hashed
    edited.write_text("".join(lines), encoding="utf-8")
    recanonicalized = await rig.cli("verify-file", str(edited), "--log-key", rig.vkey)
    assert recanonicalized.code == 1
    assert f"seq 1 (hash_mismatch): line {at + 1}: " in recanonicalized.output
