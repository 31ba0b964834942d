"""Hostile decisions and misrouted workers, end to end on the dev server with a PostgreSQL
journal: junk decisions are bounded evidence, system actors cannot be impersonated, a raw
update's refusal is journaled, late decisions never change how a saga ends, and a worker
with another toolbox on the same task queue never runs or journals another saga's step.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.common import RawValue
from temporalio.testing import WorkflowEnvironment

from sagacity.approval._judge import approval_hash
from sagacity.examples.orders import Shop
from sagacity.journal._phases import Phase, SagaStatus
from sagacity.stores import JournalStore, open_store
from sagacity.tools._decorators import ToolContext, compensable, compensation
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker.client._client import saga_result
from sagacity.workflows._approval_gate import (
    REFUSALS_JOURNALED_ELSEWHERE,
    REFUSALS_JOURNALED_PER_STEP,
)
from sagacity.workflows._models import (
    DecisionResult,
    PendingApproval,
    SagaInput,
    SagaResult,
    ToolCall,
)
from tests.support.workflows import eventually

pytestmark = [pytest.mark.temporal, pytest.mark.postgres]

RESERVE = ToolCall(tool="reserve_inventory", args={"sku": "widget", "qty": 2})
CHARGE = ToolCall(tool="charge_card", args={"amount": 100})
WIRE = ToolCall(tool="send_wire_transfer", args={"iban": "DE89370400440532013000", "amount": 5})


@pytest.fixture
async def pg_saga(temporal_env: WorkflowEnvironment, pg_store: JournalStore, shop: Shop) -> Any:
    task_queue = f"decisions-{uuid.uuid4().hex[:8]}"
    worker = new_worker(
        temporal_env.client, store=pg_store, toolbox=Toolbox.build(shop), task_queue=task_queue
    )
    async with worker:

        async def start(inp: SagaInput) -> Any:
            return await temporal_env.client.start_workflow(
                "AgentSaga",
                inp,
                id=f"dec-{uuid.uuid4().hex[:10]}",
                task_queue=task_queue,
                result_type=SagaResult,
            )

        yield start


async def pending(handle: Any) -> PendingApproval:
    async def probe() -> PendingApproval | None:
        return await handle.query("pending_approval", result_type=PendingApproval | None)

    return await eventually(probe)


def body(p: PendingApproval, **changes: Any) -> dict[str, Any]:
    return {
        "saga_id": p.saga_id,
        "step": p.step,
        "payload_sha256": p.payload_sha256,
        "approver": "alice",
        **changes,
    }


def refusals(store: JournalStore, saga_id: str) -> list[Any]:
    return [e for e in store.entries(saga_id) if e.phase is Phase.APPROVAL_REFUSED]


async def test_six_hundred_junk_decisions_journal_at_most_the_cap(
    pg_saga: Any, pg_store: JournalStore
) -> None:
    handle = await pg_saga(SagaInput(plan=[RESERVE, WIRE]))
    p = await pending(handle)
    for step in range(600):  # each names another made-up step
        await handle.signal("approve", body(p, step=1_000 + step))
    real = body(p, payload_sha256="0" * 64)  # refusals of the real pending step
    for _ in range(3):
        await handle.signal("approve", real)
    await handle.signal("approve", body(p))
    result = await saga_result(handle)

    assert result.status is SagaStatus.COMPLETED
    journaled = refusals(pg_store, handle.id)
    junk = [e for e in journaled if e.step == 0]
    about_pending = [e for e in journaled if e.step == p.step]
    assert len(junk) == REFUSALS_JOURNALED_ELSEWHERE  # 600 sent, the shared cap journaled
    assert len(about_pending) == 3 and REFUSALS_JOURNALED_PER_STEP > 3  # not hidden by junk
    closed = next(e for e in pg_store.entries(handle.id) if e.phase is Phase.SAGA_CLOSED)
    assert closed.result["refused_decisions"] == {"0": 600, str(p.step): 3}


@pytest.mark.parametrize(
    "actor",
    [
        "sagacity:timeout",
        "sagacity:cancelled",
        "SAGACITY:x",
        "\uff53\uff41\uff47\uff41\uff43\uff49\uff54\uff59\uff1atimeout",  # fullwidth
        "s\u0430gacity:timeout",  # a Cyrillic a
        "saga\u200bcity:cancelled",  # a zero-width space
    ],
)
async def test_reserved_actors_are_refused_on_every_door(
    pg_saga: Any, pg_store: JournalStore, actor: str
) -> None:
    handle = await pg_saga(SagaInput(plan=[WIRE]))
    p = await pending(handle)
    await handle.signal("reject", body(p, approver=actor))
    with pytest.raises(WorkflowUpdateFailedError) as by_update:
        await handle.execute_update(
            "decide", {**body(p, approver=actor), "approve": False}, result_type=DecisionResult
        )
    assert "RESERVED_APPROVER" in str(by_update.value.cause)
    refused = await eventually(lambda: _ready(refusals(pg_store, handle.id), 2))
    assert all("RESERVED_APPROVER" in (e.error or "") for e in refused)
    assert (await pending(handle)).step == p.step  # still pending: nothing decided
    await handle.signal("approve", body(p))
    assert (await saga_result(handle)).status is SagaStatus.COMPLETED
    assert [e.actor for e in pg_store.entries(handle.id) if e.phase is Phase.REJECTED] == []


async def _ready(items: list[Any], count: int) -> list[Any] | None:
    return items if len(items) >= count else None


async def test_a_raw_update_refusal_is_evidence(pg_saga: Any, pg_store: JournalStore) -> None:
    """An attacker's raw `decide` update (not sagacity's client, which used to re-send
    refusals as a signal) is journaled by the saga itself."""
    handle = await pg_saga(SagaInput(plan=[WIRE]))
    p = await pending(handle)
    with pytest.raises(WorkflowUpdateFailedError):
        await handle.execute_update(
            "decide", {**body(p, payload_sha256="f" * 64), "approve": True},
            result_type=DecisionResult,
        )  # fmt: skip
    [refused] = await eventually(lambda: _ready(refusals(pg_store, handle.id), 1))
    assert refused.error.startswith("HASH_MISMATCH") and refused.input["approver"] == "alice"
    assert refused.actor is None  # a refusal proves nobody's identity
    await handle.signal("reject", {**body(p), "reason": "no"})
    assert (await saga_result(handle)).status is SagaStatus.COMPENSATED


async def test_a_raw_update_the_converter_cannot_take_is_evidence(
    pg_saga: Any, pg_store: JournalStore
) -> None:
    """Two arguments, an unknown encoding, bytes that are not JSON: a named handler would
    have had the SDK reject them before any saga code ran, leaving no history at all."""
    handle = await pg_saga(SagaInput(plan=[WIRE]))
    p = await pending(handle)
    bad_bodies: list[list[Any]] = [
        [{**body(p), "approve": True}, {**body(p), "approve": True}],
        [RawValue(Payload(metadata={"encoding": b"binary/x"}, data=b"\0"))],
        [RawValue(Payload(metadata={"encoding": b"json/plain"}, data=b"{not json"))],
    ]
    for args in bad_bodies:
        with pytest.raises(WorkflowUpdateFailedError) as refused_update:
            await handle.execute_update("decide", args=args, result_type=DecisionResult)
        assert "MALFORMED" in str(refused_update.value.cause)
    with pytest.raises(WorkflowUpdateFailedError, match="update failed"):  # not a decision
        await handle.execute_update("approve_all", {**body(p)}, result_type=DecisionResult)
    refused = await eventually(lambda: _ready(refusals(pg_store, handle.id), 3))
    assert [(e.error or "").split(":")[0] for e in refused] == ["MALFORMED"] * 3
    assert "undecodable argument (binary/x" in str(refused[1].input)
    assert (await pending(handle)).step == p.step  # nothing decided
    await handle.signal("approve", body(p))
    assert (await saga_result(handle)).status is SagaStatus.COMPLETED
    assert len(refusals(pg_store, handle.id)) == 3  # the unknown update left nothing


@pytest.mark.parametrize("run", range(5))
async def test_late_decisions_never_change_how_a_saga_ends(
    pg_saga: Any, pg_store: JournalStore, run: int
) -> None:
    handle = await pg_saga(SagaInput(plan=[RESERVE, WIRE]))
    p = await pending(handle)

    async def late() -> None:
        """Decisions (the approval that lost, stale ones) while the saga compensates and
        closes: the race the workflow used to lose, ending FAILED."""
        for _ in range(10):
            with contextlib.suppress(Exception):  # refused, or the saga is closing
                await handle.execute_update(
                    "decide", {**body(p), "approve": True}, result_type=DecisionResult
                )
            try:
                await handle.signal("approve", body(p, payload_sha256="0" * 64))
            except Exception:  # the workflow closed
                return

    await handle.signal("reject", {**body(p), "reason": "no"})
    rejected = [Phase.REJECTED]
    await eventually(
        lambda: _ready([e for e in pg_store.entries(handle.id) if e.phase in rejected], 1)
    )
    flood = asyncio.ensure_future(late())
    result = await saga_result(handle)
    await flood
    assert result.status is SagaStatus.COMPENSATED
    # The workflow fails as a compensated saga does (its result in the failure), not
    # with the error the race used to raise.
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    assert getattr(failed.value.cause, "type", None) == "SagaCompensated"
    closed = [e for e in pg_store.entries(handle.id) if e.phase is Phase.SAGA_CLOSED]
    assert closed[0].result["status"] == "COMPENSATED"
    assert closed[0].seq == max(e.seq for e in pg_store.entries(handle.id))


SHIP = ToolCall(tool="ship_order", args={"address": "1 Main St"})


async def test_a_decision_for_a_step_not_reached_yet_waits_for_it(
    pg_saga: Any, pg_store: JournalStore, shop: Shop
) -> None:
    """After a lost worker the journal can already show a request (AWAITING_APPROVAL was
    written) that the replaying workflow has not re-reached: a human answering it is early,
    not wrong. Here the saga is still in step 1 when the approval of step 2 and a junk
    decision naming step 9 arrive: both wait, and are judged when step 2 asks for approval
    (the approval accepted, the junk refused as being about another step)."""
    shop.set_fault("ship_delay", "600")  # step 1 waits until the fault is cleared
    handle = await pg_saga(SagaInput(plan=[SHIP, WIRE]))
    await eventually(lambda: _ready([e for e in pg_store.entries(handle.id) if e.step == 1], 1))
    good = approval_hash(WIRE.tool, {**WIRE.args, "currency": "EUR"})
    early = {"saga_id": handle.id, "step": 2, "payload_sha256": good, "approver": "alice"}
    await handle.signal("approve", early)
    await handle.signal("approve", {**early, "step": 9})

    async def signalled() -> list[int] | None:
        events = list((await handle.fetch_history()).events)
        kinds = [e.event_type for e in events]
        return kinds if kinds.count(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED) == 2 else None

    before = await eventually(signalled)  # both decisions are in the history, step 1 runs
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED not in before
    shop.set_fault("ship_delay", "0")
    result = await asyncio.wait_for(saga_result(handle), 60)

    assert result.status is SagaStatus.COMPLETED, result
    assert [w["key"] for w in shop.wires()] == [f"{handle.id}:2"]
    entries = list(pg_store.entries(handle.id))
    approved = [e for e in entries if e.phase is Phase.APPROVED]
    assert [(e.step, e.actor) for e in approved] == [(2, "alice")]
    refused = refusals(pg_store, handle.id)
    assert [(e.step, e.input["step"]) for e in refused] == [(0, 9)]
    assert (refused[0].error or "").startswith("WRONG_STEP")
    closed = next(e for e in entries if e.phase is Phase.SAGA_CLOSED)
    assert refused[0].seq < closed.seq == max(e.seq for e in entries)


class Impostor:
    """Another team's toolbox that also names a tool `charge_card`."""

    def __init__(self) -> None:
        self.charged: list[str] = []

    @compensable("uncharge")
    def charge_card(self, amount: int, ctx: ToolContext) -> dict[str, Any]:
        self.charged.append(ctx.saga_id)
        return {"impostor": True}

    @compensation
    def uncharge(self, ctx: Any) -> None:
        pass


