"""A worker never takes an approver registry older than one its journal records: not at
start (RegistryRolledBackError, naming both versions and what to do), not when the file
changes under it; and the marks' arithmetic (newer, older, forked) it decides with."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sagacity._errors import StoreUnavailableError
from sagacity.approval._registry import ApproverRegistry, RegistryRolledBackError
from sagacity.approval._registry_file import KeyLookup, RegistryFile
from sagacity.approval._registry_marks import (
    JournaledMark,
    RegistryMark,
    mark_in,
    newer,
    older_than,
    top_mark,
)
from sagacity.approval._requester import judge_requester
from sagacity.approval._signing import SigningKey
from sagacity.approval._statements import signed_request
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import MemoryJournalStore
from sagacity.workflows._models import RequesterClaim

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
A, B = "a" * 64, "b" * 64


def mark(version: int, sha256: str | None = A) -> RegistryMark:
    return RegistryMark(version=version, sha256=sha256)


def test_newer_keeps_the_higher_version_and_forks_at_one_version_with_two_hashes() -> None:
    assert newer(None, None) is None
    assert newer(mark(2), None) == mark(2) == newer(None, mark(2))
    assert newer(mark(2), mark(3, B)) == mark(3, B) == newer(mark(3, B), mark(2))
    assert newer(mark(3), mark(3)) == mark(3)
    assert newer(mark(3), mark(3, B)) == mark(3, None)  # two registries called version 3
    assert newer(mark(3, None), mark(3)) == mark(3, None)  # a fork stays forked
    assert newer(mark(3, None), mark(4)) == mark(4)  # until a newer version


def test_older_than_refuses_lower_versions_other_content_and_any_of_a_fork() -> None:
    assert not older_than(1, A, None)
    assert older_than(1, A, mark(2)) and not older_than(3, B, mark(2))
    assert not older_than(2, A, mark(2)) and older_than(2, B, mark(2))
    assert older_than(2, A, mark(2, None)) and older_than(2, B, mark(2, None))
    assert not older_than(3, A, mark(2, None))


def test_top_mark_of_a_journal() -> None:
    assert top_mark([]) is None
    assert top_mark([JournaledMark(5, B, "s", 2)]) == mark(5, B)
    assert top_mark([JournaledMark(5, A, "s", 2), JournaledMark(5, B, "t", 1)]) == mark(5, None)


def test_marks_are_bounded_when_decoded() -> None:
    for bad in ({"version": 0, "sha256": A}, {"version": 2**53, "sha256": A},
                {"version": "2", "sha256": A}, {"version": 2, "sha256": "A" * 64},
                {"version": 2}):  # fmt: skip
        with pytest.raises(ValueError):
            RegistryMark.model_validate(bad)
    assert mark_in(Phase.APPROVED, {"registry": {"version": 2**53, "sha256": A}}) is None
    assert mark_in(Phase.APPROVED, {"registry": {"version": 2**53 - 1, "sha256": A}})


class Journal:
    """A memory journal and what its entries say about registries."""

    def __init__(self) -> None:
        self.store = MemoryJournalStore()
        self.reads = 0

    def records(self, registry: ApproverRegistry, saga: str = "s") -> None:
        ref = {"version": registry.version, "sha256": registry.sha256}
        step = len(list(self.store.entries(saga))) + 1
        draft = EntryDraft.new(saga, Phase.APPROVED, step=step, result={"registry": ref})
        self.store.append(draft)

    def marks(self) -> list[JournaledMark]:
        self.reads += 1
        return self.store.registry_marks()


def saved(tmp_path: Path, registry: ApproverRegistry) -> Path:
    """The registry file a worker reads, holding `registry`."""
    path = tmp_path / "approvers.json"
    registry.save(path)
    return path


@pytest.fixture
def registries() -> tuple[ApproverRegistry, ApproverRegistry, ApproverRegistry]:
    """v1 (mallory valid), v2 (mallory revoked), v3 (one more key)."""
    mallory, alice = SigningKey.generate("mallory"), SigningKey.generate("alice")
    v1 = ApproverRegistry().enroll("mallory", mallory.public_key, valid_from=NOW)
    v2 = v1.revoke(mallory.key_id, NOW)
    return v1, v2, v2.enroll("alice", alice.public_key, valid_from=NOW)


def test_a_worker_refuses_to_start_with_a_registry_older_than_its_journal(
    tmp_path: Path, registries: tuple[ApproverRegistry, ...]
) -> None:
    v1, v2, _ = registries
    path = tmp_path / "approvers.json"
    journal = Journal()
    journal.records(v2, "order-7")
    v1.save(path)  # the file before the revocation, put back
    with pytest.raises(RegistryRolledBackError) as refused:
        RegistryFile(path).guard(journal.marks, "sqlite:///j.db")
    message = str(refused.value)
    assert f"approver registry is version {v1.version} (sha256 {v1.sha256[:12]}…)" in message
    assert f"records version {v2.version} (sha256 {v2.sha256[:12]}…)" in message
    assert "saga 'order-7' seq 1" in message and "sqlite:///j.db" in message
    assert f"Restore the newer registry file (version {v2.version} with sha256 {v2.sha256}" in (
        message
    )
    v2.save(path)
    RegistryFile(path).guard(journal.marks, "sqlite:///j.db")  # the newer one starts


def test_same_version_other_content_and_a_forked_journal_are_refused(
    tmp_path: Path, registries: tuple[ApproverRegistry, ...]
) -> None:
    v1, v2, _ = registries
    path = tmp_path / "approvers.json"
    undone = ApproverRegistry(version=v2.version, keys=v1.keys)  # revocation taken out
    undone.save(path)
    journal = Journal()
    journal.records(v2)
    with pytest.raises(RegistryRolledBackError, match="another registry of that version"):
        RegistryFile(path).guard(journal.marks, "j")
    journal.records(undone, "t")  # a worker that ran it anyway: the journal is forked
    v2.save(path)
    with pytest.raises(RegistryRolledBackError, match="two different registries as version"):
        RegistryFile(path).guard(journal.marks, "j")


def test_an_empty_journal_takes_any_registry(
    tmp_path: Path, registries: tuple[ApproverRegistry, ...]
) -> None:
    v1, _, _ = registries
    path = saved(tmp_path, v1)
    RegistryFile(path).guard(Journal().marks, "j")


def test_a_reloaded_file_older_than_the_journal_is_not_taken(
    tmp_path: Path, registries: tuple[ApproverRegistry, ...]
) -> None:
    """This worker runs v1; another worker journals v3; the file here becomes v2: newer
    than the one in force, older than the journal's. Kept out, and said why."""
    v1, v2, v3 = registries
    path = saved(tmp_path, v1)
    journal = Journal()
    live = RegistryFile(path)
    live.guard(journal.marks, "j")
    journal.records(v3)
    v2.save(path)
    os.utime(path, ns=(1, 1))
    assert live.lookup(None).version == v1.version
    assert f"not taken, the one in force kept: the approver registry is version {v2.version}" in (
        live.problem or ""
    )
    reads = journal.reads
    live.lookup(None)  # an unchanged file is not checked again
    assert journal.reads == reads
    v3.save(path)
    os.utime(path, ns=(2, 2))
    assert live.lookup(None).version == v3.version and live.problem is None


