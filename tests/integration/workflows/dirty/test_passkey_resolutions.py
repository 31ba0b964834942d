"""A failed refund resolved with a passkey, end to end on the dev server: the worker has
an approver registry, the refund provider is down longer than the compensation's
retries, the saga waits in NEEDS_HUMAN. A passkey of a person outside the resolvers'
group and another statement's assertion are refused and journaled; olivia's passkey,
once the provider is back, retries the refund and the saga compensates. The assertion is
journaled with the RESOLVED entry; the history replays (patch passkey-resolutions);
`verify-file` re-checks the assertion offline and names an edited one. And an unknown
outcome vouched for with a passkey (`happened`, recorded by the worker's activity)."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment
from typer.testing import CliRunner

from sagacity.approval._passkeys import (
    draft_options,
    enroll_passkey,
    new_challenge,
    passkey_draft,
    passkey_signed,
    registration_options,
    verify_registration,
)
from sagacity.approval._registry import ApproverRegistry, EnrolledKey
from sagacity.approval._resolutions import Resolution
from sagacity.approval._signing import SigningKey
from sagacity.audit._export import entry_line
from sagacity.examples.orders import Shop
from sagacity.journal._canonical import canonical_text
from sagacity.journal._chain import verify_chain
from sagacity.journal._entry import JournalEntry
from sagacity.journal._phases import Phase, SagaStatus
from sagacity.stores import JournalStore
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker.cli._main import app
from sagacity.worker.client._client import saga_result
from sagacity.worker.client._saga_client import SagaClient
from sagacity.workflows._models import ResolutionPolicy, ResolutionResult, SagaInput, SagaView
from tests.integration.approval.passkeys.test_passkey_replay import (
    PASSKEY_RESOLUTION_HISTORIES,
    replay_failure,
)
from tests.integration.workflows.dirty.test_signed_resolutions import PAY, _audit
from tests.integration.workflows.dirty.toolkit import HangingLedger
from tests.support.forgery import rehashed
from tests.support.soft_authenticator import SoftAuthenticator
from tests.support.workflows import CHARGE, RESERVE, SHIP_FAILS, entries_of, eventually

pytestmark = pytest.mark.timeout(120)
ORIGIN = "http://localhost:8766"


@dataclass
class Desk:
    client: Client
    store: JournalStore
    shop: Shop
    ledger: HangingLedger
    queue: str
    registry_file: Path
    devices: dict[str, SoftAuthenticator]
    passkeys: dict[str, EnrolledKey]
    rita: SigningKey

    def saga_client(self, signer: SigningKey | None = None) -> SagaClient:
        return SagaClient(self.client, task_queue=self.queue, signer=signer)

    def body(self, who: str, saga_id: str, **fields: Any) -> dict[str, Any]:
        """`who`'s passkey resolution, as the inbox builds it (draft, options, assertion)."""
        key, device = self.passkeys[who], self.devices[who]
        draft = passkey_draft(Resolution(saga_id=saga_id, **fields), key)
        challenge = draft_options(draft, key)["challenge"]
        return passkey_signed(draft, device.get(challenge, ORIGIN, "localhost")).body()


def _enroll(path: Path, device: SoftAuthenticator, who: str, groups: list[str]) -> EnrolledKey:
    challenge = new_challenge()
    options = registration_options(
        approver=who, rp_id="localhost", rp_name="t", challenge=challenge
    )
    key = verify_registration(
        device.create(options, ORIGIN), approver=who, challenge=challenge, rp_id="localhost",
        origins=[ORIGIN], valid_from=datetime.now(UTC) - timedelta(hours=1), groups=groups,
    )  # fmt: skip
    enroll_passkey(path, key)
    return key


