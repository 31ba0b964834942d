"""A revocation is never undone by putting an old approver registry back, end to end on
the dev server with a signed registry: not across continue-as-new and a worker restart
(the saga carries the newest registry it saw), not by restarting a worker with the old
file (it refuses to start, in process and as `sagacity worker`), and not on a worker that
started before a newer registry was journaled (each answer carries the journal's mark).

Mallory's key is enrolled in finance, then revoked: `before` is the registry without the
revocation, `after` the one with it. Every attack ends with the payment never made."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle

from sagacity.approval._judge import approval_hash
from sagacity.approval._models import ApprovalDecision
from sagacity.approval._policy import ApprovalPolicy
from sagacity.approval._registry import ApproverRegistry, RegistryRolledBackError
from sagacity.approval._registry_marks import RegistryMark, top_mark
from sagacity.approval._signed_action import sign_action
from sagacity.approval._signing import SigningKey
from sagacity.approval._statements import signed_request
from sagacity.examples.orders import INITIAL_STOCK, Shop
from sagacity.journal._entry import JournalEntry
from sagacity.journal._phases import Phase, SagaStatus
from sagacity.stores import JournalStore, open_store
from sagacity.tools._decorators import irreversible
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker.client._saga_client import SagaClient
from sagacity.workflows._models import RequesterClaim, SagaInput, ToolCall
from tests.integration.approval.signed.rollback_workflow import PayInput, PaysAfterContinuing
from tests.support.workers import WorkerProcesses, worker_env
from tests.support.workflows import eventually

IBAN = "DE89370400440532013000"
AMOUNT = 5_000_000
RESERVE = ToolCall(tool="reserve_inventory", args={"sku": "widget", "qty": 1})


class Payments:
    """An irreversible payment: one approval from finance."""

    def __init__(self) -> None:
        self.paid: list[int] = []

    @irreversible(policy=ApprovalPolicy(groups=frozenset({"finance"})))
    def pay(self, iban: str, amount: int) -> dict[str, int]:
        """Pay `amount` to `iban`."""
        self.paid.append(amount)
        return {"paid": amount}


class Registries:
    """The registry file, the keys, and the registry before and after mallory's key was
    revoked; a shop and a bank the tests read back."""

    def __init__(self, tmp: Path) -> None:
        now = datetime.now(UTC)
        self.file = tmp / "approvers.json"
        self.keys = {n: SigningKey.generate(n) for n in ("rita", "mallory", "alice")}
        reg = ApproverRegistry()
        for name, groups in (("rita", []), ("mallory", ["finance"]), ("alice", ["finance"])):
            reg = reg.enroll(
                name, self.keys[name].public_key, valid_from=now - timedelta(hours=1),
                groups=groups,
            )  # fmt: skip
        self.before = reg
        self.after = reg.revoke(self.keys["mallory"].key_id, now)
        self.shop = Shop(tmp / "shop.db")
        self.bank = Payments()
        self.toolbox = Toolbox.build(self.shop, self.bank)

    def mark(self, registry: ApproverRegistry) -> RegistryMark:
        return RegistryMark(version=registry.version, sha256=registry.sha256)

    def mallory_approves(self, saga_id: str, step: int, amount: int = AMOUNT) -> dict[str, Any]:
        """Mallory's signed approval of paying `amount` at `step` (anyone can compute the
        payload's hash; her key is hers)."""
        digest = approval_hash("pay", {"iban": IBAN, "amount": amount})
        return sign_action(
            self.keys["mallory"],
            ApprovalDecision(
                saga_id=saga_id, step=step, tool="pay", payload_sha256=digest, approve=True
            ),
        ).body()

    def claim(self, saga_id: str) -> RequesterClaim:
        return RequesterClaim.model_validate(signed_request(self.keys["rita"], saga_id))


@pytest.fixture
def regs(tmp_path: Path) -> Registries:
    return Registries(tmp_path)


def worker_of(
    client: Client, store: JournalStore, regs: Registries, queue: str
) -> Any:  # a SagaWorker, used as `async with`
    return new_worker(
        client, store=store, toolbox=regs.toolbox, task_queue=queue,
        approvers=regs.file, workflows=[PaysAfterContinuing],
    )  # fmt: skip


def step_entries_after(store: JournalStore, saga_id: str, seq: int) -> list[JournalEntry]:
    return [e for e in store.entries(saga_id, after_seq=seq)]


def decision_after(store: JournalStore, saga_id: str, seq: int) -> Callable[[], Any]:
    """A probe: the first decision journaled after `seq` (refused or accepted)."""

    async def probe() -> JournalEntry | None:
        decided = (Phase.APPROVAL_REFUSED, Phase.APPROVED, Phase.REJECTED)
        return next(
            (e for e in step_entries_after(store, saga_id, seq) if e.phase in decided), None
        )

    return probe


def executed(store: JournalStore, saga_id: str, tool: str) -> Callable[[], Any]:
    async def probe() -> bool:
        return any(e.phase is Phase.EXECUTED and e.tool == tool for e in store.entries(saga_id))

    return probe