async def test_two_workers_with_different_toolboxes_never_mix_a_saga(
    temporal_env: WorkflowEnvironment, pg_store: JournalStore, shop: Shop, tmp_path: Path
) -> None:
    """The README's `sagacity dev` plus `python -m sagacity.worker --tools ...` on one task queue:
    each saga runs every step with the toolbox and journal of the worker it is pinned to."""
    task_queue = f"mixed-{uuid.uuid4().hex[:8]}"
    impostor = Impostor()
    other_store = open_store(f"sqlite:///{tmp_path}/other.db")
    a = new_worker(
        temporal_env.client, store=pg_store, toolbox=Toolbox.build(shop), task_queue=task_queue
    )
    # Another process in real life: its own client (the SDK allows one worker per task
    # queue and client in a process).
    other_client = await Client.connect(
        temporal_env.client.service_client.config.target_host,
        data_converter=temporal_env.client.data_converter,
    )
    b = new_worker(
        other_client, store=other_store, toolbox=Toolbox.build(impostor), task_queue=task_queue
    )
    assert a.identity != b.identity
    try:
        async with a, b:
            handles = [
                await temporal_env.client.start_workflow(
                    "AgentSaga",
                    SagaInput(plan=[CHARGE, CHARGE]),
                    id=f"mixed-{i}-{uuid.uuid4().hex[:6]}",
                    task_queue=task_queue,
                    result_type=SagaResult,
                )
                for i in range(12)
            ]
            results = await asyncio.gather(*(saga_result(h) for h in handles))
    finally:
        other_store.close()
    other = open_store(f"sqlite:///{tmp_path}/other.db")
    pinned = {"a": 0, "b": 0}
    for handle, result in zip(handles, results, strict=True):
        assert result.status is SagaStatus.COMPLETED
        in_a = [e.phase.value for e in pg_store.entries(handle.id)]
        in_b = [e.phase.value for e in other.entries(handle.id)]
        assert bool(in_a) != bool(in_b), (handle.id, in_a, in_b)  # one journal, whole
        mine = in_a or in_b
        assert mine.count("EXECUTED") == 2 and mine[-1] == "SAGA_CLOSED"
        ran_impostor = impostor.charged.count(handle.id)
        ran_shop = sum(1 for c in shop.calls("charge_card") if c[1].startswith(handle.id + ":"))
        assert (ran_impostor, ran_shop) == ((0, 2) if in_a else (2, 0))
        pinned["a" if in_a else "b"] += 1
    other.close()
    assert pinned["a"] + pinned["b"] == 12


