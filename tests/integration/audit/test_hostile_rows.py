"""Rows and files an attacker writes to break the verifier rather than fool the chain: an
export stripped of every evidence line, payloads that are not JSON or nested far too
deep, saga ids that draw a fake summary or restyle the terminal. Done for real (PostgreSQL
as superuser with the guards off, and SQLite), shown to be in the journal, then run
through verify and verify-file: each is reported, never a traceback, never a pass that
claims more than was checked."""

from __future__ import annotations

import json
import re
from pathlib import Path

from sagacity.journal._phases import Phase
from sagacity.journal._recipe import decode_material
from tests.support.evidence import EvidenceRig, hand_made


async def test_an_export_stripped_of_its_evidence_says_so_or_is_refused(
    rig: EvidenceRig, tmp_path: Path
) -> None:
    victim, _ = await rig.run_sagas(2, "stripped")
    export = tmp_path / "all.jsonl"
    assert (await rig.cli("export", "--all", "--out", str(export))).code == 0
    kept = []
    for line in export.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if "tree_head" in record or "checkpoint" in record:
            continue
        if record["saga_id"] == victim and record["phase"] == Phase.SAGA_CLOSED.value:
            continue  # and the victim cut back to look open
        kept.append(line)
    stripped = tmp_path / "stripped.jsonl"
    stripped.write_text("\n".join(kept) + "\n", encoding="utf-8")
    assert '"tree_head"' in export.read_text() and '"tree_head"' not in stripped.read_text()

    bare = await rig.cli("verify-file", str(stripped), SAGACITY_LOG_VERIFIER="")
    assert bare.code == 0, bare.output  # with no key, nothing says what was removed...
    assert "NO checkpoint evidence in this export, so only the chains vouch for it" in (
        bare.output
    )  # ...and the summary says so
    keyed = await rig.cli("verify-file", str(stripped))
    assert keyed.code == 1 and "(export): log_broken: the file carries no signed tree head" in (
        keyed.output
    )
    complete = await rig.cli("verify-file", str(stripped), "--require-complete")
    assert complete.code == 1


async def test_payloads_no_worker_writes_are_unreadable_not_a_crash(
    rig: EvidenceRig, tmp_path: Path
) -> None:
    (honest,) = await rig.run_sagas(1, "honest")
    deep = "[" * 200_000 + "]" * 200_000
    opened = {"phase": Phase.SAGA_OPENED}
    rig.tamper.insert(
        [
            *hand_made("bad-input", {**opened, "input": "{"}),
            *hand_made("bad-actor", opened, {"phase": Phase.EXECUTED, "actor": "{x"}),
            *hand_made(
                "bad-result", opened, {"phase": Phase.APPROVED, "result": "[", "actor": '"a"'}
            ),
            *hand_made("deep-input", {**opened, "input": deep}),
            *hand_made("deepish", {**opened, "input": "[" * 300 + "]" * 300}),
        ]
    )
    rows = rig.tamper.rows("SELECT saga_id, material FROM {journal} WHERE seq=1")
    stored = {saga: decode_material(bytes(material))["input_json"] for saga, material in rows}
    assert stored["bad-input"] == "{" and stored["deep-input"] == deep  # in the hashed bytes

    for ran in (await rig.cli("verify", "--all"), await rig.cli("verify", "bad-input")):
        assert ran.code == 1, ran.output
        assert "Traceback" not in ran.output
    every = await rig.cli("verify", "--all")
    assert f"{honest}: " not in every.output.replace(f"verified {honest}", "")
    # A payload is read from the hashed bytes (held to one JSON value where the row is
    # read); the actor is a column too, read with the entry.
    for saga_id, seq, why in (
        ("bad-input", 1, "its input_json payload is not one JSON value"),
        ("bad-actor", 2, "its actor is not JSON"),
        ("bad-result", 2, "its result_json payload is not one JSON value"),
        ("deep-input", 1, "its input_json payload is not one JSON value"),
        ("deepish", 1, "its input is nested more than 256 levels deep"),
    ):
        found = re.escape(f"BROKEN {saga_id}: first broken seq {seq} (unreadable): ")
        found += f"(saga '{re.escape(saga_id)}' seq {seq}: )?" + re.escape(why)
        assert re.search(found, every.output), (saga_id, every.output)
    assert "6 sagas" in every.output and "5 broken" in every.output

    # Export writes no line a reader could take two ways: it refuses, naming the row.
    export = tmp_path / "all.jsonl"
    refused = await rig.cli("export", "--all", "--out", str(export))
    assert refused.code == 1 and "Traceback" not in refused.output
    assert "saga 'bad-input' seq 1: its input_json payload is not one JSON value" in (
        refused.output
    )
    exported = await rig.cli("export", honest, "--out", str(export))
    assert (
        exported.code == 0
        and f"verified {honest}" in (await rig.cli("verify-file", str(export))).output
    )


async def test_saga_ids_cannot_draw_lines_or_restyle_the_terminal(
    rig: EvidenceRig, tmp_path: Path
) -> None:
    await rig.run_sagas(1, "honest")
    fake_summary = "zz\nverified 9 sagas, 70 entries: 9 closed, 0 open (x)\x1b[8m"
    reversed_id = "gpj.\u202eexe"
    rig.tamper.insert(
        [
            *hand_made(fake_summary, {"phase": Phase.SAGA_OPENED}),
            *hand_made(reversed_id, {"phase": Phase.SAGA_OPENED}),
        ]
    )
    assert {fake_summary, reversed_id} <= set(rig.store.sagas())

    export = tmp_path / "all.jsonl"
    assert (await rig.cli("export", "--all", "--out", str(export))).code == 0
    for ran in (
        await rig.cli("verify", "--all", "-v"),
        await rig.cli("verify", fake_summary),
        await rig.cli("verify-file", str(export)),
        await rig.cli("log", "prove", fake_summary),
    ):
        assert "\x1b" not in ran.output and "\u202e" not in ran.output, ran.output
        assert "\nverified 9 sagas" not in ran.output
        assert "zz\\u000averified 9 sagas" in ran.output or "zz\\nverified" in ran.output
    listed = await rig.cli("verify-file", str(export))
    assert "open: gpj.\\u202eexe (1 entries" in listed.output
    assert "open: zz\\u000averified 9 sagas, 70 entries: 9 closed, 0 open (x)\\u001b[8m" in (
        listed.output
    )
