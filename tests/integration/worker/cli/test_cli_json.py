"""`--json` on every command that prints data, without Temporal: the journal, the
checkpoint log and the approver keys. Each prints one JSON document on stdout and nothing
else there (hints stay on stderr), and exits as the text form does. (The commands that talk
to Temporal: test_cli_json_sagas.py.)"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from sagacity.approval._signing import SigningKey
from sagacity.tlog._note_keys import NoteSigner
from tests.integration.worker.cli.test_cli_log import _journal
from tests.support.cli import Ran, cli_env, invoke_sync


def parsed(ran: Ran, code: int = 0) -> Any:
    assert ran.code == code, ran.output
    return json.loads(ran.stdout)  # the whole of stdout: one JSON document


def _break(db: Path, saga_id: str) -> None:
    con = sqlite3.connect(db)
    con.execute("DROP TRIGGER journal_no_update")
    con.execute("UPDATE journal SET result_json='{\"x\":1}' WHERE saga_id=? AND seq=2", (saga_id,))
    con.commit()
    con.close()


def test_verify_and_verify_file(tmp_path: Path) -> None:
    signer = NoteSigner.generate("acme/log")
    url = _journal(tmp_path, signer)
    env = cli_env(SAGACITY_JOURNAL_URL=url, SAGACITY_LOG_VERIFIER=signer.verifier.encode())
    every = parsed(invoke_sync(["verify", "--all", "--json"], env))
    assert every["ok"] is True and every["journal"] == f"{tmp_path}/journal.db"
    assert (every["sagas"], every["closed"], every["open"], every["broken"]) == (3, 3, [], [])
    assert [r["saga_id"] for r in every["reports"]] == ["s0", "s1", "s2"]
    assert every["evidence"]["signatures_checked"] and every["evidence"]["findings"] == []
    one = parsed(invoke_sync(["verify", "s1", "--json"], env))
    assert one["ok"] and one["report"]["closed"] and one["report"]["entries"] == 2

    out = tmp_path / "all.jsonl"
    assert invoke_sync(["export", "--all", "--out", str(out)], env).code == 0
    offline = parsed(invoke_sync(["verify-file", str(out), "--json"], env))
    assert offline["ok"] and offline["complete"] and offline["sagas"] == 3
    assert offline["decisions"]["problems"] == []

    _break(tmp_path / "journal.db", "s1")
    broken = invoke_sync(["verify", "--all", "--json"], env)
    answer = parsed(broken, code=1)  # the same exit as the text form, JSON still whole
    assert answer["ok"] is False and answer["broken"] == ["s1"]
    assert broken.stderr.startswith("error: ")
    one_broken = parsed(invoke_sync(["verify", "s1", "--json"], env), code=1)
    # The edited column no longer says what the entry's hashed bytes say.
    assert one_broken["report"]["reason"] == "tampered"
    assert one_broken["report"]["first_broken_seq"] == 2


def test_the_log_commands(tmp_path: Path) -> None:
    key_file = tmp_path / "log-key.json"
    made = parsed(invoke_sync(["log", "keygen", "--out", str(key_file), "--json"], cli_env()))
    assert made["file"] == str(key_file) and made["verifier"].startswith(made["name"] + "+")
    env = cli_env(SAGACITY_LOG_KEY=str(key_file))
    assert parsed(invoke_sync(["log", "key", "--json"], env))["verifier"] == made["verifier"]

    url = _journal(tmp_path, NoteSigner.from_file(key_file))
    env = cli_env(SAGACITY_JOURNAL_URL=url, SAGACITY_LOG_VERIFIER=made["verifier"])
    head = parsed(invoke_sync(["log", "head", "--json"], env))
    assert head["size"] == 3 and head["tree_head"].startswith(made["name"] + "\n3\n")
    assert head["journal"] == f"{tmp_path}/journal.db"
    kept = tmp_path / "head.txt"
    kept.write_text(head["tree_head"], encoding="utf-8")  # the text `log head` prints
    same = parsed(invoke_sync(["log", "consistency", str(kept), "--json"], env))
    assert same["old"] == same["new"] == head["tree_head"]
    proved = parsed(invoke_sync(["log", "prove", "s2", "--json"], env))
    assert proved["checkpoints"][0]["log_index"] == 2


def test_the_keys_commands(tmp_path: Path) -> None:
    registry = str(tmp_path / "approvers.json")
    new = parsed(
        invoke_sync(
            ["keys", "new", "--approver", "alice", "--out", str(tmp_path / "a.key"), "--json"], {}
        )
    )
    assert new["approver"] == "alice" and new["file"] == str(tmp_path / "a.key")
    assert SigningKey.from_file(tmp_path / "a.key").key_id == new["key_id"]
    enroll = ["--registry", registry, "--approver", "alice", "--public-key", new["public_key"]]
    enrolled = parsed(invoke_sync(["keys", "enroll", *enroll, "--json"], {}))
    assert enrolled["enrolled"] == new["key_id"] and enrolled["version"] == 1
    listed = parsed(invoke_sync(["keys", "list", "--registry", registry, "--json"], {}))
    assert [(k["key_id"], k["revoked_at"]) for k in listed["keys"]] == [(new["key_id"], None)]
    revoked = invoke_sync(["keys", "revoke", "--registry", registry, new["key_id"], "--json"], {})
    assert parsed(revoked)["keys"][0]["revoked_at"] is not None