@pytest.fixture
async def desk(
    temporal_env: WorkflowEnvironment, journal: JournalStore, tmp_path: Path
) -> AsyncIterator[Desk]:
    rita = SigningKey.generate("rita")  # the requester, with an Ed25519 key
    path = tmp_path / "approvers.json"
    since = datetime.now(UTC) - timedelta(hours=1)
    ApproverRegistry().enroll("rita", rita.public_key, valid_from=since, groups=["ops"]).save(path)
    devices = {"olivia": SoftAuthenticator(), "alice": SoftAuthenticator(algorithm=-8)}
    passkeys = {
        "olivia": _enroll(path, devices["olivia"], "olivia", ["ops"]),
        "alice": _enroll(path, devices["alice"], "alice", ["finance"]),
    }
    shop, ledger = Shop(tmp_path / "shop.db"), HangingLedger(tmp_path / "ledger.db")
    queue = f"passkey-dirty-{uuid.uuid4().hex[:8]}"
    worker = new_worker(
        temporal_env.client, store=journal, toolbox=Toolbox.build(shop, ledger),
        task_queue=queue, approvers=path,
        log_key=None,  # its exports are hand-made entry lines: no checkpoints to check
    )  # fmt: skip
    async with worker:
        yield Desk(temporal_env.client, journal, shop, ledger, queue, path, devices, passkeys, rita)


async def needs_human(desk: Desk, saga_id: str) -> SagaView:
    async def probe() -> SagaView | None:
        view = await desk.saga_client().status(saga_id)
        return view if view.status is SagaStatus.NEEDS_HUMAN else None

    return await eventually(probe, 60)


