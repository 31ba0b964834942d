"""A close whose checkpoint is on its way is pending within the window and a finding
outside it, on either side of the snapshot's time; nothing else is ever pending."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from sagacity.audit._evidence import ChainCheckpoints, Problem
from sagacity.audit._evidence_pending import PENDING_BOUND, PendingWindow
from sagacity.journal._chain import verify_chain
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase
from sagacity.stores import MemoryJournalStore
from sagacity.tlog._checkpoint import SagaCheckpoint, open_saga_checkpoint, sign_saga_checkpoint
from sagacity.tlog._note_keys import NoteSigner

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SIGNER = NoteSigner.generate("sagacity.test/pending")


def _chain(closed_at: datetime, *, close: bool = True) -> list[JournalEntry]:
    store = MemoryJournalStore(clock=lambda: closed_at)
    store.append(EntryDraft.new("s", Phase.SAGA_OPENED, input={}))
    store.append(EntryDraft.new("s", Phase.INTENT, step=1, tool="t", input={}))
    if close:
        store.append(EntryDraft.new("s", Phase.SAGA_CLOSED, result={}))
    return list(store.entries("s"))


def _checkpoint(entry: JournalEntry) -> SagaCheckpoint:
    note = sign_saga_checkpoint(
        SIGNER, saga_id="s", entries=entry.seq, head_hash=entry.hash, now=NOW
    )
    return open_saga_checkpoint(note, [SIGNER.verifier])


def _finish(
    chain: list[JournalEntry],
    window: PendingWindow | None,
    checkpoints: list[SagaCheckpoint] | None = None,
) -> ChainCheckpoints:
    check = ChainCheckpoints("s", list(checkpoints or []))
    for entry in chain:
        check.observe(entry)
    check.finish(verify_chain("s", chain), window=window)
    return check


@pytest.mark.parametrize(
    "offset",
    [timedelta(0), -PENDING_BOUND + timedelta(seconds=1), PENDING_BOUND - timedelta(seconds=1)],
)
def test_a_close_within_the_window_is_pending_not_a_finding(offset: timedelta) -> None:
    closed_at = NOW + offset
    check = _finish(_chain(closed_at), PendingWindow(NOW))
    assert (check.findings, check.pending) == ([], closed_at)


@pytest.mark.parametrize("offset", [-PENDING_BOUND, PENDING_BOUND, timedelta(days=-30)])
def test_a_close_outside_the_window_is_not_checkpointed(offset: timedelta) -> None:
    """Past the bound an honest worker has signed it; a close dated in the future beyond
    the bound is no clock skew but a forger keeping a fake saga pending."""
    check = _finish(_chain(NOW + offset), PendingWindow(NOW))
    assert check.pending is None
    assert [f.problem for f in check.findings] == [Problem.NOT_CHECKPOINTED]
    detail = check.findings[0].detail
    assert "beyond the 10 min a checkpoint may be pending" in detail
    assert ("before" if offset < timedelta(0) else "after") + " this check's snapshot" in detail


def test_a_window_of_zero_and_no_window_make_every_unsigned_close_a_finding() -> None:
    for window in (PendingWindow(NOW, timedelta(0)), None):
        check = _finish(_chain(NOW), window)
        assert check.pending is None
        assert [f.problem for f in check.findings] == [Problem.NOT_CHECKPOINTED]


def test_only_an_uncovered_close_is_ever_pending() -> None:
    """An open chain needs no checkpoint; a covered close is done; a checkpoint past the
    chain's end is a cut tail however recent."""
    window = PendingWindow(NOW)
    opened = _finish(_chain(NOW, close=False), window)
    assert (opened.findings, opened.pending) == ([], None)
    chain = _chain(NOW)
    covered = _finish(chain, window, [_checkpoint(chain[2])])
    assert (covered.findings, covered.pending) == ([], None)
    cut = _finish(chain[:2], window, [_checkpoint(chain[2])])
    assert ([f.problem for f in cut.findings], cut.pending) == ([Problem.TRUNCATED], None)
