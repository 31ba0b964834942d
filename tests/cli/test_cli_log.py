"""`sagacity log …` and the evidence options of `verify`, without Temporal: a SQLite
journal written here, the key made by `log keygen`, and every user mistake answered with
one line and exit 1."""

from __future__ import annotations

import json
from pathlib import Path

from sagacity.entry import EntryDraft
from sagacity.note_keys import NoteSigner
from sagacity.phases import Phase
from sagacity.stores import open_store
from tests.cli.conftest import cli_env, invoke_sync


def _journal(tmp_path: Path, signer: NoteSigner | None, sagas: int = 3) -> str:
    url = f"sqlite:///{tmp_path}/journal.db"
    store = open_store(url)
    log = store.checkpoint_log(signer)
    for i in range(sagas):
        store.append(EntryDraft.new(f"s{i}", Phase.SAGA_OPENED))
        close = store.append(EntryDraft.new(f"s{i}", Phase.SAGA_CLOSED, result={}))
        if signer is not None:
            log.record(close)
    store.close()
    return url


def test_keygen_key_and_the_log_commands(tmp_path: Path) -> None:
    key_file = tmp_path / "log-key.json"
    made = invoke_sync(["log", "keygen", "--out", str(key_file), "--name", "acme/log"], cli_env())
    assert made.code == 0, made.output
    vkey = made.stdout.strip()
    assert vkey.startswith("acme/log+") and oct(key_file.stat().st_mode & 0o777) == "0o600"
    again = invoke_sync(["log", "keygen", "--out", str(key_file)], cli_env())
    assert again.code == 1 and "never overwritten" in again.stderr
    env = cli_env(SAGACITY_LOG_KEY=str(key_file))
    assert invoke_sync(["log", "key"], env).stdout.strip() == vkey

    url = _journal(tmp_path, NoteSigner.from_file(key_file))
    env = cli_env(SAGACITY_JOURNAL_URL=url, SAGACITY_LOG_VERIFIER=vkey)
    head = invoke_sync(["log", "head"], env)
    assert head.code == 0 and head.stdout.startswith("acme/log\n3\n"), head.output
    (tmp_path / "head.txt").write_text(head.stdout, encoding="utf-8")
    proved = invoke_sync(["log", "prove", "s1", "--json"], env)
    assert json.loads(proved.stdout)["checkpoints"][0]["log_index"] == 1
    same = invoke_sync(["log", "consistency", str(tmp_path / "head.txt")], env)
    assert same.code == 0 and "from 3 to 3 checkpoints" in same.stdout
    verified = invoke_sync(["verify", "--all"], env)
    assert verified.code == 0 and "checkpoints of 3 saga(s)" in verified.output


def test_mistakes_get_one_line(tmp_path: Path) -> None:
    url = _journal(tmp_path, None)
    env = cli_env(SAGACITY_JOURNAL_URL=url)
    cases = [
        (["log", "head"], "no log key to check signatures with"),
        (["log", "head", "--log-key", "nonsense"], "neither a verifier key"),
        (["verify", "s0", "--witness", "bogus"], "the only witness is 'temporal'"),
        (["log", "key"], "no log key here"),
    ]
    signer = NoteSigner.generate("acme/log")
    (tmp_path / "junk.txt").write_text("not a note\n", encoding="utf-8")
    keyed = cli_env(SAGACITY_JOURNAL_URL=url, SAGACITY_LOG_VERIFIER=signer.verifier.encode())
    keyed_cases = [
        (["log", "head"], "is empty: no saga was checkpointed yet"),
        (["log", "consistency", str(tmp_path / "junk.txt")], "junk.txt: tree head:"),
        (["log", "prove", "s0"], "is empty"),
    ]
    for args, message, where in [(a, m, env) for a, m in cases] + [
        (a, m, keyed) for a, m in keyed_cases
    ]:
        ran = invoke_sync(args, where)
        assert ran.code == 1, (args, ran.output)
        assert message in ran.stderr and "Traceback" not in ran.output, (args, ran.output)
        assert len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    # No key known and an empty log: closed sagas are not expected to be checkpointed.
    plain = invoke_sync(["verify", "--all"], env)
    assert plain.code == 0 and "the checkpoint log is empty and no log key is known" in (
        plain.output
    )