async def test_a_failed_refund_is_resolved_with_a_passkey_and_verify_file_checks_it(
    desk: Desk, tmp_path: Path
) -> None:
    desk.shop.set_fault("refund")
    saga_id = f"passkey-refund-{uuid.uuid4().hex[:8]}"
    inp = SagaInput(
        plan=[CHARGE, SHIP_FAILS], compensation_attempts=1,
        resolution=ResolutionPolicy(groups=["ops"]),
    )  # fmt: skip
    handle = await desk.saga_client(desk.rita).start(inp, saga_id=saga_id)

    view = await needs_human(desk, saga_id)
    assert [(d.step, d.kind) for d in view.dirty] == [(1, "COMPENSATION_FAILED")]
    retry = {"action": "retry_compensation", "step": 1, "reason": "the PSP is back"}

    async def refused(body: dict[str, Any]) -> str:
        with pytest.raises(WorkflowUpdateFailedError) as caught:
            await handle.execute_update("resolve", body)
        cause: Any = caught.value.cause
        return str(cause.details[0])

    # alice's passkey is good, but resolving needs ops.
    assert await refused(desk.body("alice", saga_id, **retry)) == "NOT_IN_GROUP"
    # olivia's assertion over another statement (her reason), moved onto this one.
    signed = desk.body("olivia", saga_id, **{**retry, "reason": "rita said so"})
    assert await refused({**signed, "reason": "the PSP is back"}) == "WRONG_CHALLENGE"
    # ...and over another saga's statement.
    assert await refused({**desk.body("olivia", "another-saga", **retry),
                          "saga_id": saga_id}) == "WRONG_CHALLENGE"  # fmt: skip
    refusals = entries_of(desk.store, saga_id, "RESOLUTION_REFUSED")
    assert [(e.error or "").split(":")[0] for e in refusals] == [
        "NOT_IN_GROUP", "WRONG_CHALLENGE", "WRONG_CHALLENGE"
    ]  # fmt: skip
    assert "'alice'" in (refusals[0].error or "")
    assert "passkey" in refusals[0].input  # the refused assertion is kept as evidence
    assert [c["refunded"] for c in desk.shop.charges()] == [False]

    desk.shop.clear_fault("refund")
    done = await handle.execute_update(
        "resolve", desk.body("olivia", saga_id, **retry), result_type=ResolutionResult
    )
    assert (done.actor, done.outcome, done.dirty) == ("olivia", "compensated", [])
    assert (await saga_result(handle)).status is SagaStatus.COMPENSATED
    assert [c["refunded"] for c in desk.shop.charges()] == [True]

    history = await desk.client.get_workflow_handle(saga_id).fetch_history()
    assert await replay_failure(history) is None
    if os.environ.get("SAGACITY_RECORD_PASSKEY_HISTORY"):  # re-record the committed history
        PASSKEY_RESOLUTION_HISTORIES.mkdir(parents=True, exist_ok=True)
        for old in PASSKEY_RESOLUTION_HISTORIES.glob("*.json"):
            old.unlink()
        (PASSKEY_RESOLUTION_HISTORIES / f"{saga_id}.json").write_text(history.to_json() + "\n")

    entries = list(desk.store.entries(saga_id))
    at = next(i for i, e in enumerate(entries) if e.phase is Phase.RESOLVED)
    resolved = entries[at]
    evidence, outcome = json.loads(resolved.input_json), json.loads(resolved.result_json)
    olivia = desk.passkeys["olivia"]
    assert resolved.actor == "olivia" and evidence["signature"] is None
    assert evidence["statement"]["key_id"] == olivia.key_id
    assert evidence["passkey"]["credential_id"] == olivia.passkey.credential_id  # type: ignore[union-attr]
    assert outcome["passkey"] == {"user_verified": True, "sign_count": 0}
    assert outcome["key"]["passkey"]["origins"] == [ORIGIN]

    runner, export = CliRunner(), tmp_path / "export.jsonl"

    def verify(rows: list[JournalEntry], *, registry: bool = True) -> Any:
        export.write_text("".join(entry_line(e) + "\n" for e in rows), encoding="utf-8")
        given = ["--approvers", str(desk.registry_file)] if registry else []
        return runner.invoke(app, ["verify-file", str(export), *given])

    ok = verify(entries)
    assert ok.exit_code == 0, ok.output
    assert "2 verified against the approver registry" in ok.output  # rita's start, olivia
    journaled = verify(entries, registry=False)  # with the credential journaled
    assert journaled.exit_code == 0 and "2 verified with the keys journaled" in journaled.output

    # One byte of the journaled assertion's signature changed, every hash after it
    # recomputed: the chain cannot tell, the passkey check can.
    sig = evidence["passkey"]["signature"]
    evidence["passkey"]["signature"] = sig[:6] + ("A" if sig[6] != "A" else "B") + sig[7:]
    forged = rehashed(entries, at, input_json=canonical_text(evidence))
    assert verify_chain(saga_id, forged).ok
    bad = verify(forged)
    assert bad.exit_code == 1, bad.output
    assert f"seq {resolved.seq}" in bad.output and "BAD_SIGNATURE" in bad.output
    assert verify(forged, registry=False).exit_code == 1
    # The assertion stripped (the entry then reads as unsigned): a registry saga's
    # resolution must be signed.
    stripped = {k: v for k, v in json.loads(resolved.input_json).items() if k != "passkey"}
    bare = verify(rehashed(entries, at, input_json=canonical_text(stripped)))
    assert bare.exit_code == 1 and "unsigned resolution" in bare.output
    # The same statement journaled twice acts twice: caught.
    twice = rehashed([*entries[: at + 1], entries[at], *entries[at + 1 :]], at + 1)
    assert "journaled twice" in verify(twice).output