def test_a_journal_that_cannot_answer_keeps_the_registry_in_force_until_it_can(
    tmp_path: Path, registries: tuple[ApproverRegistry, ...]
) -> None:
    v1, v2, _ = registries
    path = saved(tmp_path, v1)
    down = [False]

    def marks() -> list[JournaledMark]:
        if down[0]:
            raise StoreUnavailableError("the journal is down")
        return []

    live = RegistryFile(path)
    live.guard(marks, "j")
    down[0] = True
    v2.save(path)
    assert live.lookup(None).version == v1.version
    assert "cannot be read (the journal is down)" in (live.problem or "")
    down[0] = False
    assert live.lookup(None).version == v2.version  # asked again, the same file taken


def test_a_start_judged_by_a_registry_older_than_the_journal_is_refused(
    registries: tuple[ApproverRegistry, ...],
) -> None:
    """A worker that started before a newer registry was journaled (elsewhere) must not
    verify requesters with its older one: a revoked requester key would count again."""
    v1, _, v3 = registries
    rita = SigningKey.generate("rita")
    v1 = v1.enroll("rita", rita.public_key, valid_from=NOW)
    claim = RequesterClaim.model_validate(signed_request(rita, "s", now=NOW))
    answer = KeyLookup(
        configured=True, version=v1.version, sha256=v1.sha256, key=v1.key(rita.key_id)
    )
    refused, evidence = judge_requester("s", claim, answer, NOW)
    assert refused is None and evidence is not None and evidence["requester"] == "rita"
    newer_journaled = answer.model_copy(update={"journaled": mark(v3.version + 1)})
    refused, evidence = judge_requester("s", claim, newer_journaled, NOW)
    assert evidence is None and refused is not None
    assert f"judged with approver registry version {v1.version}" in refused
    assert f"its journal records version {v3.version + 1}" in refused
