"""Signed approvals end to end on the dev server: every attack of the issue really sent to a
waiting saga, refused, journaled APPROVAL_REFUSED with its reason, and the payment never
made; then the positive paths (a 2-of-3 quorum, rotation, offline re-verification)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowUpdateFailedError
from typer.testing import CliRunner

from sagacity.approval._models import ApprovalDecision
from sagacity.approval._policy import ApprovalPolicy, ArgRule
from sagacity.approval._registry import ApproverRegistry
from sagacity.approval._signed_action import sign_action
from sagacity.approval._signing import SigningKey
from sagacity.approval._statements import statement_bytes
from sagacity.audit._decisions import DecisionAudit
from sagacity.audit._export import entry_line, verify_jsonl
from sagacity.examples.orders import INITIAL_STOCK, Shop
from sagacity.journal._chain import verify_chain
from sagacity.journal._entry import JournalEntry
from sagacity.journal._phases import Phase, SagaStatus
from sagacity.stores import JournalStore
from sagacity.tools._decorators import ToolContext, irreversible
from sagacity.worker.cli._main import app
from sagacity.worker.client._saga_client import SagaClient
from sagacity.workflows._models import PendingApproval, SagaInput, ToolCall
from tests.support.forgery import rehashed
from tests.support.workflows import entries_of, eventually

RESERVE = ToolCall(tool="reserve_inventory", args={"sku": "widget", "qty": 1})
IBAN = "DE89370400440532013000"


class Bank:
    """A payment tool whose policy needs finance, and two people above 10,000."""

    def __init__(self) -> None:
        self.paid: list[dict[str, Any]] = []

    @irreversible(
        policy=ApprovalPolicy(
            groups=frozenset({"finance"}),
            rules=(ArgRule.above("amount", 10_000, quorum=2),),
        )
    )
    def pay(self, iban: str, amount: int, ctx: ToolContext) -> dict[str, Any]:
        """Pay `amount` to `iban`."""
        self.paid.append({"iban": iban, "amount": amount, "key": ctx.idempotency_key})
        return {"paid": amount}


class Bench:
    def __init__(self, tmp: Path, client: Any, store: JournalStore, queue: str) -> None:
        self.tmp, self.client, self.store, self.queue = tmp, client, store, queue
        self.registry_file = tmp / "approvers.json"
        now = datetime.now(UTC)
        self.keys = {name: SigningKey.generate(name) for name in ("alice", "bob", "carol", "rita")}
        self.keys["dave"] = SigningKey.generate("dave")  # enrolled, expired an hour ago
        self.keys["erin"] = SigningKey.generate("erin")  # enrolled, revoked during a test
        self.mallory = SigningKey.generate("mallory")  # never enrolled
        self.alice2 = SigningKey.generate("alice")  # alice's second key
        reg = ApproverRegistry(version=1, keys=[])
        for name in ("alice", "bob", "carol", "rita", "erin"):
            reg = reg.enroll(
                name, self.keys[name].public_key, valid_from=now - timedelta(hours=3),
                groups=["finance"],
            )  # fmt: skip
        reg = reg.enroll(
            "dave", self.keys["dave"].public_key, valid_from=now - timedelta(hours=2),
            valid_until=now - timedelta(hours=1), groups=["finance"],
        )  # fmt: skip
        reg = reg.enroll(
            "alice", self.alice2.public_key, valid_from=now - timedelta(hours=3),
            groups=["finance"],
        )  # fmt: skip
        reg.save(self.registry_file)
        self.shop = Shop(tmp / "shop.db")
        self.bank = Bank()

    def client_of(self, name: str | None) -> SagaClient:
        signer = self.keys[name] if name else None
        return SagaClient(self.client, task_queue=self.queue, store=self.store, signer=signer)

    async def start(self, amount: int, *, requester: str | None = "rita") -> str:
        saga_id = f"signed-{uuid.uuid4().hex[:10]}"
        pay = ToolCall(tool="pay", args={"iban": IBAN, "amount": amount})
        await self.client_of(requester).start(SagaInput(plan=[RESERVE, pay]), saga_id=saga_id)
        return saga_id

    async def pending(self, saga_id: str) -> PendingApproval:
        return (await self.client_of(None).wait_pending(saga_id, timeout=30)).pending

    def refusals(self, saga_id: str) -> list[str]:
        return [
            (e.error or "").split(":")[0]
            for e in entries_of(self.store, saga_id, "APPROVAL_REFUSED")
        ]

    async def refused_as(self, saga_id: str, count: int) -> str:
        async def probe() -> str | None:
            got = self.refusals(saga_id)
            return got[-1] if len(got) >= count else None

        return await eventually(probe, 30)


def decision_on(
    p: PendingApproval, approve: bool = True, reason: str = "ok", **signed_over: Any
) -> ApprovalDecision:
    """The decision on the pending approval `p` as the saga shows it, with any of its
    fields replaced by `signed_over` (what a forger would sign over instead)."""
    fields = {
        "saga_id": p.saga_id,
        "step": p.step,
        "tool": p.tool,
        "payload_sha256": p.payload_sha256,
    }
    fields.update(signed_over)
    return ApprovalDecision(approve=approve, reason=reason, **fields)


def signed(
    key: SigningKey, p: PendingApproval, approve: bool = True, **signed_over: Any
) -> dict[str, Any]:
    return sign_action(key, decision_on(p, approve, **signed_over)).body()


async def test_every_attack_is_refused_journaled_and_the_payment_never_made(bench: Bench) -> None:
    saga_id = await bench.start(5_000)
    p = await bench.pending(saga_id)
    assert p.signatures_required and p.needs == "1 of 1 approval from finance"
    handle = bench.client.get_workflow_handle(saga_id)
    unsigned = {"saga_id": saga_id, "step": p.step, "tool": p.tool,
                "payload_sha256": p.payload_sha256, "approver": "alice"}  # fmt: skip
    bob, k = bench.keys["bob"], bench.keys
    claims_alice = {**unsigned, "reason": "", "issued_at": signed(bob, p)["issued_at"],
                    "key_id": bob.key_id, "approve": True}  # fmt: skip
    claims_alice["signature"] = bob.sign(
        statement_bytes(ApprovalDecision.model_validate(claims_alice).statement())
    )
    real = signed(k["alice"], p)
    attacks: list[tuple[str, dict[str, Any], str]] = [
        ("unsigned", unsigned, "UNSIGNED"),
        ("reserved actor", {**unsigned, "approver": "sagacity:timeout"}, "RESERVED_APPROVER"),
        ("bob's key claiming alice", claims_alice, "APPROVER_MISMATCH"),
        ("a key never enrolled", signed(bench.mallory, p), "UNKNOWN_KEY"),
        ("signed over another hash",
         {**signed(k["alice"], p, payload_sha256="ab" * 32), "payload_sha256": p.payload_sha256},
         "BAD_SIGNATURE"),
        ("signed over another step", {**signed(k["alice"], p, step=9), "step": p.step},
         "BAD_SIGNATURE"),
        ("signed over another tool", {**signed(k["alice"], p, tool="refund"), "tool": p.tool},
         "BAD_SIGNATURE"),
        ("an edited reason", {**real, "reason": "changed"}, "BAD_SIGNATURE"),
        ("an expired key", signed(k["dave"], p), "KEY_NOT_VALID"),
        ("the requester approving", signed(k["rita"], p), "REQUESTER_CANNOT_APPROVE"),
    ]  # fmt: skip
    for count, (what, body, reason) in enumerate(attacks, start=1):
        await handle.signal("approve", body)
        assert await bench.refused_as(saga_id, count) == reason, what
    # Through the update too: refused, journaled, and the sender told why.
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await handle.execute_update("decide", {**unsigned, "approve": True})
    assert "UNSIGNED" in str(refused.value.cause)
    assert await bench.refused_as(saga_id, len(attacks) + 1) == "UNSIGNED"
    # Revoked while the saga waits: the worker re-reads the registry for the next decision.
    reg = ApproverRegistry.load(bench.registry_file)
    reg.revoke(k["erin"].key_id, datetime.now(UTC)).save(bench.registry_file)
    await handle.signal("approve", signed(k["erin"], p))
    assert await bench.refused_as(saga_id, len(attacks) + 2) == "KEY_NOT_VALID"
    assert "revoked" in (entries_of(bench.store, saga_id, "APPROVAL_REFUSED")[-1].error or "")

    assert bench.bank.paid == []  # nothing above got the payment made
    assert (await bench.client_of(None).status(saga_id)).status is SagaStatus.AWAITING_APPROVAL
    decided = await bench.client_of("alice").approve(saga_id)
    assert decided.approver == "alice" and decided.needs is None
    result = await bench.client_of(None).result(saga_id)
    assert result.status is SagaStatus.COMPLETED
    assert [x["amount"] for x in bench.bank.paid] == [5_000]
    [approved] = entries_of(bench.store, saga_id, "APPROVED")
    assert approved.actor == "alice" and approved.input["signature"]
    in_force = ApproverRegistry.load(bench.registry_file)
    assert approved.result["registry"] == {"version": in_force.version, "sha256": in_force.sha256}
    assert in_force.version == reg.version + 1  # judged with the registry after the revocation
    entries = list(bench.store.entries(saga_id))
    assert verify_chain(saga_id, entries).ok
    audit = DecisionAudit(ApproverRegistry.load(bench.registry_file))
    for entry in entries:
        audit.observe(entry)
    assert audit.ok and audit.signed == 2, audit.problems  # the requester and alice


async def test_a_decision_for_one_saga_is_refused_by_another_waiting_on_the_same_step(
    bench: Bench,
) -> None:
    a, b = await bench.start(5_000), await bench.start(5_000)
    pa, pb = await bench.pending(a), await bench.pending(b)
    assert (pa.step, pa.payload_sha256) == (pb.step, pb.payload_sha256)  # same step, same payload
    for_a = signed(bench.keys["alice"], pa)
    await bench.client.get_workflow_handle(b).signal("approve", for_a)
    assert await bench.refused_as(b, 1) == "WRONG_SAGA"
    assert bench.bank.paid == []
    await bench.client.get_workflow_handle(a).signal("approve", for_a)
    assert (await bench.client_of(None).result(a)).status is SagaStatus.COMPLETED
    assert [x["key"] for x in bench.bank.paid] == [f"{a}:2"]  # b's step never ran
    await bench.client_of("bob").reject(b, reason="not this one")
    assert (await bench.client_of(None).result(b)).status is SagaStatus.COMPENSATED


async def test_two_of_three_quorum_counts_each_person_once(bench: Bench) -> None:
    saga_id = await bench.start(50_000)  # above 10,000: two people from finance
    p = await bench.pending(saga_id)
    assert p.needs == "2 of 2 approvals from finance"
    assert p.requirement is not None and p.requirement.because == ["amount above 10,000"]
    first = await bench.client_of("alice").approve(saga_id)
    assert first.needs == "1 of 2 approvals from finance"
    assert (await bench.pending(saga_id)).approvals == ["alice"]
    handle = bench.client.get_workflow_handle(saga_id)
    await handle.signal("approve", signed(bench.alice2, p))  # alice again, with her other key
    assert await bench.refused_as(saga_id, 1) == "DUPLICATE_APPROVER"
    assert bench.bank.paid == []
    await bench.client_of("carol").approve(saga_id)  # bob, the third, is not needed
    assert (await bench.client_of(None).result(saga_id)).status is SagaStatus.COMPLETED
    assert [x["amount"] for x in bench.bank.paid] == [50_000]
    approved = entries_of(bench.store, saga_id, "APPROVED")
    assert [(e.actor, e.result["quorum_met"]) for e in approved] == [
        ("alice", False), ("carol", True),
    ]  # fmt: skip


async def test_an_unsigned_start_is_refused_before_anything_runs(bench: Bench) -> None:
    saga_id = await bench.start(5_000, requester=None)
    result = await bench.client_of(None).result(saga_id)
    assert result.status is SagaStatus.REFUSED
    assert "signed requester" in (result.first_failure or "")
    assert entries_of(bench.store, saga_id, "INTENT") == []
    assert bench.shop.stock("widget") == INITIAL_STOCK["widget"]  # nothing was reserved
    assert bench.bank.paid == []


async def test_rotation_keeps_old_decisions_valid_and_an_altered_signature_is_named(
    bench: Bench, tmp_path: Path
) -> None:
    saga_id = await bench.start(5_000)
    await bench.pending(saga_id)
    await bench.client_of("alice").approve(saga_id)
    assert (await bench.client_of(None).result(saga_id)).status is SagaStatus.COMPLETED
    # Rotation: alice's first key is revoked after it approved; the decision stays valid.
    reg = ApproverRegistry.load(bench.registry_file)
    reg.revoke(bench.keys["alice"].key_id, datetime.now(UTC)).save(bench.registry_file)
    entries = list(bench.store.entries(saga_id))
    export = tmp_path / "export.jsonl"
    export.write_text("".join(entry_line(e) + "\n" for e in entries), encoding="utf-8")
    runner = CliRunner()
    ok = runner.invoke(app, ["verify-file", str(export), "--approvers", str(bench.registry_file)])
    assert ok.exit_code == 0, ok.output
    assert "2 verified against the approver registry" in ok.output

    index = next(i for i, e in enumerate(entries) if e.phase is Phase.APPROVED)
    evidence = json.loads(entries[index].input_json)
    sig = evidence["signature"]
    evidence["signature"] = ("B" if sig[0] != "B" else "C") + sig[1:]
    from sagacity.journal._canonical import canonical_text

    forged = rehashed(entries, index, input_json=canonical_text(evidence))
    assert forged[index].input_json != entries[index].input_json  # the row really changed
    assert verify_chain(saga_id, forged).ok  # the chain alone cannot tell
    export.write_text("".join(entry_line(e) + "\n" for e in forged), encoding="utf-8")
    assert all(r.ok for r in verify_jsonl(export.read_text().splitlines()))
    bad = runner.invoke(app, ["verify-file", str(export), "--approvers", str(bench.registry_file)])
    assert bad.exit_code == 1
    assert f"seq {entries[index].seq}" in bad.output and "does not verify" in bad.output

    def named(forged: list[JournalEntry]) -> str:
        assert verify_chain(saga_id, forged).ok  # hashes recomputed: the chain cannot tell
        export.write_text("".join(entry_line(e) + "\n" for e in forged), encoding="utf-8")
        ran = runner.invoke(
            app, ["verify-file", str(export), "--approvers", str(bench.registry_file)]
        )
        assert ran.exit_code == 1, ran.output
        return ran.output

    # The approval made unsigned and given to mallory.
    out = named(rehashed(entries, index, input_json="null", actor_json='"mallory"'))
    assert f"seq {entries[index].seq}" in out and "unsigned decision" in out
    # Another IBAN paid than the one approved (request, intent and outcome all edited).
    intent = next(i for i, e in enumerate(entries) if e.phase is Phase.INTENT and e.step == 2)
    args = {**json.loads(entries[intent].input_json), "iban": "GB33BUKB20201555555555"}
    out = named(rehashed(entries, intent, input_json=canonical_text(args)))
    assert f"seq {entries[intent].seq}" in out and "other arguments than the approved" in out


async def test_the_cli_starts_and_approves_with_key_files(bench: Bench, temporal_env: Any) -> None:
    """`sagacity start --key` names a signed requester; `approve --key` signs as the key's
    owner; `approve --approver` alone (unsigned) is refused where a registry is set."""
    import asyncio

    rita, alice = bench.tmp / "rita.key", bench.tmp / "alice.key"
    bench.keys["rita"].to_file(rita)
    bench.keys["alice"].to_file(alice)
    plan = bench.tmp / "plan.json"
    plan.write_text(
        json.dumps([RESERVE.model_dump(), {"tool": "pay", "args": {"iban": IBAN, "amount": 7}}])
    )
    env = {
        "TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host,
        "SAGACITY_TASK_QUEUE": bench.queue,
        "SAGACITY_APPROVER": "",
        "SAGACITY_KEY": "",
    }

    def sagacity(*args: str) -> Any:
        return CliRunner().invoke(app, list(args), env=env)

    saga_id = f"cli-signed-{uuid.uuid4().hex[:8]}"
    started = await asyncio.to_thread(
        sagacity, "start", "--plan", str(plan), "--id", saga_id, "--key", str(rita)
    )
    assert started.exit_code == 0, started.output
    await bench.pending(saga_id)
    unsigned = await asyncio.to_thread(sagacity, "approve", saga_id, "--approver", "alice", "--yes")
    assert unsigned.exit_code == 1 and "UNSIGNED" in unsigned.output
    signed_ok = await asyncio.to_thread(sagacity, "approve", saga_id, "--key", str(alice), "--yes")
    assert signed_ok.exit_code == 0, signed_ok.output
    assert "as alice" in signed_ok.output
    assert (await bench.client_of(None).result(saga_id)).status is SagaStatus.COMPLETED
    opened = entries_of(bench.store, saga_id, "SAGA_OPENED")[0]
    assert (
        opened.input["requester"]["verified"] and opened.input["requester"]["requester"] == "rita"
    )
    assert [x["amount"] for x in bench.bank.paid] == [7]


async def test_a_registry_that_cannot_answer_refuses_and_never_fails_the_saga(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's registry raises while a signed decision sent by signal is judged (an
    error in a signal handler would fail the workflow): refused UNKNOWN_KEY, journaled,
    still pending; approved once the registry answers again."""
    from sagacity.approval._registry_file import RegistryFile

    saga_id = await bench.start(5_000)
    p = await bench.pending(saga_id)

    def broken(self: RegistryFile, key_id: str | None) -> Any:
        raise OSError("registry disk gone")

    monkeypatch.setattr(RegistryFile, "lookup", broken)
    body = sign_action(
        bench.keys["alice"],
        ApprovalDecision(
            saga_id=saga_id, step=p.step, tool=p.tool, payload_sha256=p.payload_sha256, approve=True
        ),
    ).body()
    await bench.client.get_workflow_handle(saga_id).signal("approve", body)
    assert await bench.refused_as(saga_id, 1) == "UNKNOWN_KEY"
    monkeypatch.undo()
    await bench.client_of("alice").approve(saga_id)
    assert (await bench.client_of(None).result(saga_id)).status is SagaStatus.COMPLETED
    assert bench.bank.paid and len(bench.bank.paid) == 1