async def test_an_unknown_outcome_vouched_for_with_a_passkey_is_recorded_and_undone(
    desk: Desk,
) -> None:
    """`happened`, signed with a passkey: the activity that records it journals RESOLVED
    with the assertion and EXECUTED in olivia's name with the result her statement
    hashed; the payment is voided; the audit checks both, and catches the result moved."""
    saga_id = f"passkey-unknown-{uuid.uuid4().hex[:8]}"
    inp = SagaInput(
        plan=[RESERVE, PAY], tool_timeout_seconds=2, tool_heartbeat_timeout_seconds=1,
        resolution=ResolutionPolicy(groups=["ops"]),
    )  # fmt: skip
    handle = await desk.saga_client(desk.rita).start(inp, saga_id=saga_id)
    view = await needs_human(desk, saga_id)
    assert [(d.step, d.kind) for d in view.dirty] == [(2, "UNKNOWN_OUTCOME")]
    said = {"action": "happened", "step": 2, "result": {"psp": "pay_77"}, "reason": "PSP"}
    done = await handle.execute_update(
        "resolve", desk.body("olivia", saga_id, **said), result_type=ResolutionResult
    )
    assert (done.actor, done.outcome) == ("olivia", "compensated")
    assert (await saga_result(handle)).status is SagaStatus.COMPENSATED
    assert desk.ledger.payments()[0]["voided"] is True

    entries = list(desk.store.entries(saga_id))
    at = next(i for i, e in enumerate(entries) if e.phase is Phase.RESOLVED)
    resolved, executed = entries[at], entries[at + 1]
    assert resolved.input["passkey"]["signature"] and resolved.input["signature"] is None
    assert (executed.phase, executed.actor, executed.result) == (
        Phase.EXECUTED, "olivia", {"psp": "pay_77"}
    )  # fmt: skip
    registry = ApproverRegistry.load(desk.registry_file)
    audit = _audit(entries, registry)
    assert audit.ok and audit.signed == 2, audit.problems  # rita's start, olivia's word
    moved = rehashed(entries, at + 1, result_json=canonical_text({"psp": "pay_78"}))
    assert verify_chain(saga_id, moved).ok
    assert [text for _, _, text in _audit(moved, registry).problems] == [
        "the result is not the one the person's statement hashed"
    ]


async def test_a_passkey_statement_acts_once_whatever_its_signature(desk: Desk) -> None:
    """The refund stays down: olivia's passkey retry fails again and the step is dirty
    again. A second assertion over the same statement (an ES256 device signs it anew,
    with another signature) is refused STALE_STATEMENT; a new statement, once the
    provider is back, cleans it."""
    desk.shop.set_fault("refund")
    saga_id = f"passkey-once-{uuid.uuid4().hex[:8]}"
    inp = SagaInput(plan=[CHARGE, SHIP_FAILS], compensation_attempts=1)
    handle = await desk.saga_client(desk.rita).start(inp, saga_id=saga_id)
    await needs_human(desk, saga_id)
    olivia, device = desk.passkeys["olivia"], desk.devices["olivia"]
    draft = passkey_draft(Resolution(saga_id=saga_id, action="retry_compensation", step=1), olivia)
    challenge = draft_options(draft, olivia)["challenge"]
    first = passkey_signed(draft, device.get(challenge, ORIGIN, "localhost")).body()
    again = await handle.execute_update("resolve", first, result_type=ResolutionResult)
    assert again.dirty == [1] and "failed" in again.outcome
    second = passkey_signed(draft, device.get(challenge, ORIGIN, "localhost")).body()
    assert second["passkey"]["signature"] != first["passkey"]["signature"]
    with pytest.raises(WorkflowUpdateFailedError) as replayed:
        await handle.execute_update("resolve", second)
    cause: Any = replayed.value.cause
    assert cause.details[0] == "STALE_STATEMENT" and "already acted on" in cause.message
    desk.shop.clear_fault("refund")
    retry = {"action": "retry_compensation", "step": 1}
    done = await handle.execute_update(
        "resolve", desk.body("olivia", saga_id, **retry), result_type=ResolutionResult
    )
    assert done.outcome == "compensated"
    assert (await saga_result(handle)).status is SagaStatus.COMPENSATED
    entries = list(desk.store.entries(saga_id))
    assert [(e.attempt, e.actor) for e in entries if e.phase is Phase.RESOLVED] == [
        (1, "olivia"), (2, "olivia")
    ]  # fmt: skip
    audit = _audit(entries, ApproverRegistry.load(desk.registry_file))
    assert audit.ok and audit.signed == 3, audit.problems
