"""verify-file's log key, attacked as an auditor following the README would be.

A file of checkpoints vouches for nothing until their signatures are checked: anyone can
sign their own under the log's name. So the key comes from --log-key, else
SAGACITY_LOG_VERIFIER, as the docs say; with none known a file that carries checkpoints
is refused unless --skip-signatures says what is given up. And whatever a saga id says,
it is printed, never read as markup."""

from __future__ import annotations

import io
from pathlib import Path

from sagacity.audit._export import export_jsonl
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import open_store
from sagacity.tlog._note_keys import NoteSigner
from tests.support.cli import cli_env, invoke_sync

LOG = "acme/log"


def _exported(tmp_path: Path, name: str, signer: NoteSigner, *ids: str) -> Path:
    """A journal of closed sagas `ids`, checkpointed by `signer`, exported complete."""
    store = open_store(f"sqlite:///{tmp_path}/{name}.db")
    log = store.checkpoint_log(signer)
    for saga_id in ids:
        store.append(EntryDraft.new(saga_id, Phase.SAGA_OPENED))
        store.append(EntryDraft.new(saga_id, Phase.EXECUTED, step=1, tool="t", result=saga_id))
        log.record(store.append(EntryDraft.new(saga_id, Phase.SAGA_CLOSED, result={})))
    out = io.StringIO()
    export_jsonl(store, out, log=log, head=log.head())
    store.close()
    path = tmp_path / f"{name}.jsonl"
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


def test_the_verifier_key_of_the_environment_checks_the_file(tmp_path: Path) -> None:
    """A forged export, signed from scratch with the attacker's own key under the log's
    name, is refused with SAGACITY_LOG_VERIFIER alone (it passed before: only --log-key
    was read); the honest export passes with the same setting."""
    real, forger = NoteSigner.generate(LOG), NoteSigner.generate(LOG)
    honest = _exported(tmp_path, "honest", real, "order-1")
    forged = _exported(tmp_path, "forged", forger, "order-1", "refund-to-attacker")
    env = cli_env(
        SAGACITY_JOURNAL_URL=f"sqlite:///{tmp_path}/none.db",
        SAGACITY_LOG_VERIFIER=real.verifier.encode(),
    )
    for args in ([], ["--require-complete"]):
        ran = invoke_sync(["verify-file", str(forged), *args], env)
        assert ran.code == 1, ran.output
        assert "bad_checkpoint" in ran.output and "Traceback" not in ran.output
        good = invoke_sync(["verify-file", str(honest), *args], env)
        assert good.code == 0, good.output
        assert f"signatures checked with {LOG}" in good.output


def test_a_file_of_checkpoints_with_no_key_known_is_refused(tmp_path: Path) -> None:
    forged = _exported(tmp_path, "forged", NoteSigner.generate(LOG), "order-1")
    env = cli_env(SAGACITY_JOURNAL_URL=f"sqlite:///{tmp_path}/none.db")
    refused = invoke_sync(["verify-file", str(forged)], env)
    assert refused.code == 1, refused.output
    assert "no log key is known" in refused.stderr and "--log-key" in refused.stderr
    for extra in (["--require-complete"], ["--known-head", str(forged)]):
        early = invoke_sync(["verify-file", str(forged), *extra], env)
        assert early.code == 1 and "need the log key, and none is known" in early.stderr
    skipped = invoke_sync(["verify-file", str(forged), "--skip-signatures"], env)
    assert skipped.code == 0, skipped.output
    assert "signatures NOT checked (--skip-signatures): they vouch for nothing" in skipped.output
    for extra in (["--require-complete"], ["--known-head", str(forged)]):
        both = invoke_sync(["verify-file", str(forged), "--skip-signatures", *extra], env)
        assert both.code == 2 and "need the log key" in both.output, both.output
    key = ["--log-key", NoteSigner.generate(LOG).verifier.encode()]
    contradicts = invoke_sync(["verify-file", str(forged), "--skip-signatures", *key], env)
    assert contradicts.code == 2 and "contradict" in contradicts.output


def test_a_saga_id_is_printed_not_read_as_markup(tmp_path: Path) -> None:
    """Saga ids are free text: "[/x]" crashed the findings' rich markup (a traceback, the
    summary lost) and "[conceal]" hid its own finding in a colour terminal."""
    signer = NoteSigner.generate(LOG)
    ids = ("order[/x]", "[conceal]hidden")
    path = _exported(tmp_path, "marked", signer, *ids)
    lines = path.read_text(encoding="utf-8").splitlines()
    # Cut both sagas back to look open: each is then a finding naming its saga.
    kept = [line for line in lines if '"phase":"SAGA_CLOSED"' not in line]
    assert len(kept) == len(lines) - 2
    path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
    env = cli_env(
        SAGACITY_JOURNAL_URL=f"sqlite:///{tmp_path}/none.db",
        SAGACITY_LOG_VERIFIER=signer.verifier.encode(),
    )
    ran = invoke_sync(["verify-file", str(path)], env)
    assert ran.code == 1 and "Traceback" not in ran.output, ran.output
    for saga_id in ids:
        assert f"✗ {saga_id}: truncated" in ran.stdout, ran.stdout
    assert "evidence checked: hash chains" in ran.stdout
