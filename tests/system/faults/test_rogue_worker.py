"""An outsider with a worker in the namespace schedules every sagacity activity on the real
worker's task queue, end to end (dev server, a worker with an approver registry, SQLite
and PostgreSQL journals): nothing it asks for acts.

The rogue is a workflow of its own type on its own task queue. Anyone who may run a
worker in the namespace can run one; it can name any activity type and any task queue,
and compute any payload's SHA-256. Each attack is checked three ways: the rogue's own
history shows the activity was scheduled on the real worker's queue and failed there
with the worker's refusal; the shop's ledger (what the tools really did) shows nothing
moved; and the real sagas' chains are as they were. Then the real sagas still work.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from sagacity.activities import (
    APPROVER_KEY,
    CHECK_PLAN,
    CHECK_RESUME,
    COMPENSATE,
    FENCE_STEP,
    JOURNAL_EVENT,
    NEXT_TURN,
    NOT_THE_SAGAS_RUN,
    RESOLVE_STEP,
    RUN_TOOL,
    SAGA_ACTIVITY_TYPES,
    WORKER_IDENTITY,
)
from sagacity.approval._judge import approval_hash, approval_payload
from sagacity.approval._models import ApprovalDecision
from sagacity.approval._registry import ApproverRegistry
from sagacity.approval._signed_action import sign_action
from sagacity.approval._signing import SigningKey
from sagacity.examples.orders import INITIAL_STOCK, Shop
from sagacity.journal._phases import SagaStatus
from sagacity.stores import JournalStore, open_store
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker.client._saga_client import SagaClient
from sagacity.workflows._models import SagaInput, ToolCall

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(120)]

IBAN = "DE89370400440532013000"
WIRE_ARGS = {"iban": IBAN, "amount": 9_000_000, "currency": "EUR"}
"""The wire as the tool validates it (its default currency filled in): the hash the
rogue computes is the hash of exactly what would run."""
WIRE = ToolCall(tool="send_wire_transfer", args=WIRE_ARGS)
RESERVE = ToolCall(tool="reserve_inventory", args={"sku": "widget", "qty": 1})
CHARGE = ToolCall(tool="charge_card", args={"amount": 100})
SELF, RUN = "$self", "$run"
"""Placeholders the rogue replaces with its own workflow id and run id."""


@workflow.defn(name="Rogue")
class Rogue:
    """Schedules each (activity, argument, task queue) once, and reports what came back."""

    @workflow.run
    async def run(self, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        own = {SELF: workflow.info().workflow_id, RUN: workflow.info().run_id}
        said: list[dict[str, Any]] = []
        for call in calls:
            arg = {k: own.get(v, v) if isinstance(v, str) else v for k, v in call["arg"].items()}
            if isinstance(arg.get("input"), dict):
                arg["input"] = {k: own.get(v, v) if isinstance(v, str) else v
                                for k, v in arg["input"].items()}  # fmt: skip
            try:
                got = await workflow.execute_activity(
                    call["activity"],
                    args=[arg] if arg else [],
                    task_queue=call["queue"],
                    start_to_close_timeout=timedelta(seconds=20),
                    retry_policy=RetryPolicy(maximum_attempts=1),
                )
                said.append({"ok": got})
            except ActivityError as exc:
                cause = exc.cause
                kind = cause.type if isinstance(cause, ApplicationError) else type(cause).__name__
                said.append({"type": kind, "message": str(cause)})
        return said


class Scene:
    """A shop, a registry (rita requests, alice and bob approve), the real worker."""

    def __init__(self, tmp: Path, client: Client, store: JournalStore) -> None:
        self.client, self.store = client, store
        self.queue = f"real-{uuid.uuid4().hex[:8]}"
        self.shop = Shop(tmp / "shop.db")
        self.keys = {name: SigningKey.generate(name) for name in ("rita", "alice", "bob")}
        registry = ApproverRegistry()
        for name, key in self.keys.items():
            registry = registry.enroll(
                name, key.public_key, valid_from=datetime.now(UTC) - timedelta(hours=1)
            )
        self.registry_file = tmp / "approvers.json"
        registry.save(self.registry_file)

    def sagas(self, signer: str | None = None) -> SagaClient:
        key = self.keys[signer] if signer else None
        return SagaClient(self.client, task_queue=self.queue, store=self.store, signer=key)

    async def start(self, *plan: ToolCall) -> str:
        saga_id = f"real-{uuid.uuid4().hex[:10]}"
        await self.sagas("rita").start(SagaInput(plan=list(plan)), saga_id=saga_id)
        return saga_id

    def chain(self, saga_id: str) -> list[tuple[int, str]]:
        return [(e.seq, e.hash) for e in self.store.entries(saga_id)]

    def worker(self) -> Worker:
        """The real worker: the shop's tools, the registry, the scene's task queue."""
        return new_worker(
            self.client, store=self.store, toolbox=Toolbox.build(self.shop),
            task_queue=self.queue, approvers=self.registry_file,
        )  # fmt: skip


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JournalStore]:
    if request.param == "postgres":
        yield request.getfixturevalue("pg_store")
        return
    journal = open_store(f"sqlite:///{tmp_path}/journal.db")
    yield journal
    journal.close()


async def rogue_run(
    client: Client, calls: list[dict[str, Any]], *, workflow_id: str | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """Run the rogue on its own worker and task queue; its id and what it was told."""
    queue = f"rogue-{uuid.uuid4().hex[:8]}"
    rogue_id = workflow_id or f"rogue-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client, task_queue=queue, workflows=[Rogue], workflow_runner=UnsandboxedWorkflowRunner()
    ):
        said = await client.execute_workflow(
            Rogue.run, calls, id=rogue_id, task_queue=queue, result_type=list[dict[str, Any]]
        )
    return rogue_id, said


async def scheduled_on(client: Client, rogue_id: str) -> list[tuple[str, str]]:
    """(activity type, task queue) of every activity the rogue's history scheduled."""
    scheduled = []
    async for event in client.get_workflow_handle(rogue_id).fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs = event.activity_task_scheduled_event_attributes
            scheduled.append((attrs.activity_type.name, attrs.task_queue.name))
    return scheduled


