"""The resolution judge (pure) and the activity that records a person's word on an
unknown outcome (ActivityEnvironment, an in-memory journal): no server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sagacity.activities import SagaActivities
from sagacity.activities._models import ResolveStepInput
from sagacity.approval._registry import ApproverRegistry
from sagacity.approval._registry_file import KeyLookup
from sagacity.approval._resolutions import (
    DeskView,
    DirtyKind,
    Resolution,
    ResolutionContext,
    ResolutionPolicy,
)
from sagacity.approval._signed_action import sign_action
from sagacity.approval._signing import SigningKey
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import MemoryJournalStore
from sagacity.tools._decorators import CompensationContext, ToolContext, compensable, compensation
from sagacity.tools._toolbox import Toolbox
from tests.support.resolutions import judged, outcome
from tests.support.saga_activity_env import opening, saga_env

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
SAGA = "saga-1"
FULLWIDTH = "".join(chr(0xFEE0 + ord(c)) for c in "sagacity") + ":x"
"""A `sagacity:` actor written in fullwidth letters."""
DIRTY = {2: DirtyKind.UNKNOWN_OUTCOME, 3: DirtyKind.COMPENSATION_FAILED}


def view(**changes: Any) -> DeskView:
    fields: dict[str, Any] = {"saga_id": SAGA, "waiting_since": NOW - timedelta(minutes=1),
                              "dirty": DIRTY, "resolved": {}, "status": "NEEDS_HUMAN"}  # fmt: skip
    return DeskView(**{**fields, **changes})


def verdict(body: dict[str, Any], desk: DeskView | None = None, **context: Any) -> str:
    ctx = ResolutionContext(now=NOW, policy=context.pop("policy", ResolutionPolicy()), **context)
    return outcome(judged({"saga_id": SAGA, "actor": "olivia", **body}, desk or view(), ctx))


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"action": "happened", "step": 2}, "ACCEPTED"),
        ({"action": "did_not_happen", "step": 2}, "ACCEPTED"),
        ({"action": "retry_compensation", "step": 3}, "ACCEPTED"),
        ({"action": "accept", "steps": [3, 2], "reason": "by hand"}, "ACCEPTED"),
        ({"action": "happened", "step": 3}, "NOT_APPLICABLE"),
        ({"action": "retry_compensation", "step": 2}, "NOT_APPLICABLE"),
        ({"action": "happened", "step": 1}, "NOT_DIRTY"),
        ({"action": "accept", "steps": [2], "reason": "by hand"}, "STALE_VIEW"),
        ({"action": "accept", "steps": [2, 3]}, "MALFORMED"),  # no reason
        ({"action": "accept", "step": 2, "reason": "x"}, "MALFORMED"),
        ({"action": "happened"}, "MALFORMED"),  # no step
        ({"action": "happened", "step": "2"}, "MALFORMED"),  # no coercion
        ({"action": "did_not_happen", "step": 2, "result": {"x": 1}}, "MALFORMED"),
        ({"action": "undo", "step": 2}, "MALFORMED"),
        ({"action": "happened", "step": 2, "approve": True}, "MALFORMED"),  # unknown field
        ({"action": "happened", "step": 2, "result": "x" * 70_000}, "MALFORMED"),
        ({"action": "happened", "step": 2, "actor": ""}, "EMPTY_APPROVER"),
        ({"action": "happened", "step": 2, "actor": "sagacity:deadline"}, "RESERVED_APPROVER"),
        ({"action": "happened", "step": 2, "actor": FULLWIDTH}, "RESERVED_APPROVER"),
        ({"action": "happened", "step": 2, "actor": "ol\nivia"}, "MALFORMED"),
        ({"action": "happened", "step": 2, "saga_id": "saga-2"}, "WRONG_SAGA"),
        ({"action": "happened", "step": 2, "result": {"n": 2**60}}, "MALFORMED"),  # not exact
        ({"action": "happened", "step": 2, "result": float("nan")}, "MALFORMED"),
        ({"action": "happened", "step": 2**40}, "MALFORMED"),
        ({"action": "accept", "steps": [2**40], "reason": "x"}, "MALFORMED"),
        ({"action": "happened", "step": 2, "actor": "olivia\u202e"}, "MALFORMED"),  # RLO
        ({"action": "happened", "step": 2, "actor": "oli\x85via"}, "MALFORMED"),  # C1
        ({"action": "happened", "step": 2, "saga_id": None}, "WRONG_SAGA"),
    ],
)
def test_what_a_resolution_may_say(body: dict[str, Any], expected: str) -> None:
    assert verdict(body) == expected


def test_a_deep_result_is_refused_before_anything_decodes_it() -> None:
    deep: Any = "x"
    for _ in range(40):
        deep = [deep]
    assert verdict({"action": "happened", "step": 2, "result": deep}) == "MALFORMED"


def test_not_waiting_resolved_and_in_progress() -> None:
    body = {"action": "happened", "step": 2}
    assert verdict(body, view(waiting_since=None, status="COMPENSATING")) == "NOT_WAITING"
    resolved = view(dirty={3: DirtyKind.COMPENSATION_FAILED}, resolved={2: "happened by bob"})
    assert verdict(body, resolved) == "ALREADY_RESOLVED"
    assert verdict(body, view(in_progress=frozenset({2}))) == "IN_PROGRESS"
    busy = {"action": "accept", "steps": [2, 3], "reason": "x"}
    assert verdict(busy, view(in_progress=frozenset({3}))) == "IN_PROGRESS"


def test_who_may_resolve() -> None:
    body = {"action": "happened", "step": 2}
    policy = ResolutionPolicy(resolvers=["omar"])
    assert verdict(body, policy=policy) == "RESOLVER_NOT_ALLOWED"
    assert verdict(body, requester="olivia") == "REQUESTER_CANNOT_RESOLVE"
    assert verdict(body, requester="OLIVIA") == "REQUESTER_CANNOT_RESOLVE"  # one person
    assert verdict(body, requester="olivia", policy=ResolutionPolicy(
        separate_from_requester=False)) == "ACCEPTED"  # fmt: skip
    assert verdict(body, policy=ResolutionPolicy(groups=["ops"])) == "NOT_IN_GROUP"
    # The saga's approvers resolve when no resolvers are named; named ones win.
    assert ResolutionPolicy().effective(["ann"]).resolvers == ["ann"]
    assert ResolutionPolicy(resolvers=["bo"]).effective(["ann"]).resolvers == ["bo"]


def _lookup(key: SigningKey, groups: list[str]) -> KeyLookup:
    reg = ApproverRegistry(version=3, keys=[]).enroll(
        key.approver, key.public_key, valid_from=NOW - timedelta(days=1), groups=groups
    )
    return KeyLookup(configured=True, version=reg.version, key=reg.key(key.key_id))


def test_signed_statements() -> None:
    olivia = SigningKey.generate("olivia")
    lookup = _lookup(olivia, ["ops"])
    ops = ResolutionPolicy(groups=["ops"])
    body = sign_action(
        olivia, Resolution(saga_id=SAGA, action="happened", step=2, result={"psp": "pi_1"}), NOW
    ).body()

    def judged_with(b: dict[str, Any], **ctx: Any) -> str:
        return outcome(judged(b, view(), ResolutionContext(now=NOW, policy=ops, **ctx)))

    assert judged_with(body, lookup=lookup) == "ACCEPTED"
    assert judged_with({**body, "result": {"psp": "pi_2"}}, lookup=lookup) == "BAD_SIGNATURE"
    assert judged_with({**body, "step": 3}, lookup=lookup) == "NOT_APPLICABLE"  # target first
    assert judged_with({**body, "actor": "omar"}, lookup=lookup) == "BAD_SIGNATURE"  # signed
    unsigned = {k: v for k, v in body.items() if k not in ("signature", "key_id", "issued_at")}
    assert judged_with(unsigned, lookup=lookup) == "UNSIGNED"
    assert judged_with(body, lookup=KeyLookup(configured=True, version=3)) == "UNKNOWN_KEY"
    old = sign_action(
        olivia, Resolution(saga_id=SAGA, action="happened", step=2), NOW - timedelta(hours=1)
    ).body()
    assert judged_with(old, lookup=lookup) == "STALE_STATEMENT"  # before the wait began
    assert judged_with(body, lookup=_lookup(olivia, ["finance"])) == "NOT_IN_GROUP"


# ---- the recorder activity ---------------------------------------------------------------


class Pay:
    @compensable("refund")
    def charge(self, amount: int, ctx: ToolContext) -> dict[str, int]:
        return {"charged": amount}

    @compensation
    def refund(self, ctx: CompensationContext) -> None:
        return None


def journal_with_intent() -> tuple[MemoryJournalStore, SagaActivities]:
    store = MemoryJournalStore()
    store.append(opening(SAGA))
    store.append(EntryDraft.new(SAGA, Phase.INTENT, step=2, attempt=3, tool="charge",
                                input={"amount": 5}))  # fmt: skip
    # The saga waits for a person about steps 2 and 7 (what resolve_step acts on).
    dirty = [{"step": n, "tool": "charge", "kind": "UNKNOWN_OUTCOME"} for n in (2, 7)]
    store.append(EntryDraft.new(SAGA, Phase.NEEDS_HUMAN, input={"dirty": dirty}))
    activities = SagaActivities(store, Toolbox.build(Pay()))
    WORKER[0] = activities.identity
    return store, activities


WORKER = [""]
"""The identity of the activities journal_with_intent built (requests name it)."""


def request(happened: bool, **changes: Any) -> ResolveStepInput:
    fields: dict[str, Any] = {"saga_id": SAGA, "step": 2, "tool": "charge", "happened": happened,
                              "attempt": 1, "actor": "olivia", "statement": {"s": 1},
                              "result": {"psp": "pi_1"} if happened else None,
                              "worker": WORKER[0]}  # fmt: skip
    return ResolveStepInput(**{**fields, **changes})


async def test_happened_is_journaled_in_the_persons_name_with_the_intents_arguments() -> None:
    store, activities = journal_with_intent()
    env = saga_env(SAGA)
    out = await env.run(activities.resolve_step, request(True))
    again = await env.run(activities.resolve_step, request(True))  # a retried activity
    assert again == out and out.disagrees is None
    resolved, executed = list(store.entries(SAGA))[-2:]
    assert (resolved.phase, resolved.actor, resolved.result["action"]) == (
        Phase.RESOLVED, "olivia", "happened"
    )  # fmt: skip
    assert (executed.phase, executed.actor, executed.attempt) == (Phase.EXECUTED, "olivia", 3)
    assert executed.input == {"amount": 5} and executed.result == {"psp": "pi_1"}
    assert len(list(store.entries(SAGA))) == 5  # the retry added nothing


async def test_did_not_happen_is_a_failed_outcome_in_the_persons_name() -> None:
    store, activities = journal_with_intent()
    out = await saga_env(SAGA).run(activities.resolve_step, request(False, reason="no such charge"))
    failed = list(store.entries(SAGA))[-1]
    assert out.outcome is not None and out.outcome.phase is Phase.FAILED
    assert failed.actor == "olivia" and "no such charge" in (failed.error or "")


async def test_the_journal_wins_over_a_person() -> None:
    """The dead worker's EXECUTED landed late: nothing is written, the saga is told."""
    store, activities = journal_with_intent()
    late = store.append(EntryDraft.new(SAGA, Phase.EXECUTED, step=2, attempt=3, tool="charge",
                                       input={"amount": 5}, result={"charged": 5}))  # fmt: skip
    out = await saga_env(SAGA).run(activities.resolve_step, request(False))
    assert out.resolved is None and out.outcome is not None and out.outcome.seq == late.seq
    assert "EXECUTED" in (out.disagrees or "") and "from its worker" in (out.disagrees or "")
    assert list(store.entries(SAGA))[-1].seq == late.seq  # nothing appended


async def test_a_step_without_an_intent_never_started() -> None:
    """Every attempt was lost before INTENT: "happened" contradicts the journal and is not
    applied; "did not happen" is recorded (RESOLVED alone: no attempt to settle)."""
    store, activities = journal_with_intent()
    before = len(list(store.entries(SAGA)))
    env = saga_env(SAGA)
    said = await env.run(activities.resolve_step, request(True, step=7))
    assert said.resolved is None and "no INTENT" in (said.disagrees or "")
    assert len(list(store.entries(SAGA))) == before  # nothing written
    done = await env.run(activities.resolve_step, request(False, step=7))
    assert done.resolved is not None and done.outcome is None and done.compensable is False
    [resolved] = [e for e in store.entries(SAGA) if e.step == 7]
    assert (resolved.phase, resolved.actor) == (Phase.RESOLVED, "olivia")


async def test_the_recorder_says_whether_the_tool_can_be_undone() -> None:
    _, activities = journal_with_intent()
    out = await saga_env(SAGA).run(activities.resolve_step, request(True))
    assert out.compensable is True  # charge declares refund