def continued(client: Client, saga_id: str, first_run: str | None) -> Callable[[], Any]:
    """A probe: the saga's workflow runs in a later run than `first_run`."""

    async def probe() -> bool:
        return (await client.get_workflow_handle(saga_id).describe()).run_id != first_run

    return probe


async def cancel_and_check_nothing_paid(
    handle: WorkflowHandle[Any, Any], store: JournalStore, regs: Registries, kept: int = 0
) -> None:
    """Cancel the saga: its reservation is undone (`kept`: units other sagas still
    hold), the payment never ran."""
    await handle.cancel()
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    phases = [e.phase for e in store.entries(handle.id)]
    assert Phase.APPROVED not in phases and Phase.COMPENSATED in phases
    assert not [
        e for e in store.entries(handle.id) if e.phase is Phase.EXECUTED and e.tool == "pay"
    ]
    assert regs.bank.paid == []
    assert regs.shop.stock("widget") == INITIAL_STOCK["widget"] - kept


async def test_a_revocation_seen_before_continue_as_new_survives_a_restart_with_the_old_file(
    temporal_env: Any, journal: JournalStore, regs: Registries
) -> None:
    """The saga sees `after` only through a decision it refused (nothing journals that
    registry), continues as new; the worker is restarted with `before` put back, which the
    journal cannot tell from the newest (it records nothing newer). The saga can."""
    client, queue = temporal_env.client, f"tq-{uuid.uuid4().hex[:8]}"
    saga_id = f"rollback-{uuid.uuid4().hex[:10]}"
    regs.before.save(regs.file)
    inp = PayInput(requester=regs.claim(saga_id), iban=IBAN, amount=AMOUNT)
    async with worker_of(client, journal, regs, queue):
        handle = await client.start_workflow(
            PaysAfterContinuing.run, inp, id=saga_id, task_queue=queue
        )
        first_run = handle.result_run_id
        await eventually(executed(journal, saga_id, "reserve_inventory"), 30)
        regs.after.save(regs.file)  # mallory's key revoked
        # Mallory approves the payment before the saga reaches it: the decision waits for
        # step 2 and is judged, against `after`, when the saga continues as new (refused:
        # nothing is pending then). Only the refusal is journaled, not the registry.
        await handle.signal("approve", regs.mallory_approves(saga_id, 2))
        await handle.signal("go")
        refused = await eventually(decision_after(journal, saga_id, 0), 30)
        assert refused.phase is Phase.APPROVAL_REFUSED

        await eventually(continued(client, saga_id, first_run), 30)
    assert top_mark(journal.registry_marks()) == regs.mark(regs.before)  # never journaled

    regs.before.save(regs.file)  # the old file put back, and the worker restarted
    async with worker_of(client, journal, regs, queue):  # nothing newer journaled: it starts
        handle = client.get_workflow_handle(saga_id)
        await handle.signal("go")
        pending = (await SagaClient(client, task_queue=queue).wait_pending(saga_id)).pending
        assert pending.step == 2 and pending.payload["amount"] == AMOUNT
        [asked] = [e for e in journal.entries(saga_id) if e.phase is Phase.AWAITING_APPROVAL]
        assert asked.result["registry"]["version"] == regs.before.version  # judged with `before`
        await handle.signal("approve", regs.mallory_approves(saga_id, 2))
        decided = await eventually(decision_after(journal, saga_id, asked.seq), 30)
        assert decided.phase is Phase.APPROVAL_REFUSED, (decided.phase, regs.bank.paid)
        assert (decided.error or "").startswith("REGISTRY_ROLLED_BACK"), decided.error
        assert f"judged with approver registry version {regs.before.version}" in decided.error
        assert f"has seen version {regs.after.version}" in decided.error
        await cancel_and_check_nothing_paid(handle, journal, regs)