def call(activity: str, queue: str, **arg: Any) -> dict[str, Any]:
    return {"activity": activity, "queue": queue, "arg": arg}


async def test_no_sagacity_activity_acts_for_an_outsiders_workflow(
    temporal_env: Any, store: JournalStore, tmp_path: Path
) -> None:
    scene = Scene(tmp_path, temporal_env.client, store)
    client = temporal_env.client
    async with scene.worker():
        waiting = await scene.start(RESERVE, WIRE)
        pending = (await scene.sagas().wait_pending(waiting, timeout=30)).pending
        done = await scene.start(RESERVE, CHARGE)
        assert (await scene.sagas().result(done)).status is SagaStatus.COMPLETED
        before = {s: scene.chain(s) for s in (waiting, done)}
        ledger_before = scene.shop.calls()

        q, digest = scene.queue, approval_hash(WIRE.tool, WIRE_ARGS)
        identity = (await rogue_run(client, [call(WORKER_IDENTITY, q)]))[1][0]["ok"]
        wire = {"tool": WIRE.tool, "args": WIRE_ARGS}
        charge = {"tool": CHARGE.tool, "args": CHARGE.args}
        w = {"worker": identity}
        attacks = [
            # The critical one: an approved-looking wire for the real saga's pending step,
            # and the same for a saga id nobody opened.
            call(RUN_TOOL, q, saga_id=waiting, step=pending.step, call=wire,
                 approved_sha256=digest, **w),
            call(RUN_TOOL, q, saga_id=SELF, step=1, call=wire, approved_sha256=digest, **w),
            call(RUN_TOOL, q, saga_id=SELF, step=1, call=wire, approved_sha256=digest),
            # Its own "saga": opened, a request and an unsigned approval journaled by
            # itself; the worker's registry wants signatures, so the wire does not run.
            call(JOURNAL_EVENT, q, saga_id=SELF, phase="SAGA_OPENED",
                 input={"run_id": RUN, "chain": RUN}, **w),
            call(JOURNAL_EVENT, q, saga_id=SELF, phase="AWAITING_APPROVAL", step=1,
                 tool=WIRE.tool, input=approval_payload(WIRE.tool, WIRE_ARGS),
                 result={"payload_sha256": digest}, **w),
            call(JOURNAL_EVENT, q, saga_id=SELF, phase="APPROVED", step=1, tool=WIRE.tool,
                 actor="alice", result={"payload_sha256": digest}, **w),
            call(RUN_TOOL, q, saga_id=SELF, step=1, call=wire, approved_sha256=digest, **w),
            # A refund of the completed saga's charge, and of a charge it forges.
            call(COMPENSATE, q, saga_id=done, step=2, tool=CHARGE.tool, **w),
            call(JOURNAL_EVENT, q, saga_id=SELF, phase="EXECUTED", step=2, tool=CHARGE.tool,
                 input=charge["args"], **w),
            call(COMPENSATE, q, saga_id=SELF, step=2, tool=CHARGE.tool, **w),
            call(JOURNAL_EVENT, q, saga_id=SELF, phase="COMPENSATING", **w),
            call(COMPENSATE, q, saga_id=SELF, step=2, tool=CHARGE.tool, **w),
            # Words in the real sagas' journals, and the rest of the activities.
            call(JOURNAL_EVENT, q, saga_id=waiting, phase="APPROVED", step=pending.step,
                 tool=WIRE.tool, actor="alice", result={"payload_sha256": digest}, **w),
            call(JOURNAL_EVENT, q, saga_id=done, phase="SAGA_CLOSED", **w),
            call(RESOLVE_STEP, q, saga_id=waiting, step=1, tool=RESERVE.tool, happened=True,
                 attempt=1, actor="alice", statement={}, **w),
            call(FENCE_STEP, q, saga_id=waiting, step=pending.step, **w),
            call(NEXT_TURN, q, saga_id=waiting, settings={"provider": "scripted"},
                 messages=[], **w),
            call(CHECK_RESUME, q, saga_id=waiting, head_seq=1, head_hash="0" * 64, **w),
            call(CHECK_PLAN, q, saga_id=waiting, plan=[wire], **w),
            call(APPROVER_KEY, q, key_id=scene.keys["alice"].key_id, **w),
        ]  # fmt: skip
        rogue_id, said = await rogue_run(client, attacks)

        scheduled = await scheduled_on(client, rogue_id)
        assert scheduled == [(a["activity"], q) for a in attacks]
        assert {a for a, _ in scheduled} | {WORKER_IDENTITY} == SAGA_ACTIVITY_TYPES
        outcome = [(a["activity"], s.get("type")) for a, s in zip(attacks, said, strict=True)]
        opened_own = outcome[3]
        assert opened_own == (JOURNAL_EVENT, None)  # its own saga: like starting one
        refused = [o for i, o in enumerate(outcome) if i not in (3, 4, 5, 10, 11, 19)]
        assert all(kind == NOT_THE_SAGAS_RUN for _, kind in refused), str(list(enumerate(outcome)))
        assert outcome[6] == (RUN_TOOL, NOT_THE_SAGAS_RUN)
        assert "without an approver registry" in said[6]["message"]
        # The forged EXECUTED never landed: there is nothing to undo.
        assert outcome[11] == (COMPENSATE, "NotExecutedInJournal")
        assert said[19]["ok"]["configured"] is True  # public facts of the registry only

        assert scene.shop.calls() == ledger_before  # no tool and no compensation ran
        assert scene.shop.wires() == []
        assert [c["refunded"] for c in scene.shop.charges()] == [False]
        assert {s: scene.chain(s) for s in (waiting, done)} == before

        # The real saga is untouched and still works: approved for real, it pays once.
        await scene.sagas("alice").approve(waiting)
        result = await scene.sagas().result(waiting)
        assert result.status is SagaStatus.COMPLETED
        assert [w["amount"] for w in scene.shop.wires()] == [9_000_000]


