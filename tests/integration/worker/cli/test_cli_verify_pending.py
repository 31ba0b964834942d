"""`sagacity verify`: a close whose checkpoint is on its way is "checkpoint pending", said
plainly and not a failure, for SAGACITY_CHECKPOINT_PENDING_SECONDS after the close; a
close unsigned for longer, or dated beyond the window ahead, is `not_checkpointed`.

The journal is a SQLite file written through the store as a worker writes it (the close
appended, then its checkpoint signed), with the checkpoint of one close not signed yet.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest

from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import JournalStore, open_store, utc_now
from sagacity.tlog._note_keys import NoteSigner
from tests.support.cli import invoke_sync

SIGNER = NoteSigner.generate("sagacity.test/pending-cli")


def _saga(store: JournalStore, saga_id: str, *, sign: bool, age: timedelta = timedelta(0)) -> None:
    at = utc_now() - age
    store.append(EntryDraft.new(saga_id, Phase.SAGA_OPENED, input={}, recorded_at=at))
    closed = store.append(
        EntryDraft.new(saga_id, Phase.SAGA_CLOSED, result={"status": "COMPLETED"}, recorded_at=at)
    )
    if sign:
        store.checkpoint_log(SIGNER).record(closed)


def _untimed(text: str) -> str:
    """Output without the snapshot's time (each run takes its own)."""
    return re.sub(r"snapshot \(\S+\)", "snapshot (…)", text)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    url = f"sqlite:///{tmp_path}/journal.db"
    with open_store(url) as store:
        for i in range(4):
            _saga(store, f"done-{i}", sign=True)
        _saga(store, "just-closed", sign=False)
        closed = store.head("just-closed")
        assert closed is not None and closed.phase is Phase.SAGA_CLOSED
        assert not store.checkpoint_log().of_saga("just-closed")  # really unsigned
    return {"SAGACITY_JOURNAL_URL": url, "SAGACITY_LOG_VERIFIER": SIGNER.verifier.encode()}


def test_a_close_awaiting_its_checkpoint_is_pending_not_a_failure(env: dict[str, str]) -> None:
    every = invoke_sync(["verify", "--all"], env)
    assert every.code == 0, every.output
    assert "checkpoint pending (not a failure): 1 saga(s) closed within 10 min" in every.stdout
    assert "whose close the worker has not signed yet: just-closed;" in every.stdout
    assert "✗" not in every.output
    assert "verified 5 sagas, 10 entries: 5 closed, 0 open" in every.output
    one = invoke_sync(["verify", "just-closed"], env)
    assert one.code == 0, one.output
    assert "checkpoint pending (not a failure)" in one.stdout
    parallel = invoke_sync(["verify", "--all", "--jobs", "2"], env)
    assert (parallel.code, _untimed(parallel.stdout)) == (every.code, _untimed(every.stdout))
    data = json.loads(invoke_sync(["verify", "--all", "--json"], env).stdout)
    assert data["ok"] is True
    assert data["evidence"]["findings"] == []
    assert [p["saga_id"] for p in data["evidence"]["checkpoint_pending"]] == ["just-closed"]
    assert data["evidence"]["pending_bound_seconds"] == 600


def test_past_the_bound_an_unsigned_close_is_a_finding(env: dict[str, str]) -> None:
    strict = invoke_sync(["verify", "--all"], {**env, "SAGACITY_CHECKPOINT_PENDING_SECONDS": "0"})
    assert strict.code == 1, strict.output
    assert "just-closed: not_checkpointed: the chain is closed at 2 entries" in strict.stdout
    assert "beyond the 0 s a checkpoint may be pending" in strict.stdout
    assert "checkpoint pending" not in strict.stdout
    assert "1 evidence problem(s); first: just-closed: not_checkpointed" in strict.stderr


@pytest.mark.parametrize("age", [timedelta(minutes=11), timedelta(minutes=-11)])
def test_a_close_dated_outside_the_window_is_found_at_once(
    env: dict[str, str], age: timedelta
) -> None:
    """Long closed, or dated ahead by more than any clock skew (a forger keeping a fake
    saga pending): found now, beside the honest pending one."""
    with open_store(env["SAGACITY_JOURNAL_URL"]) as store:
        _saga(store, "odd", sign=False, age=age)
    found = invoke_sync(["verify", "--all"], env)
    assert found.code == 1, found.output
    side = "before" if age > timedelta(0) else "after"
    assert "odd: not_checkpointed: the chain is closed at 2 entries (closed at" in found.stdout
    assert f"min {side} this check's snapshot" in found.stdout
    assert "checkpoint pending (not a failure): 1 saga(s)" in found.stdout
    assert "just-closed;" in found.stdout