async def test_a_worker_restarted_with_the_old_registry_refuses_to_start(
    temporal_env: Any, tmp_path: Path, regs: Registries, journal_url: str
) -> None:
    """A saga journaled `after` (its requester, its request and alice's approval); the
    worker is stopped and `before` put back. Neither the worker built in process nor
    `sagacity worker` as an operator restarts it will run: each says which two versions
    and what to restore, before anything polls."""
    client, queue = temporal_env.client, f"tq-{uuid.uuid4().hex[:8]}"
    saga_id = f"rollback-{uuid.uuid4().hex[:10]}"
    regs.after.save(regs.file)
    with open_store(journal_url) as store:
        async with worker_of(client, store, regs, queue):
            rita = SagaClient(client, task_queue=queue, signer=regs.keys["rita"])
            pay = ToolCall(tool="pay", args={"iban": IBAN, "amount": 100})
            await rita.start(SagaInput(plan=[RESERVE, pay]), saga_id=saga_id)
            await rita.wait_pending(saga_id)
            alice = SagaClient(client, task_queue=queue, signer=regs.keys["alice"])
            await alice.approve(saga_id)
            assert (await rita.result(saga_id)).status is SagaStatus.COMPLETED
        assert top_mark(store.registry_marks()) == regs.mark(regs.after)

        regs.before.save(regs.file)
        with pytest.raises(RegistryRolledBackError) as refused:
            worker_of(client, store, regs, queue)
    message = str(refused.value)
    before, after = regs.before, regs.after
    assert f"approver registry is version {before.version} (sha256 {before.sha256[:12]}…)" in (
        message
    )
    assert f"records version {after.version} (sha256 {after.sha256[:12]}…) (saga {saga_id!r}" in (
        message
    )
    assert f"Restore the newer registry file (version {after.version}" in message

    address = client.service_client.config.target_host
    env = worker_env(address, tmp_path / "shop.db", SAGACITY_APPROVERS=str(regs.file))
    args = ["--tools", "sagacity.examples.orders:toolbox", "--journal", journal_url,
            "--task-queue", f"restarted-{uuid.uuid4().hex[:8]}"]  # fmt: skip
    procs = WorkerProcesses(tmp_path, env, args)
    try:
        proc = procs.start()
        await eventually(lambda: _ended_or_polling(procs, proc), 60)
        output = procs.output(proc)
        assert proc.poll() == 1, f"the worker started with the old registry:\n{output[-3000:]}"
        assert "sagacity worker:" not in output  # it never printed its banner, never polled
        assert f"is version {before.version}" in output and f"version {after.version}" in output
        assert "Restore the newer registry file" in output
    finally:
        procs.stop_all()


async def _ended_or_polling(procs: WorkerProcesses, proc: Any) -> bool:
    return proc.poll() is not None or "sagacity worker:" in procs.output(proc, "out")


async def test_a_worker_started_before_a_newer_registry_was_journaled_cannot_judge_with_its_own(
    temporal_env: Any, journal: JournalStore, regs: Registries, tmp_path: Path
) -> None:
    """Two workers share the journal: one started with `before` while the journal held
    nothing newer (so it started), the other runs `after`. Once `after` is journaled,
    the first refuses to start a saga (its requester judged by an older registry) and to
    count mallory's approval on a saga that never saw `after` itself."""
    client = temporal_env.client
    old_queue, new_queue = f"old-{uuid.uuid4().hex[:8]}", f"new-{uuid.uuid4().hex[:8]}"
    regs.before.save(regs.file)
    old_worker = worker_of(client, journal, regs, old_queue)  # file read and checked now
    # A saga started on the old worker before `after` exists: it asks for approval.
    waiting = f"rollback-{uuid.uuid4().hex[:10]}"
    inp = PayInput(requester=regs.claim(waiting), iban=IBAN, amount=AMOUNT)
    async with old_worker:
        handle = await client.start_workflow(
            PaysAfterContinuing.run, inp, id=waiting, task_queue=old_queue
        )
        await eventually(executed(journal, waiting, "reserve_inventory"), 30)

        new_file = tmp_path / "approvers-new.json"
        regs.after.save(new_file)
        new_worker_ = new_worker(
            client, store=journal, toolbox=regs.toolbox, task_queue=new_queue,
            approvers=new_file,
        )  # fmt: skip
        async with new_worker_:
            rita = SagaClient(client, task_queue=new_queue, signer=regs.keys["rita"])
            other = f"rollback-{uuid.uuid4().hex[:10]}"
            await rita.start(SagaInput(plan=[RESERVE]), saga_id=other)
            assert (await rita.result(other)).status is SagaStatus.COMPLETED
        assert top_mark(journal.registry_marks()) == regs.mark(regs.after)

        # The old worker still holds `before` (its file never changed).
        late = SagaClient(client, task_queue=old_queue, signer=regs.keys["rita"])
        refused_start = f"rollback-{uuid.uuid4().hex[:10]}"
        await late.start(SagaInput(plan=[RESERVE]), saga_id=refused_start)
        result = await late.result(refused_start)
        assert result.status is SagaStatus.REFUSED, result
        assert f"its journal records version {regs.after.version}" in (result.first_failure or "")

        first_run = handle.result_run_id
        await handle.signal("go")  # the waiting saga continues as new, then pays
        await eventually(continued(client, waiting, first_run), 30)
        await handle.signal("go")
        pending = (await late.wait_pending(waiting)).pending
        [asked] = [e for e in journal.entries(waiting) if e.phase is Phase.AWAITING_APPROVAL]
        await handle.signal("approve", regs.mallory_approves(waiting, pending.step))
        decided = await eventually(decision_after(journal, waiting, asked.seq), 30)
        assert decided.phase is Phase.APPROVAL_REFUSED, (decided.phase, regs.bank.paid)
        assert (decided.error or "").startswith("REGISTRY_ROLLED_BACK"), decided.error
        assert f"has seen version {regs.after.version}" in (decided.error or "")
        await cancel_and_check_nothing_paid(handle, journal, regs, kept=1)  # `other`'s unit