async def test_a_new_run_under_a_terminated_sagas_id_is_another_chain(
    temporal_env: Any, store: JournalStore, tmp_path: Path
) -> None:
    """A saga terminated mid-way leaves its chain open. A workflow started afterwards with
    the same id is a new run chain: its activities are refused, its words not journaled."""
    scene = Scene(tmp_path, temporal_env.client, store)
    client = temporal_env.client
    async with scene.worker():
        saga_id = await scene.start(RESERVE, CHARGE, WIRE)
        pending = (await scene.sagas().wait_pending(saga_id, timeout=30)).pending
        await client.get_workflow_handle(saga_id).terminate("an operator's mistake")
        before = scene.chain(saga_id)
        identity = (await rogue_run(client, [call(WORKER_IDENTITY, scene.queue)]))[1][0]["ok"]
        q, w = scene.queue, {"worker": identity}
        wire = {"tool": WIRE.tool, "args": WIRE_ARGS}
        approval = sign_action(
            scene.keys["alice"],
            ApprovalDecision(
                saga_id=saga_id,
                step=pending.step,
                tool=WIRE.tool,
                payload_sha256=pending.payload_sha256,
                approve=True,
            ),
        ).body()
        attacks = [
            call(RUN_TOOL, q, saga_id=saga_id, step=4, call={"tool": RESERVE.tool,
                 "args": RESERVE.args}, **w),
            call(JOURNAL_EVENT, q, saga_id=saga_id, phase="APPROVED", step=pending.step,
                 tool=WIRE.tool, actor="alice", input={"statement": approval},
                 result={"payload_sha256": pending.payload_sha256}, **w),
            call(RUN_TOOL, q, saga_id=saga_id, step=pending.step, call=wire,
                 approved_sha256=pending.payload_sha256, **w),
            call(JOURNAL_EVENT, q, saga_id=saga_id, phase="COMPENSATING", **w),
            call(COMPENSATE, q, saga_id=saga_id, step=2, tool=CHARGE.tool, **w),
            call(JOURNAL_EVENT, q, saga_id=saga_id, phase="SAGA_CLOSED", **w),
        ]  # fmt: skip
        _, said = await rogue_run(client, attacks, workflow_id=saga_id)
        assert [s.get("type") for s in said] == [NOT_THE_SAGAS_RUN] * len(attacks), said
        assert all("another run chain" in s["message"] for s in said)
        assert scene.chain(saga_id) == before
        assert scene.shop.wires() == []
        assert scene.shop.stock("widget") == INITIAL_STOCK["widget"] - 1
        assert [c["refunded"] for c in scene.shop.charges()] == [False]


