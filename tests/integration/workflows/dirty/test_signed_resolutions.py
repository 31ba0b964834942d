"""Resolutions where the worker has an approver registry: only signed actions count, by
a key enrolled to a person of the resolvers' group who is not the requester; every
refusal journaled, the accepted statement re-verifiable offline. And the same wait on a
user's own workflow (the saga API)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from sagacity.approval._registry import ApproverRegistry
from sagacity.approval._registry_file import RegistryFile
from sagacity.approval._resolutions import Resolution
from sagacity.approval._signed_action import sign_action
from sagacity.approval._signing import SigningKey, verify_signature
from sagacity.approval._statements import statement_bytes
from sagacity.audit._decisions import DecisionAudit
from sagacity.audit._export import verify_store
from sagacity.examples.orders import Shop
from sagacity.journal._canonical import canonical_text
from sagacity.journal._chain import verify_chain
from sagacity.journal._entry import JournalEntry
from sagacity.journal._phases import SagaStatus
from sagacity.stores import JournalStore
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker.client._client import saga_result
from sagacity.worker.client._saga_client import SagaClient
from sagacity.workflows._models import (
    ResolutionPolicy,
    ResolutionResult,
    SagaInput,
    SagaView,
    ToolCall,
)
from tests.integration.workflows.dirty.toolkit import HangingLedger
from tests.integration.workflows.dirty.user_workflow import DirtyOrder
from tests.support.forgery import rehashed
from tests.support.workflows import RESERVE, entries_of, eventually

pytestmark = pytest.mark.timeout(90)
PAY = ToolCall(tool="hanging_payment", args={"amount": 250})


@dataclass
class Signed:
    temporal: Any
    store: JournalStore
    ledger: HangingLedger
    shop: Shop
    queue: str
    keys: dict[str, SigningKey]
    registry: ApproverRegistry

    def client(self, name: str | None = None) -> SagaClient:
        signer = self.keys[name] if name else None
        return SagaClient(self.temporal, task_queue=self.queue, signer=signer)


@pytest.fixture
async def signed(
    temporal_env: WorkflowEnvironment, journal: JournalStore, tmp_path: Path
) -> AsyncIterator[Signed]:
    keys = {n: SigningKey.generate(n) for n in ("rita", "olivia", "alice", "mallory")}
    since = datetime.now(UTC) - timedelta(hours=1)
    reg = ApproverRegistry(version=1, keys=[])
    for name, groups in (("rita", ["ops"]), ("olivia", ["ops"]), ("alice", ["finance"])):
        reg = reg.enroll(name, keys[name].public_key, valid_from=since, groups=groups)
    reg.save(tmp_path / "approvers.json")
    shop, ledger = Shop(tmp_path / "shop.db"), HangingLedger(tmp_path / "ledger.db")
    queue = f"signed-dirty-{uuid.uuid4().hex[:8]}"
    worker = new_worker(
        temporal_env.client, store=journal, toolbox=Toolbox.build(shop, ledger),
        task_queue=queue, approvers=tmp_path / "approvers.json", workflows=[DirtyOrder],
    )  # fmt: skip
    async with worker:
        yield Signed(temporal_env.client, journal, ledger, shop, queue, keys, reg)


async def waiting(client: SagaClient, saga_id: str) -> SagaView:
    async def probe() -> SagaView | None:
        try:
            view = await client.status(saga_id)
        except Exception:  # a user workflow answers no query before its saga opens
            return None
        return view if view.status is SagaStatus.NEEDS_HUMAN else None

    return await eventually(probe, 40)


async def test_only_signed_actions_of_an_allowed_resolver_count(signed: Signed) -> None:
    saga_id = f"signed-dirty-{uuid.uuid4().hex[:8]}"
    inp = SagaInput(
        plan=[RESERVE, PAY], tool_timeout_seconds=2, tool_heartbeat_timeout_seconds=1,
        resolution=ResolutionPolicy(groups=["ops"]),
    )  # fmt: skip
    handle = await signed.client("rita").start(inp, saga_id=saga_id)
    view = await waiting(signed.client(), saga_id)
    assert [d.step for d in view.dirty] == [2] and view.human_deadline is not None

    async def refused(body: dict[str, Any]) -> str:
        with pytest.raises(WorkflowUpdateFailedError) as caught:
            await handle.execute_update("resolve", body)
        cause: Any = caught.value.cause
        return str(cause.details[0])

    base = {"saga_id": saga_id, "action": "happened", "step": 2}
    assert await refused({**base, "actor": "olivia"}) == "UNSIGNED"
    assert (
        await refused(sign_action(signed.keys["mallory"], Resolution(**base)).body())
        == "UNKNOWN_KEY"
    )
    assert (
        await refused(sign_action(signed.keys["alice"], Resolution(**base)).body())
        == "NOT_IN_GROUP"
    )
    assert (
        await refused(sign_action(signed.keys["rita"], Resolution(**base)).body())
        == "REQUESTER_CANNOT_RESOLVE"
    )
    tampered = {
        **sign_action(signed.keys["olivia"], Resolution(**base)).body(),
        "action": "did_not_happen",
    }
    assert await refused(tampered) == "BAD_SIGNATURE"
    other = sign_action(
        signed.keys["olivia"], Resolution(**{**base, "saga_id": "another-saga"})
    ).body()
    assert await refused(other) == "WRONG_SAGA"
    refusals = [
        (e.error or "").split(":")[0]
        for e in entries_of(signed.store, saga_id, "RESOLUTION_REFUSED")
    ]
    assert refusals == [
        "UNSIGNED", "UNKNOWN_KEY", "NOT_IN_GROUP", "REQUESTER_CANNOT_RESOLVE", "BAD_SIGNATURE",
        "WRONG_SAGA",
    ]  # fmt: skip
    assert all(e.actor is None for e in entries_of(signed.store, saga_id, "RESOLUTION_REFUSED"))
    assert signed.ledger.payments()[0]["voided"] is False

    done = await signed.client("olivia").resolve(saga_id, 2, happened=True, reason="PSP says paid")
    assert done.actor == "olivia" and done.outcome == "compensated"
    result = await saga_result(handle)
    assert result.status is SagaStatus.COMPENSATED
    [resolved] = entries_of(signed.store, saga_id, "RESOLVED")
    statement, signature = resolved.input["statement"], resolved.input["signature"]
    assert statement["type"] == "sagacity/resolution/v1" and statement["actor"] == "olivia"
    assert verify_signature(signed.keys["olivia"].public_key, statement_bytes(statement), signature)
    assert signed.ledger.payments()[0]["voided"] is True
    assert verify_store(signed.store, saga_id).ok

    # Offline, from the journal alone: the requester and olivia's resolution verify...
    entries = list(signed.store.entries(saga_id))
    assert _audit(entries, signed.registry).signed == 2 and _audit(entries, signed.registry).ok
    assert _audit(entries, None).signed == 2  # with the keys journaled beside them
    # ...and a superuser who rewrites the resolution (and every hash after it) to say
    # "did not happen" is caught by the signature, though the chain verifies again.
    at = next(i for i, e in enumerate(entries) if e.phase.value == "RESOLVED")
    said = "did_not_happen"
    forged_input = {**entries[at].input, "statement": {**statement, "action": said}}
    forged_result = {**entries[at].result, "action": said}
    forged = rehashed(
        entries,
        at,
        input_json=canonical_text(forged_input),
        result_json=canonical_text(forged_result),
    )
    assert verify_chain(saga_id, forged).ok
    problems = _audit(forged, signed.registry).problems
    assert [(seq, "does not verify" in text) for _, seq, text in problems] == [
        (entries[at].seq, True),  # the statement no longer verifies
        (entries[at].seq + 1, False),  # and the EXECUTED in her name contradicts it
    ]
    # Every other rewrite of the person's word, hashes recomputed, is caught too.
    resolved, executed = entries[at], entries[at + 1]
    assert (executed.phase.value, executed.actor) == ("EXECUTED", "olivia")
    unsigned_stmt = {**statement, "key_id": "", "issued_at": ""}
    forgeries = {
        "signature stripped": rehashed(
            entries, at, input_json=canonical_text({"statement": unsigned_stmt, "signature": None}),
            result_json=canonical_text({**resolved.result, "registry": None, "key": None}),
        ),
        "result changed": rehashed(entries, at + 1, result_json=canonical_text({"psp": "forged"})),
        "outcome re-attributed": rehashed(entries, at + 1, actor_json=canonical_text("oscar")),
        "reason changed": rehashed(
            entries, at, result_json=canonical_text({**resolved.result, "reason": "rita said so"})
        ),
        "RESOLVED dropped": rehashed(entries[:at] + entries[at + 1 :], at),
        "statement journaled twice": rehashed(
            [*entries[: at + 1], replace(resolved, attempt=2), *entries[at + 1 :]], at + 1
        ),
    }  # fmt: skip
    for name, rewritten in forgeries.items():
        assert verify_chain(saga_id, rewritten).ok, name  # the chain alone cannot tell
        assert _audit(rewritten, signed.registry).problems, f"{name} passed the audit"


def _audit(entries: list[JournalEntry], registry: ApproverRegistry | None) -> DecisionAudit:
    audit = DecisionAudit(registry)
    for entry in entries:
        audit.observe(entry)
    return audit


async def test_a_user_workflow_waits_and_is_resolved(signed: Signed) -> None:
    client = signed.client("olivia")
    saga_id = f"user-dirty-{uuid.uuid4().hex[:8]}"
    claim = signed.client("rita").requester_claim(saga_id)  # signed: the worker has a registry
    handle = await client.start_workflow(DirtyOrder.run, "before", claim, saga_id=saga_id)
    view = await waiting(client, saga_id)
    assert [(d.step, d.tool) for d in view.dirty] == [(2, "hanging_payment")]
    assert signed.shop.stock("widget") == 10  # the reservation was released first
    done = await client.resolve(saga_id, 2, happened=False, reason="nothing at the PSP")
    assert done.outcome == "nothing to undo" and done.status is SagaStatus.COMPENSATED
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    cause: Any = failed.value.cause  # the saga API's SagaFailedError, with the saga's result
    assert cause.type == "SagaCompensated" and cause.details[0]["status"] == "COMPENSATED"
    closed = entries_of(signed.store, saga_id, "SAGA_CLOSED")[0].result
    assert closed["status"] == "COMPENSATED" and closed["needs_human"] is False
    assert signed.ledger.payments() == []
    assert verify_store(signed.store, saga_id).ok


async def test_a_signed_statement_acts_once(signed: Signed) -> None:
    """The refund stays down: olivia's signed retry fails again and the step is dirty
    again. Her statement, sent once more (by anyone who saw it), is refused; a new one,
    once the provider is back, cleans it."""
    signed.shop.set_fault("refund")
    saga_id = f"signed-replay-{uuid.uuid4().hex[:8]}"
    charge = ToolCall(tool="charge_card", args={"amount": 7})
    fails = ToolCall(tool="ship_order", args={"address": "x", "fail": True})
    handle = await signed.client("rita").start(
        SagaInput(plan=[charge, fails], compensation_attempts=1), saga_id=saga_id
    )
    await waiting(signed.client(), saga_id)
    retry = sign_action(
        signed.keys["olivia"], Resolution(saga_id=saga_id, action="retry_compensation", step=1)
    ).body()
    again = await handle.execute_update("resolve", retry, result_type=ResolutionResult)
    assert again.dirty == [1] and "failed" in again.outcome
    with pytest.raises(WorkflowUpdateFailedError) as replayed:
        await handle.execute_update("resolve", retry)
    cause: Any = replayed.value.cause
    assert cause.details[0] == "STALE_STATEMENT" and "already acted on" in cause.message
    signed.shop.clear_fault("refund")
    done = await signed.client("olivia").retry_compensation(saga_id, 1)
    assert done.outcome == "compensated"
    assert (await saga_result(handle)).status is SagaStatus.COMPENSATED
    resolved = entries_of(signed.store, saga_id, "RESOLVED")
    assert [(e.attempt, e.actor) for e in resolved] == [(1, "olivia"), (2, "olivia")]
    assert [c["refunded"] for c in signed.shop.charges()] == [True]


async def test_a_registry_that_cannot_answer_refuses_and_never_fails_the_saga(
    signed: Signed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's registry raises while a signed resolution is judged (by signal, where
    an error would fail the workflow): refused UNKNOWN_KEY and journaled; the saga waits on
    and takes the next one once the registry answers again."""
    saga_id = f"signed-broken-{uuid.uuid4().hex[:8]}"
    inp = SagaInput(plan=[RESERVE, PAY], tool_timeout_seconds=2, tool_heartbeat_timeout_seconds=1)
    handle = await signed.client("rita").start(inp, saga_id=saga_id)
    await waiting(signed.client(), saga_id)

    def broken(self: RegistryFile, key_id: str | None) -> Any:
        raise OSError("registry disk gone")

    monkeypatch.setattr(RegistryFile, "lookup", broken)
    body = sign_action(
        signed.keys["olivia"], Resolution(saga_id=saga_id, action="happened", step=2)
    ).body()
    await handle.signal("resolve", body)
    [refused] = await eventually(lambda: _refused_entries(signed.store, saga_id), 20)
    assert (refused.error or "").startswith("UNKNOWN_KEY") and "registry" in (refused.error or "")
    monkeypatch.undo()
    done = await signed.client("olivia").resolve(saga_id, 2, happened=True)
    assert done.outcome == "compensated"
    assert (await saga_result(handle)).status is SagaStatus.COMPENSATED
    history = await handle.fetch_history()
    assert not any(e.HasField("workflow_task_failed_event_attributes") for e in history.events)


async def _refused_entries(store: JournalStore, saga_id: str) -> list[JournalEntry] | None:
    return entries_of(store, saga_id, "RESOLUTION_REFUSED") or None