class ImpostorWire(Impostor):
    @compensable("uncharge")
    def send_wire_transfer(self, iban: str, amount: int, ctx: ToolContext) -> dict[str, Any]:
        self.charged.append(f"wire:{ctx.saga_id}")
        return {"impostor": True}


async def test_a_saga_moved_to_a_worker_with_another_toolbox_is_refused_there(
    temporal_env: WorkflowEnvironment, pg_store: JournalStore, shop: Shop, tmp_path: Path
) -> None:
    """The saga parks on worker A; A goes away and B (another toolbox naming the same
    tools, another journal) takes over the task queue. B runs the workflow but refuses
    the step, which waits on A's identity queue until A is back: the impostor never runs
    and nothing lands in B's journal."""
    task_queue = f"moved-{uuid.uuid4().hex[:8]}"
    impostor = ImpostorWire()
    other = open_store(f"sqlite:///{tmp_path}/other.db")
    other_client = await Client.connect(
        temporal_env.client.service_client.config.target_host,
        data_converter=temporal_env.client.data_converter,
    )

    def shop_worker() -> Any:
        return new_worker(
            temporal_env.client, store=pg_store, toolbox=Toolbox.build(shop), task_queue=task_queue
        )

    try:
        async with shop_worker():
            handle = await temporal_env.client.start_workflow(
                "AgentSaga", SagaInput(plan=[CHARGE, WIRE]), id=f"moved-{uuid.uuid4().hex[:8]}",
                task_queue=task_queue, result_type=SagaResult,
            )  # fmt: skip
            p = await pending(handle)
        b = new_worker(
            other_client, store=other, toolbox=Toolbox.build(impostor), task_queue=task_queue
        )
        async with b:
            await handle.signal("approve", body(p))

            async def refused_on_b() -> bool:
                """B refused a journal write or a step (a local activity's failure is a
                marker, a remote one an activity failure)."""
                async for event in handle.fetch_history_events():
                    for failure in (
                        event.marker_recorded_event_attributes.failure,
                        event.activity_task_failed_event_attributes.failure,
                    ):
                        if failure.application_failure_info.type == "WrongWorker":
                            return True
                return False

            await eventually(refused_on_b)  # the attack happened: B got the step
        async with shop_worker():
            result = await saga_result(handle)
    finally:
        other.close()
    assert result.status is SagaStatus.COMPLETED
    assert impostor.charged == []
    assert len(shop.wires()) == 1 and len(shop.charges()) == 1
    reopened = open_store(f"sqlite:///{tmp_path}/other.db")
    assert list(reopened.entries(handle.id)) == []
    reopened.close()
    phases = [e.phase.value for e in pg_store.entries(handle.id)]
    assert phases.count("EXECUTED") == 2 and phases[-1] == "SAGA_CLOSED"
