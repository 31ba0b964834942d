"""An export checked against more than one trusted log, a kept head of absurd size, and
an export taken while a saga is closing.

An auditor who trusts a staging log's key beside production's (one key file for both)
must not take a staging checkpoint for a production one: a checkpoint newer than the
tree head has no proof to tie it to the head's log, so its log name is checked. A kept
head claims a size; its leaves are kept only when a complete export can use them. And
an honest export read between a saga's close and its checkpoint must not be refused."""

from __future__ import annotations

import io
import json
import threading
import time
from datetime import timedelta

from sagacity.audit._export import export_jsonl, verify_jsonl
from sagacity.audit._export_evidence import tree_head_line
from sagacity.audit._export_writer import RECENT_CLOSE
from sagacity.audit._file_evidence import FileEvidence
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores._base import utc_now
from sagacity.tlog._checkpoint import TreeHead
from sagacity.tlog._note_keys import NoteSigner
from tests.support.logged_journals import exported, logged_journal

PROD = NoteSigner.generate("acme.example/prod")
STAGING = NoteSigner.generate("acme.example/staging")
BOTH = [PROD.verifier, STAGING.verifier]


def _check(lines: list[str], known: TreeHead | None = None) -> tuple[FileEvidence, set[str]]:
    evidence = FileEvidence(BOTH, known=known)
    reports = verify_jsonl(lines, evidence.observe, evidence.evidence)
    return evidence, {f"{f.saga_id}:{f.problem}" for f in evidence.finish(reports)}


def test_a_checkpoint_of_another_trusted_log_is_not_one_of_this_log() -> None:
    prod = exported(*logged_journal(PROD, "order-1"))
    assert _check(prod)[1] == set()
    staging = exported(*logged_journal(STAGING, "refund-to-attacker"))
    pasted = [line for line in staging[1:]]  # its checkpoint and entries, not its head
    at = next(i for i, line in enumerate(pasted) if '"checkpoint"' in line)
    # Passed off as a leaf signed after the head: no proof, an index past the head.
    record = {**json.loads(pasted[at]), "log_index": 10**6, "inclusion_proof": None}
    pasted[at] = json.dumps(record)
    _, found = _check(prod + pasted)
    assert "refund-to-attacker:bad_checkpoint" in found, found
    alone, _ = _check(prod + pasted)
    assert alone.newer == 0  # never counted as a newer leaf of prod


def test_a_kept_head_of_another_log_is_named_as_such() -> None:
    store, log = logged_journal(PROD, "order-1")
    staging = logged_journal(STAGING, "x")[1].head()
    assert staging is not None
    evidence, found = _check(exported(store, log), known=staging)
    assert found == {"(export):log_broken"}
    assert "this export is of another log" in evidence.findings[0].detail
    assert evidence.consistent is False


def test_a_kept_head_of_absurd_size_costs_nothing_it_does_not_use() -> None:
    """Its leaves were allocated up front, 32 bytes each, whenever the export's head was
    as large: unsigned heads (no log key) of 2**62 leaves raised OverflowError, of 2**31
    MemoryError, though a partial export never uses them."""
    store, log = logged_journal(PROD, "order-1", "order-2")
    out = io.StringIO()
    export_jsonl(store, out, ["order-1"], log=log, head=log.head())
    partial = out.getvalue().splitlines()[1:]
    for size in (2**31, 2**62):
        body = f"{PROD.name}\n{size}\n" + "A" * 43 + "=\n"
        huge = TreeHead(size, bytes(32), PROD.sign(body))
        started = time.monotonic()
        evidence = FileEvidence(None, known=huge)
        lines = [tree_head_line(huge, complete=False), *partial]
        evidence.finish(verify_jsonl(lines, evidence.observe, evidence.evidence))
        assert evidence.head is not None and evidence.head.size == size
        assert len(evidence._known_leaves) == 0 and time.monotonic() - started < 5


def test_an_export_read_between_a_close_and_its_checkpoint_waits_for_it() -> None:
    """The worker appends SAGA_CLOSED, then signs its checkpoint: an export in between
    went out with a close no checkpoint covers, refused for ever as inserted by hand."""
    store, log = logged_journal(PROD, "order-1")
    store.append(EntryDraft.new("closing", Phase.SAGA_OPENED))
    close = store.append(EntryDraft.new("closing", Phase.SAGA_CLOSED, result={}))
    assert log.of_saga("closing") == []  # the race is real: the close has no checkpoint
    signing = threading.Timer(0.15, log.record, args=(close,))
    signing.start()
    try:
        lines = exported(store, log)
    finally:
        signing.join()
    assert any("/saga/closing\\n" in line for line in lines)
    evidence, found = _check(lines)
    assert found == set(), found
    assert evidence.newer == 1  # signed after the export's head, tied to it by its log


def test_an_old_close_with_no_checkpoint_is_not_waited_for() -> None:
    """A close older than RECENT_CLOSE with no checkpoint will not get one: the export
    does not wait, and verify-file reports it as the evidence says."""
    store, log = logged_journal(PROD, "order-1")
    store.append(EntryDraft.new("legacy", Phase.SAGA_OPENED))
    old = utc_now() - RECENT_CLOSE - timedelta(seconds=5)
    store.append(EntryDraft.new("legacy", Phase.SAGA_CLOSED, result={}, recorded_at=old))
    started = time.monotonic()
    lines = exported(store, log)
    assert time.monotonic() - started < 0.5
    evidence, found = _check(lines)
    assert found == {"legacy:not_checkpointed"}
    assert "look again" in evidence.findings[0].detail
