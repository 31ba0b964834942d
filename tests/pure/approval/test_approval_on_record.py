"""`approval_on_record`: an irreversible step runs only on an approval the journal holds.

Each case writes a journal as a saga's workflow would (or as an attacker with write
access to the namespace, not to the journal, could make a saga's workflow write it) and
asks whether the step may run. No server, no disk."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sagacity.approval._judge import approval_hash
from sagacity.approval._on_record import approval_on_record
from sagacity.approval._policy import ApprovalRequirement
from sagacity.approval._registry import ApproverRegistry
from sagacity.approval._signing import SigningKey
from sagacity.journal._entry import EntryDraft
from sagacity.stores import MemoryJournalStore
from tests.support.journal_approvals import approve, open_saga, request_approval

SAGA, STEP, TOOL = "payout-1", 2, "pay"
ARGS: dict[str, Any] = {"iban": "DE89370400440532013000", "amount": "9000000"}
SINCE = datetime(2026, 1, 1, tzinfo=UTC)


def verdict(
    store: MemoryJournalStore,
    *,
    floor: ApprovalRequirement | None = None,
    registry: ApproverRegistry | None = None,
    args: dict[str, Any] = ARGS,
) -> str | None:
    entries = list(store.entries(SAGA))
    return approval_on_record(
        entries[0],
        [e for e in entries if e.step == STEP],
        tool=TOOL,
        payload_sha256=approval_hash(TOOL, args),
        floor=floor or ApprovalRequirement(),
        registry=registry,
    )


@pytest.fixture
def store() -> MemoryJournalStore:
    journal = MemoryJournalStore()
    open_saga(journal, SAGA)
    return journal


def test_a_journaled_approval_of_this_payload_lets_the_step_run(store: MemoryJournalStore) -> None:
    request_approval(store, SAGA, STEP, TOOL, ARGS)
    approve(store, SAGA, STEP, TOOL, ARGS, "alice")
    assert verdict(store) is None


def test_no_request_no_run(store: MemoryJournalStore) -> None:
    assert "no request" in (verdict(store) or "")


def test_a_request_without_approval_does_not_run(store: MemoryJournalStore) -> None:
    request_approval(store, SAGA, STEP, TOOL, ARGS)
    assert "no approval" in (verdict(store) or "")


def test_an_approval_of_other_arguments_does_not_run_these(store: MemoryJournalStore) -> None:
    request_approval(store, SAGA, STEP, TOOL, ARGS)
    approve(store, SAGA, STEP, TOOL, ARGS, "alice")
    other = {**ARGS, "amount": "9000001"}
    assert "another payload" in (verdict(store, args=other) or "")


def test_a_rejection_stops_it(store: MemoryJournalStore) -> None:
    request_approval(store, SAGA, STEP, TOOL, ARGS)
    approve(store, SAGA, STEP, TOOL, ARGS, "alice")
    approve(store, SAGA, STEP, TOOL, ARGS, "bob", approve=False)
    assert "rejection" in (verdict(store) or "")


def test_the_tools_own_policy_is_the_floor(store: MemoryJournalStore) -> None:
    """The request journaled a quorum of 1 (a forged or buggy workflow): the tool's policy
    asks for 2, so one approval is not enough, and two distinct people are."""
    request_approval(store, SAGA, STEP, TOOL, ARGS, approval=ApprovalRequirement(quorum=1))
    approve(store, SAGA, STEP, TOOL, ARGS, "alice")
    floor = ApprovalRequirement(quorum=2)
    assert "1 of 2 approvals" in (verdict(store, floor=floor) or "")
    approve(store, SAGA, STEP, TOOL, ARGS, "ALICE", attempt=2)  # the same person, by skeleton
    assert "1 of 2 approvals" in (verdict(store, floor=floor) or "")
    approve(store, SAGA, STEP, TOOL, ARGS, "bob", attempt=3)
    assert verdict(store, floor=floor) is None


def test_a_stricter_journaled_requirement_stands(store: MemoryJournalStore) -> None:
    request_approval(store, SAGA, STEP, TOOL, ARGS, approval=ApprovalRequirement(quorum=2))
    approve(store, SAGA, STEP, TOOL, ARGS, "alice")
    assert "still missing" in (verdict(store) or "")


def test_an_approver_not_allowed_does_not_count(store: MemoryJournalStore) -> None:
    request_approval(store, SAGA, STEP, TOOL, ARGS)
    approve(store, SAGA, STEP, TOOL, ARGS, "mallory")
    floor = ApprovalRequirement(approvers=["alice"])
    assert "not among the approvers" in (verdict(store, floor=floor) or "")


def test_the_sagas_own_actor_is_no_approver(store: MemoryJournalStore) -> None:
    request_approval(store, SAGA, STEP, TOOL, ARGS)
    approve(store, SAGA, STEP, TOOL, ARGS, "sagacity:timeout")
    assert "names no person" in (verdict(store) or "")


class Signed:
    """A registry with a requester and two finance approvers; one outsider key."""

    def __init__(self) -> None:
        self.requester = SigningKey.generate("rita")
        self.alice = SigningKey.generate("alice")
        self.bob = SigningKey.generate("bob")
        self.outsider = SigningKey.generate("alice")  # claims alice's name, never enrolled
        registry = ApproverRegistry()
        registry = registry.enroll("rita", self.requester.public_key, valid_from=SINCE)
        for key in (self.alice, self.bob):
            registry = registry.enroll(
                key.approver, key.public_key, valid_from=SINCE, groups=["finance"]
            )
        self.registry = registry
        self.store = MemoryJournalStore()
        open_saga(self.store, SAGA, requester=self.requester, registry=registry)
        request_approval(self.store, SAGA, STEP, TOOL, ARGS, registry=registry)

    def approve(self, key: SigningKey | str, attempt: int = 1) -> None:
        approve(self.store, SAGA, STEP, TOOL, ARGS, key, registry=self.registry, attempt=attempt)

    def verdict(self, floor: ApprovalRequirement | None = None) -> str | None:
        return verdict(self.store, floor=floor, registry=self.registry)


FINANCE_TWO = ApprovalRequirement(groups=["finance"], quorum=2)


def test_signed_approvals_of_two_finance_people_let_it_run() -> None:
    signed = Signed()
    signed.approve(signed.alice)
    assert "1 of 2" in (signed.verdict(FINANCE_TWO) or "")
    signed.approve(signed.bob, attempt=2)
    assert signed.verdict(FINANCE_TWO) is None


def test_with_a_registry_an_unsigned_approval_is_refused() -> None:
    signed = Signed()
    signed.approve("alice")
    assert "not signed" in (signed.verdict() or "")


def test_with_a_registry_a_statement_without_its_signature_is_refused() -> None:
    """A correct decision statement journaled with no signature, and a decision result
    that names no registry (the sender writes both): still unsigned."""
    signed = Signed()
    entry = approve(signed.store, SAGA, STEP, TOOL, ARGS, signed.alice, registry=None)
    assert entry.input["signature"]  # the helper signed it; forge the unsigned copy
    forged = MemoryJournalStore()
    for e in signed.store.entries(SAGA):
        if e.seq < entry.seq:
            forged.append(EntryDraft.new(SAGA, e.phase, step=e.step, attempt=e.attempt,
                                         tool=e.tool, input=e.input, result=e.result,
                                         actor=e.actor))  # fmt: skip
    unsigned = {**entry.input, "signature": None}
    forged.append(EntryDraft.new(SAGA, entry.phase, step=STEP, tool=TOOL, actor="alice",
                                 input=unsigned, result={"payload_sha256": entry.result[
                                     "payload_sha256"]}))  # fmt: skip
    assert "not signed" in (verdict(forged, registry=signed.registry) or "")


def test_a_statement_issued_before_its_request_does_not_answer_it() -> None:
    """A signed approval copied from another journal where the same saga id was asked
    earlier: issued before this request was made (beyond the clock skew)."""
    clock = [datetime(2026, 12, 7, 9, 0, tzinfo=UTC)]
    signed = Signed()
    early = approve(signed.store, SAGA, STEP, TOOL, ARGS, signed.alice, registry=signed.registry)
    replay = MemoryJournalStore(clock=lambda: clock[0] + timedelta(days=400))
    for e in signed.store.entries(SAGA):
        replay.append(EntryDraft.new(SAGA, e.phase, step=e.step, attempt=e.attempt, tool=e.tool,
                                     input=e.input, result=e.result, actor=e.actor))  # fmt: skip
    assert early.input["signature"]
    assert "issued before this request" in (verdict(replay, registry=signed.registry) or "")


def test_a_key_not_enrolled_cannot_pass_for_an_approver() -> None:
    signed = Signed()
    signed.approve(signed.outsider)
    assert "not in the approver registry" in (signed.verdict() or "")


def test_the_requester_cannot_approve_their_own_step() -> None:
    signed = Signed()
    signed.approve(signed.requester)
    assert "their own step" in (signed.verdict() or "")


def test_a_group_rule_is_checked_against_the_signing_keys_groups() -> None:
    signed = Signed()
    signed.approve(signed.requester)
    rule = ApprovalRequirement(groups=["finance"], separate_from_requester=False)
    assert "none of the groups" in (signed.verdict(rule) or "")


def test_a_request_made_without_the_registry_is_refused_by_a_signed_worker(
    store: MemoryJournalStore,
) -> None:
    request_approval(store, SAGA, STEP, TOOL, ARGS)
    approve(store, SAGA, STEP, TOOL, ARGS, "alice")
    assert "without an approver registry" in (verdict(store, registry=Signed().registry) or "")


def test_an_approval_that_expired_before_the_quorum_does_not_count() -> None:
    clock = [datetime(2026, 12, 7, 9, 0, tzinfo=UTC)]
    timed = MemoryJournalStore(clock=lambda: clock[0])
    open_saga(timed, SAGA)
    rule = ApprovalRequirement(quorum=2, expires_after_seconds=60)
    request_approval(timed, SAGA, STEP, TOOL, ARGS, approval=rule)
    approve(timed, SAGA, STEP, TOOL, ARGS, "alice")
    clock[0] += timedelta(minutes=5)
    approve(timed, SAGA, STEP, TOOL, ARGS, "bob", attempt=2)
    assert "1 of 2" in (verdict(timed) or "")
    approve(timed, SAGA, STEP, TOOL, ARGS, "alice", attempt=3)  # alice again, in time
    assert verdict(timed) is None