async def test_an_outsiders_own_saga_gets_no_unsigned_approval_and_no_registry_mark(
    temporal_env: Any, store: JournalStore, tmp_path: Path
) -> None:
    """The rogue opens a saga of its own with the requester's real signed claim, names the
    worker's real registry in its request, and journals approvals that carry a correct
    decision statement but no signature: the wire does not run. It also tries to raise the
    journal's registry mark to a version no registry can reach (which would lock every
    signed saga out): refused, the mark unchanged, and a real saga still starts."""
    scene = Scene(tmp_path, temporal_env.client, store)
    client = temporal_env.client
    async with scene.worker():
        real = await scene.start(RESERVE)
        assert (await scene.sagas().result(real)).status is SagaStatus.COMPLETED
        [opened] = [e for e in store.entries(real) if e.phase.value == "SAGA_OPENED"]
        claim = opened.input["requester"]  # rita's real, signed claim: copyable
        registry = ApproverRegistry.load(scene.registry_file)
        ref = {"version": registry.version, "sha256": registry.sha256}
        marks_before = store.registry_marks()
        identity = (await rogue_run(client, [call(WORKER_IDENTITY, scene.queue)]))[1][0]["ok"]
        q, w, digest = scene.queue, {"worker": identity}, approval_hash(WIRE.tool, WIRE_ARGS)
        statement = {"saga_id": SELF, "step": 1, "tool": WIRE.tool, "payload_sha256": digest}
        attacks = [
            call(JOURNAL_EVENT, q, saga_id=SELF, phase="SAGA_OPENED",
                 input={"run_id": RUN, "chain": RUN, "requester": claim}, **w),
            call(JOURNAL_EVENT, q, saga_id=SELF, phase="AWAITING_APPROVAL", step=1,
                 tool=WIRE.tool, input=approval_payload(WIRE.tool, WIRE_ARGS),
                 result={"payload_sha256": digest, "registry": ref}, **w),
            *[call(JOURNAL_EVENT, q, saga_id=SELF, phase="APPROVED", step=1, attempt=n,
                   tool=WIRE.tool, actor=who,
                   input={"statement": {**statement, "approver": who}, "signature": None},
                   result={"payload_sha256": digest}, **w)
              for n, who in ((1, "alice"), (2, "bob"))],
            call(RUN_TOOL, q, saga_id=SELF, step=1, call={"tool": WIRE.tool, "args": WIRE_ARGS},
                 approved_sha256=digest, **w),
            call(JOURNAL_EVENT, q, saga_id=SELF, phase="AWAITING_APPROVAL", step=2,
                 tool=WIRE.tool, input=approval_payload(WIRE.tool, WIRE_ARGS),
                 result={"payload_sha256": digest,
                         "registry": {"version": 2**53 - 1, "sha256": "0" * 64}}, **w),
        ]  # fmt: skip
        _, said = await rogue_run(client, attacks)
        kinds = [s.get("type") for s in said]
        assert kinds == [None, None, None, None, NOT_THE_SAGAS_RUN, NOT_THE_SAGAS_RUN], said
        assert "not signed" in said[4]["message"]
        assert "never judged with" in said[5]["message"]
        assert scene.shop.wires() == []
        assert store.registry_marks() == marks_before
        again = await scene.start(RESERVE)  # a signed saga still starts and completes
        assert (await scene.sagas().result(again)).status is SagaStatus.COMPLETED
