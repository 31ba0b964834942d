"""What an attacker who holds an export (or the log key's public half only) can do to it,
done to the file, and what verify-file finds: a proof removed, the tree head removed or
swapped for an older one, a second history of the same size, lines repeated, line ends
rewritten, bytes that are not UTF-8; and the honest race of a saga that grows while it
is exported, which must still pass."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagacity._errors import AuditFileError
from sagacity.audit._export import export_jsonl, export_lines, verify_jsonl
from sagacity.audit._export_evidence import tree_head_line
from sagacity.audit._file_evidence import FileEvidence
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase
from sagacity.stores import MemoryJournalStore
from sagacity.tlog._checkpoint import CheckpointError, TreeHead
from sagacity.tlog._log import CheckpointLog
from sagacity.tlog._note_keys import NoteSigner
from sagacity.worker._log_keys import read_tree_head

SIGNER = NoteSigner.generate("sagacity.test/omissions")


def _run(store: MemoryJournalStore, log: CheckpointLog, saga_id: str) -> None:
    store.append(EntryDraft.new(saga_id, Phase.SAGA_OPENED))
    store.append(EntryDraft.new(saga_id, Phase.EXECUTED, step=1, tool="t", result=saga_id))
    log.record(store.append(EntryDraft.new(saga_id, Phase.SAGA_CLOSED, result={})))


def _journal(*ids: str) -> tuple[MemoryJournalStore, CheckpointLog]:
    store = MemoryJournalStore()
    log = store.checkpoint_log(SIGNER)
    for saga_id in ids:
        _run(store, log, saga_id)
    return store, log


def _export(
    store: MemoryJournalStore, log: CheckpointLog, head: TreeHead | None = None, *ids: str
) -> list[str]:
    out = io.StringIO()
    export_jsonl(store, out, list(ids) or None, log=log, head=head or log.head())
    return out.getvalue().splitlines()


def _check(lines: list[str], known: TreeHead | None = None) -> tuple[FileEvidence, set[str]]:
    evidence = FileEvidence([SIGNER.verifier], known=known)
    reports = verify_jsonl(lines, evidence.observe, evidence.evidence)
    return evidence, {f"{f.saga_id}:{f.problem}" for f in evidence.finish(reports)}


def _edit(lines: list[str], at: int, **changes: object) -> list[str]:
    record = {**json.loads(lines[at]), **changes}
    return [*lines[:at], json.dumps(record), *lines[at + 1 :]]


def test_a_removed_inclusion_proof_is_found_where_the_head_covers_the_leaf() -> None:
    lines = _export(*_journal("a", "b"))
    assert _check(lines)[1] == set()
    at = next(i for i, line in enumerate(lines) if "/saga/b\\n" in line)
    assert json.loads(lines[at])["inclusion_proof"] is not None
    evidence, found = _check(_edit(lines, at, inclusion_proof=None))
    assert found == {"b:not_included"}
    assert evidence.newer == 0  # not passed off as a checkpoint signed after the head


def test_a_removed_tree_head_line_is_found() -> None:
    lines = _export(*_journal("a", "b"))
    assert json.loads(lines[0]).get("complete") is True
    _, found = _check(lines[1:])
    assert "(export):log_broken" in found


def test_an_older_tree_head_swapped_in_passes_alone_and_fails_against_a_kept_head() -> None:
    store, log = _journal("a")
    old = log.head()
    _run(store, log, "b")
    kept = log.head()
    assert old is not None and kept is not None and kept.size > old.size
    stale = _export(store, log, old)  # what the log looked like before b: b's leaf is "newer"
    evidence, found = _check(stale)
    assert found == set() and evidence.newer == 1  # the limit without a kept head
    evidence, found = _check(stale, known=kept)
    assert found == {"(export):log_broken"} and evidence.consistent is False


def test_the_same_size_with_another_root_is_a_second_history() -> None:
    store, log = _journal("a", "b")
    other_store, other_log = _journal("a", "forged")  # the same key, another history
    kept, other = log.head(), other_log.head()
    assert kept is not None and other is not None and kept.size == other.size
    assert kept.root != other.root
    evidence, found = _check(_export(other_store, other_log), known=kept)
    assert found == {"(export):log_broken"} and evidence.consistent is False
    assert _check(_export(store, log), known=kept)[0].consistent is True


def test_a_complete_export_must_rebuild_the_kept_root_from_its_own_leaves() -> None:
    store, log = _journal("a", "b")
    kept = log.head()
    _run(store, log, "c")
    evidence, found = _check(_export(store, log), known=kept)
    assert found == set() and evidence.consistent is True  # appended to, nothing else

    forged_store, forged_log = _journal("x", "y")  # rewritten from the start, then grown
    _run(forged_store, forged_log, "c")
    evidence, found = _check(_export(forged_store, forged_log), known=kept)
    assert found == {"(export):log_broken"} and evidence.consistent is False

    partial = _export(forged_store, forged_log, None, "c")  # cannot prove it: says so
    evidence, found = _check(partial, known=kept)
    assert found == set() and evidence.consistent is None


def test_an_unsigned_head_claiming_two_to_the_63_leaves_is_answered_at_once() -> None:
    """Without a log key the head's signature is not checked; its size must not drive
    the work (a loop or a list over 2**63 leaves)."""
    store, log = _journal("a")
    huge = TreeHead(
        2**63 - 1, bytes(32), SIGNER.sign(f"{SIGNER.name}\n{2**63 - 1}\n" + "A" * 43 + "=\n")
    )
    lines = [tree_head_line(huge, complete=True), *_export(store, log)[1:]]
    evidence = FileEvidence(None)
    found = evidence.finish(verify_jsonl(lines, evidence.observe, evidence.evidence))
    assert any("leaf 1 is the first missing" in f.detail for f in found)


def test_a_repeated_line_is_refused_naming_both_lines() -> None:
    lines = _export(*_journal("a"))
    with pytest.raises(AuditFileError, match="line 3: log index 0 repeats line 2"):
        _check([lines[0], lines[1], lines[1], *lines[2:]])


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: b.replace(b"\n", b"\r\n"), "line 1: holds a carriage return"),
        (lambda b: b.replace(b'"seq":2', b'"seq":2\r', 1), "holds a carriage return"),
        (lambda b: b.replace(b"SAGA_OPENED", b"SAGA_\xffOPENED", 1), "not UTF-8"),
    ],
)
def test_rewritten_line_ends_or_bytes_are_refused_by_line(damage: object, message: str) -> None:
    raw = ("\n".join(_export(*_journal("a"))) + "\n").encode()
    assert _check(list(export_lines(io.BytesIO(raw).readlines())))[1] == set()
    bad = damage(raw)  # type: ignore[operator]
    assert bad != raw
    evidence = FileEvidence([SIGNER.verifier])
    with pytest.raises(AuditFileError, match=message):
        verify_jsonl(export_lines(io.BytesIO(bad).readlines()), evidence.observe, evidence.evidence)


def test_a_kept_head_with_crlf_line_ends_is_refused(tmp_path: Path) -> None:
    _, log = _journal("a")
    head = log.head()
    assert head is not None
    kept = tmp_path / "head.txt"
    kept.write_bytes(head.note.encode())
    assert read_tree_head(kept, [SIGNER.verifier]) == head
    kept.write_bytes(head.note.replace("\n", "\r\n").encode())
    with pytest.raises(CheckpointError, match=r"head\.txt: holds a carriage return"):
        read_tree_head(kept, [SIGNER.verifier])
    kept.write_bytes(b"\xff" + head.note.encode())
    with pytest.raises(CheckpointError, match="not UTF-8"):
        read_tree_head(kept, None)


class GrowingStore(MemoryJournalStore):
    """A saga that runs on while it is exported: right after its entries were read, it
    appends and is checkpointed again, before the export reads its checkpoints."""

    def __init__(self) -> None:
        super().__init__()
        self.log: CheckpointLog | None = None
        self.grow: str | None = None

    def entries(self, saga_id: str, *, after_seq: int = 0) -> Iterator[JournalEntry]:
        yield from super().entries(saga_id, after_seq=after_seq)
        if saga_id == self.grow and self.log is not None:
            self.grow = None
            step = EntryDraft.new(saga_id, Phase.EXECUTED, step=2, tool="t", result="more")
            self.log.record(self.append(step))


def test_a_saga_checkpointed_during_its_export_still_passes() -> None:
    store = GrowingStore()
    log = store.log = store.checkpoint_log(SIGNER)
    store.append(EntryDraft.new("a", Phase.SAGA_OPENED))
    log.record(store.append(EntryDraft.new("a", Phase.EXECUTED, step=1, tool="t", result=1)))
    head = log.head()
    store.grow = "a"
    lines = _export(store, log, head)
    assert store.grow is None and len(list(store.entries("a"))) == 3  # it did grow
    assert len(log.of_saga("a")) == 2
    assert sum('"checkpoint"' in line for line in lines) == 1  # the newer leaf left out
    assert _check(lines)[1] == set()
