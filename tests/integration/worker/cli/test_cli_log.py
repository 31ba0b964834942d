"""`sagacity log …` and the evidence options of `verify`, without Temporal: a SQLite
journal written here, the key made by `log keygen`, and every user mistake answered with
one line and exit 1."""

from __future__ import annotations

import json
from pathlib import Path

from sagacity.audit._export import entry_line
from sagacity.journal._chain import GENESIS, seal
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import open_store
from sagacity.stores._base import utc_now
from sagacity.tlog._note_keys import NoteSigner
from tests.support.cli import cli_env, invoke_sync


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


def test_verify_file_with_a_kept_head_and_require_complete(tmp_path: Path) -> None:
    """The auditor's options: --known-head (the export must extend a head kept earlier),
    --require-complete (a partial export cannot show an omission), and a saga made up in
    the file with no checkpoint, which passes but is counted as vouched for by nothing."""
    signer = NoteSigner.generate("acme/log")
    url = _journal(tmp_path, signer)
    env = cli_env(SAGACITY_JOURNAL_URL=url, SAGACITY_LOG_VERIFIER=signer.verifier.encode())
    kept = tmp_path / "head.txt"
    kept.write_text(invoke_sync(["log", "head"], env).stdout, encoding="utf-8")
    store = open_store(url)
    log = store.checkpoint_log(signer)
    store.append(EntryDraft.new("s3", Phase.SAGA_OPENED))
    log.record(store.append(EntryDraft.new("s3", Phase.SAGA_CLOSED, result={})))
    store.close()
    whole, one = tmp_path / "all.jsonl", tmp_path / "one.jsonl"
    assert invoke_sync(["export", "--all", "--out", str(whole)], env).code == 0
    assert invoke_sync(["export", "s1", "--out", str(one)], env).code == 0

    key = ["--log-key", signer.verifier.encode(), "--known-head", str(kept)]
    full = invoke_sync(["verify-file", str(whole), "--require-complete", *key], env)
    assert full.code == 0, full.output
    assert (
        f"complete export: every leaf of the tree head of log {signer.name} "
        f"(key {signer.key_hash.hex()}) of size 4" in full.output
    )
    assert "the export's head extends your known head of size 3" in full.output
    part = invoke_sync(["verify-file", str(one), *key], env)
    assert part.code == 0, part.output
    assert "head not checked against (a partial export cannot prove it" in part.output
    assert "partial export: a checkpoint left out of it cannot be seen" in part.stderr
    strict = invoke_sync(["verify-file", str(one), "--require-complete", *key], env)
    assert strict.code == 1 and "is not a complete export" in strict.stderr

    # A saga made up in the file, open, with no checkpoint: its hashes are right (anyone
    # can compute them), so it passes; the summary says nothing but its chain vouches.
    forged = seal(
        EntryDraft.new("ghost", Phase.SAGA_OPENED), seq=1, prev_hash=GENESIS,
        recorded_at=utc_now(),
    )  # fmt: skip
    with_ghost = tmp_path / "ghost.jsonl"
    with_ghost.write_text(whole.read_text(encoding="utf-8") + entry_line(forged) + "\n")
    ghost = invoke_sync(["verify-file", str(with_ghost), "--require-complete", *key], env)
    assert ghost.code == 0, ghost.output
    assert "1 open chain(s) with no checkpoint: the chain alone vouches" in ghost.output
    assert "open: ghost (1 entries" in ghost.stdout

    kept.write_bytes(kept.read_bytes().replace(b"\n", b"\r\n"))
    crlf = invoke_sync(["verify-file", str(whole), *key], env)
    assert crlf.code == 1 and "head.txt: holds a carriage return" in crlf.stderr, crlf.output
    assert len(crlf.stderr.strip().splitlines()) == 1


def test_keygen_names_each_log_its_own(tmp_path: Path) -> None:
    """Two deployments set up with the defaults no longer share a log name."""
    made = [
        invoke_sync(["log", "keygen", "--out", str(tmp_path / f"k{i}.json")], cli_env())
        for i in range(2)
    ]
    names = [ran.stdout.split("+", 1)[0] for ran in made]
    assert all(ran.code == 0 for ran in made), made
    assert names[0] != names[1]
    assert all(name.startswith("sagacity.local/journal-") for name in names)


def test_verify_with_checkpoints_and_no_key_known_is_refused(tmp_path: Path) -> None:
    """Anyone who can write the log's tables can sign checkpoints of their own: with no
    key to check them they are refused, as verify-file refuses them (exit 1, one line)."""
    url = _journal(tmp_path, NoteSigner.generate("acme/log"))
    env = cli_env(SAGACITY_JOURNAL_URL=url)
    for args in (["verify", "--all"], ["verify", "s1"]):
        refused = invoke_sync(args, env)
        assert refused.code == 1, refused.output
        assert "holds signed checkpoints, but no log key is known" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
    skipped = invoke_sync(["verify", "--all", "--skip-signatures"], env)
    assert skipped.code == 0, skipped.output
    assert "signatures NOT checked (--skip-signatures): they vouch for nothing" in skipped.output


def test_consistency_with_a_kept_head_of_another_key_of_the_same_name_is_refused(
    tmp_path: Path,
) -> None:
    staging, prod = NoteSigner.generate("acme/log"), NoteSigner.generate("acme/log")
    (tmp_path / "staging").mkdir()
    staging_url = _journal(tmp_path / "staging", staging)
    both = f"{staging.verifier.encode()}\n{prod.verifier.encode()}\n"
    (tmp_path / "both.keys").write_text(both, encoding="utf-8")
    kept = invoke_sync(
        ["log", "head"], cli_env(SAGACITY_JOURNAL_URL=staging_url, SAGACITY_LOG_VERIFIER=both)
    )
    assert kept.code == 0, kept.output
    (tmp_path / "staging-head.txt").write_text(kept.stdout, encoding="utf-8")
    env = cli_env(
        SAGACITY_JOURNAL_URL=_journal(tmp_path, prod),
        SAGACITY_LOG_VERIFIER=str(tmp_path / "both.keys"),
    )
    ran = invoke_sync(["log", "consistency", str(tmp_path / "staging-head.txt")], env)
    assert ran.code == 1, ran.output
    assert f"signed by acme/log (key {staging.key_hash.hex()})" in ran.stderr
    assert "this is another log" in ran.stderr
