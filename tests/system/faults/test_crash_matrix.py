"""Crash matrix: a real worker process (`python -m sagacity.worker worker`, journaling to
PostgreSQL) is SIGKILLed at each dangerous point of a saga, and a fresh worker process
takes over.

After the restart every saga must reach a final state, the journal must hold exactly the
entries the saga's story implies (none lost, none invented) in a chain that verifies, no
step whose EXECUTED was journaled may run its body twice (the shop's own log of body runs
is the witness), and an INTENT without an outcome must be reported as needing a human —
never run again and never compensated blindly.

A short `tool_heartbeat_timeout_seconds` lets Temporal notice the dead worker's activity
within seconds; `tool_timeout_seconds` bounds activities that do not heartbeat.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from sagacity.approval._judge import approval_hash
from sagacity.examples.orders import INITIAL_STOCK, Shop
from sagacity.journal._phases import Phase, SagaStatus
from sagacity.stores import JournalStore
from sagacity.stores._postgres import lock_key
from sagacity.worker.client._client import NoWorkerError, saga_result
from sagacity.worker.client._saga_client import SagaClient
from sagacity.workflows._inspection import SAGA_NEEDS_HUMAN
from sagacity.workflows._models import ResolutionPolicy, SagaInput, SagaResult, SagaView, ToolCall
from tests.support.workers import (
    CHARGE,
    RESERVE,
    RESERVE_FAILS,
    SHIP,
    SHIP_FAILS,
    WIRE,
    WIRE_ARGS,
    WorkerProcesses,
    assert_chain_closed,
    assert_evidence_consistent,
    assert_executed_ran_once,
    entries_of,
    eventually,
    failed_workflow_tasks,
    phases,
    worker_env,
)
from tests.system.faults.toolkits import GatedLedger

pytestmark = [pytest.mark.temporal, pytest.mark.postgres, pytest.mark.timeout(60)]

RECOVERY_S = 40.0


async def start(
    client: Client, workers: WorkerProcesses, plan: list[ToolCall], **options: Any
) -> WorkflowHandle[Any, SagaResult]:
    return await client.start_workflow(
        "AgentSaga",
        SagaInput(plan=plan, **options),
        id=f"crash-{uuid.uuid4().hex[:12]}",
        task_queue=workers.task_queue,
        result_type=SagaResult,
    )


async def start_delayed(
    client: Client,
    workers: WorkerProcesses,
    shop: Shop,
    delay: str,
    plan: list[ToolCall],
    heartbeat_s: int,
    timeout_s: int,
) -> tuple[subprocess.Popen[bytes], WorkflowHandle[Any, SagaResult]]:
    """The first worker, and a saga of `plan` on it whose tool waits 30 s (the shop's fault
    `delay`) so the test can kill the worker mid-call; heartbeat and tool timeouts in s."""
    shop.set_fault(delay, "30")
    first = workers.start()
    handle = await start(
        client, workers, plan, tool_heartbeat_timeout_seconds=heartbeat_s,
        tool_timeout_seconds=timeout_s,
    )  # fmt: skip
    return first, handle


async def final(
    handle: WorkflowHandle[Any, SagaResult], store: JournalStore, workers: WorkerProcesses
) -> SagaResult:
    try:
        return await asyncio.wait_for(saga_result(handle), RECOVERY_S)
    except TimeoutError:
        pytest.fail(
            f"saga {handle.id} not final {RECOVERY_S}s after the restart; journal: "
            f"{phases(store, handle.id)}\n{workers.output(workers.procs[-1])[-3000:]}"
        )


def has(store: JournalStore, saga_id: str, phase: Phase, step: int) -> bool:
    return any(e.phase is phase for e in store.step_entries(saga_id, step))


async def test_killed_during_a_tool_call(
    temporal_env: WorkflowEnvironment,
    workers: WorkerProcesses,
    pg_store: JournalStore,
    shop: Shop,
) -> None:
    """ship_order is waiting for the carrier (heartbeating, nothing shipped yet)."""
    first, handle = await start_delayed(
        temporal_env.client, workers, shop, "ship_delay", [RESERVE, CHARGE, SHIP], 3, 60
    )
    await eventually(lambda: has(pg_store, handle.id, Phase.INTENT, 3), 30, "INTENT of step 3")

    workers.kill(first)
    assert shop.calls("ship_order") == [] and phases(pg_store, handle.id)[-1] == ("INTENT", 3)
    shop.set_fault("ship_delay", "0")
    workers.start()
    # The saga compensates what it knows and waits for a person with step 3 listed; the
    # carrier never saw the order, so a person says so from the command line.
    client = SagaClient(temporal_env.client, task_queue=workers.task_queue)
    await eventually(lambda: _waiting(client, handle.id), RECOVERY_S, "the saga to wait")
    listed = _dirty_listed(workers, handle.id)  # what an operator's `sagacity dirty` shows
    assert listed is not None
    assert [(d["step"], d["tool"], d["kind"]) for d in listed] == [
        (3, "ship_order", "UNKNOWN_OUTCOME")
    ]
    assert (await handle.describe()).typed_search_attributes.get(SAGA_NEEDS_HUMAN) is True
    assert shop.stock("widget") == INITIAL_STOCK["widget"]  # undone before the wait
    said = _cli(workers, "resolve", handle.id, "3", "--did-not-happen", "--actor", "olivia",
                "--reason", "the carrier has no such order", "--yes")  # fmt: skip
    assert said.returncode == 0, said.stderr
    assert "nothing to undo" in said.stdout and "COMPENSATED" in said.stdout
    result = await final(handle, pg_store, workers)

    assert result.status is SagaStatus.COMPENSATED, result
    assert result.unknown_outcome_steps == [] and not result.needs_human
    assert [(c.step, c.ok) for c in result.compensations] == [(2, True), (1, True)]
    assert [(r.action, r.step, r.actor) for r in result.resolutions] == [
        ("did_not_happen", 3, "olivia")
    ]
    entries = assert_chain_closed(pg_store, handle.id)
    assert [(e.phase.value, e.step) for e in entries] == [
        ("SAGA_OPENED", 0), ("INTENT", 1), ("EXECUTED", 1), ("INTENT", 2), ("EXECUTED", 2),
        ("INTENT", 3), ("COMPENSATING", 0), ("COMPENSATED", 2), ("COMPENSATED", 1),
        ("NEEDS_HUMAN", 0),
        ("RESOLVED", 3), ("FAILED", 3), ("SAGA_CLOSED", 0),
    ]  # fmt: skip
    assert entries[-2].actor == "olivia" and "olivia" in (entries[-2].error or "")
    assert_evidence_consistent(result, entries)
    assert_executed_ran_once(shop.calls(), handle.id, entries)
    assert shop.calls("ship_order") == [] and shop.shipments() == []  # never run again
    assert [c["refunded"] for c in shop.charges()] == [True]
    assert pg_store.is_fenced(handle.id, 3)  # a late attempt could not ship now
    assert (await handle.describe()).typed_search_attributes.get(SAGA_NEEDS_HUMAN) is False
    assert await failed_workflow_tasks(handle) == []


def _cli(workers: WorkerProcesses, *args: str) -> subprocess.CompletedProcess[str]:
    """The `sagacity` command line, as an operator runs it, against the test's server."""
    return subprocess.run(
        [sys.executable, "-m", "sagacity.worker", "--task-queue", workers.task_queue, *args],
        env=workers.env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def _dirty_listed(workers: WorkerProcesses, saga_id: str) -> list[dict[str, Any]] | None:
    said = _cli(workers, "dirty", "--json")
    if said.returncode != 0:
        return None
    rows = [r for r in json.loads(said.stdout) if r["saga_id"] == saga_id and r["waiting"]]
    return rows[0]["dirty"] if rows and rows[0]["dirty"] else None


@pytest.mark.parametrize("in_flight_append", ["happened", "did_not_happen", "committed_late"])
async def test_killed_between_intent_and_executed(
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    pg_journal_url: str,
    postgres_url: str,
    pg_store: JournalStore,
    shop: Shop,
    in_flight_append: str,
) -> None:
    """The payment's effect is applied but its EXECUTED entry is not committed: the test
    holds the saga's advisory lock, so the append waits, and the worker dies there.

    The dead worker's append is still queued in its PostgreSQL backend, which does not
    notice the dead client while it waits for a lock. "abandoned": the test terminates
    that backend (as a connection check would), so EXECUTED never lands — the new worker
    must not pay again and must not void a payment it cannot prove happened: the step is
    an unknown outcome for a human. "committed_late": the test just releases the lock, the
    orphaned append commits after the worker's death, and the new worker must replay the
    recorded result instead of paying again.

    The abandoned case is then resolved by a person, both ways: "happened" (they checked
    the payment provider: the payment went through) voids it exactly once and the saga
    ends COMPENSATED; "did_not_happen" ends COMPENSATED with nothing voided. (Here the
    payment did take place, so "did_not_happen" is a person's mistake the saga cannot
    see: it records their word, in their name.)"""
    ledger = GatedLedger(tmp_path / "ledger.db")
    address = temporal_env.client.service_client.config.target_host
    env = worker_env(address, tmp_path / "shop.db", SAGACITY_LEDGER_PATH=str(ledger.path))
    args = [
        "--tools", "tests.system.faults.toolkits:toolbox",
        "--journal", pg_journal_url,
        "--task-queue", f"gated-{uuid.uuid4().hex[:8]}",
    ]  # fmt: skip
    workers = WorkerProcesses(tmp_path, env, args)
    pay = ToolCall(tool="gated_payment", args={"amount": 250})
    try:
        first = workers.start()
        handle = await start(
            temporal_env.client, workers, [RESERVE, pay, SHIP],
            tool_heartbeat_timeout_seconds=10, tool_timeout_seconds=60,
        )  # fmt: skip
        await eventually(lambda: has(pg_store, handle.id, Phase.INTENT, 2), 30, "INTENT 2")

        key = lock_key(handle.id)
        with psycopg.connect(postgres_url, autocommit=True) as holder:
            holder.execute("SELECT pg_advisory_lock(%s)", (key,))
            ledger.open_gate()
            await eventually(ledger.payments, 10, "the payment's effect")
            # Proof that the worker is now blocked appending EXECUTED behind our lock.
            waiting = await eventually(lambda: _waiting_on(holder, key), 10, "append waiting")
            workers.kill(first)
            if in_flight_append != "committed_late":
                terminated = [
                    holder.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()
                    for pid in waiting
                ]
                assert terminated == [(True,)]
                await eventually(lambda: not _waiting_on(holder, key), 10, "backend gone")
            assert phases(pg_store, handle.id)[-1] == ("INTENT", 2)  # not committed yet
        if in_flight_append == "committed_late":
            await eventually(
                lambda: has(pg_store, handle.id, Phase.EXECUTED, 2), 10, "the late commit"
            )
        workers.start()
        if in_flight_append != "committed_late":
            client = SagaClient(temporal_env.client, task_queue=workers.task_queue)
            view = await eventually(lambda: _waiting(client, handle.id), RECOVERY_S, "wait")
            assert [(d.step, d.tool, d.kind) for d in view.dirty] == [
                (2, "gated_payment", "UNKNOWN_OUTCOME")
            ]
            assert ledger.payments()[0]["voided"] is False  # nobody voided it blindly
            happened = in_flight_append == "happened"
            answer = await client.resolve(
                handle.id, 2, happened=happened, actor="olivia",
                result={"payment": f"{handle.id}:2"} if happened else None,
            )  # fmt: skip
            assert answer.outcome == ("compensated" if happened else "nothing to undo")
        result = await final(handle, pg_store, workers)
    finally:
        workers.stop_all()

    calls = shop.calls() + ledger.calls()
    paid = [tool for tool, _, _ in ledger.calls() if tool == "gated_payment"]
    assert paid == ["gated_payment"]  # paid once
    assert shop.calls("ship_order") == [] or in_flight_append == "committed_late"
    assert await failed_workflow_tasks(handle) == []
    entries = assert_chain_closed(pg_store, handle.id)
    assert_evidence_consistent(result, entries)
    assert_executed_ran_once(calls, handle.id, entries)
    if in_flight_append == "committed_late":
        assert result.status is SagaStatus.COMPLETED, result
        by_step = {s.step: s for s in result.steps}
        assert by_step[2].status == "EXECUTED" and by_step[2].replayed
        assert [(e.phase.value, e.step) for e in entries] == [
            ("SAGA_OPENED", 0), ("INTENT", 1), ("EXECUTED", 1), ("INTENT", 2),
            ("EXECUTED", 2), ("INTENT", 3), ("EXECUTED", 3), ("SAGA_CLOSED", 0),
        ]  # fmt: skip
        assert ledger.payments() == [{"key": f"{handle.id}:2", "amount": 250, "voided": False}]
        return

    happened = in_flight_append == "happened"
    assert result.status is SagaStatus.COMPENSATED, result
    assert result.unknown_outcome_steps == [] and not result.needs_human
    assert [(c.step, c.ok) for c in result.compensations] == [(1, True)] + (
        [(2, True)] if happened else []
    )
    story = [(e.phase.value, e.step, e.actor) for e in entries]
    assert story == [
        ("SAGA_OPENED", 0, None), ("INTENT", 1, None), ("EXECUTED", 1, None),
        ("INTENT", 2, None), ("COMPENSATING", 0, None), ("COMPENSATED", 1, None),
        ("NEEDS_HUMAN", 0, None),
        ("RESOLVED", 2, "olivia"),
        ("EXECUTED" if happened else "FAILED", 2, "olivia"),
        *([("COMPENSATED", 2, None)] if happened else []),
        ("SAGA_CLOSED", 0, None),
    ]  # fmt: skip
    # The payment happened exactly once; it is voided exactly once when a person says it
    # happened, and never blindly.
    voids = [c for c in ledger.calls() if c[0] == "void_payment"]
    assert len(voids) == (1 if happened else 0)
    assert ledger.payments() == [{"key": f"{handle.id}:2", "amount": 250, "voided": happened}]
    assert pg_store.is_fenced(handle.id, 2)


async def _waiting(client: SagaClient, saga_id: str) -> SagaView | None:
    try:
        view = await client.status(saga_id)
    except NoWorkerError:  # the new worker is still starting (or the query hit the dead one)
        return None
    return view if view.status is SagaStatus.NEEDS_HUMAN else None


def _waiting_on(conn: psycopg.Connection[Any], key: int) -> list[int]:
    """Backends waiting for the advisory lock `key` (bigint keys are stored as
    classid = high 32 bits, objid = low 32 bits)."""
    unsigned = key & 0xFFFFFFFFFFFFFFFF
    rows = conn.execute(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        " AND classid = %s AND objid = %s AND objsubid = 1",
        (unsigned >> 32, unsigned & 0xFFFFFFFF),
    ).fetchall()
    return [int(r[0]) for r in rows]


async def test_killed_during_a_compensation(
    temporal_env: WorkflowEnvironment,
    workers: WorkerProcesses,
    pg_store: JournalStore,
    shop: Shop,
) -> None:
    """The refund is in progress (refund_delay) when the worker dies: it is retried on the
    new worker and applied once, and the rest of the compensation still runs."""
    first, handle = await start_delayed(
        temporal_env.client, workers, shop, "refund_delay", [RESERVE, CHARGE, SHIP_FAILS], 3, 8
    )
    # The compensation runner fences the step before calling refund_card.
    await eventually(lambda: shop.fault("refund_delaying"), 30, "refund_card in its delay")
    assert pg_store.is_fenced(handle.id, 2)  # the runner fences the step before refunding

    workers.kill(first)
    assert shop.calls("refund_card") == []
    assert not has(pg_store, handle.id, Phase.COMPENSATED, 2)
    shop.set_fault("refund_delay", "0")
    workers.start()
    result = await final(handle, pg_store, workers)

    assert result.status is SagaStatus.COMPENSATED, result
    assert [(c.step, c.ok) for c in result.compensations] == [(2, True), (1, True)]
    assert result.unknown_outcome_steps == [] and not result.needs_human
    entries = assert_chain_closed(pg_store, handle.id)
    assert [(e.phase.value, e.step) for e in entries] == [
        ("SAGA_OPENED", 0), ("INTENT", 1), ("EXECUTED", 1), ("INTENT", 2), ("EXECUTED", 2),
        ("INTENT", 3), ("FAILED", 3), ("COMPENSATING", 0), ("COMPENSATED", 2), ("COMPENSATED", 1),
        ("SAGA_CLOSED", 0),
    ]  # fmt: skip
    assert_evidence_consistent(result, entries)
    assert_executed_ran_once(shop.calls(), handle.id, entries)
    assert len(shop.calls("refund_card")) == 1 and len(shop.calls("release_inventory")) == 1
    assert [c["refunded"] for c in shop.charges()] == [True]
    assert shop.stock("widget") == INITIAL_STOCK["widget"]
    assert await failed_workflow_tasks(handle) == []


async def test_dead_worker_during_compensation_is_noticed_by_heartbeat(
    temporal_env: WorkflowEnvironment,
    workers: WorkerProcesses,
    pg_store: JournalStore,
    shop: Shop,
) -> None:
    """Same crash as above, but with the default tool timeout (300 s): the compensation
    activity carries the saga's heartbeat timeout, so the lost attempt is noticed within
    seconds, not minutes."""
    first, handle = await start_delayed(
        temporal_env.client, workers, shop, "refund_delay", [RESERVE, CHARGE, SHIP_FAILS], 8, 300
    )
    try:
        await eventually(lambda: pg_store.is_fenced(handle.id, 2), 30, "compensation of step 2")
        history = await handle.fetch_history()
        scheduled = [
            e.activity_task_scheduled_event_attributes
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            and e.activity_task_scheduled_event_attributes.activity_type.name
            == "sagacity.compensate"
        ]
        timeout = scheduled[0].heartbeat_timeout.ToTimedelta().total_seconds()
        assert 0 < timeout <= 8, f"compensation heartbeat timeout is {timeout}s"
    finally:
        workers.kill(first)  # mid-refund: the crash (and no graceful wait on the refund)
    shop.set_fault("refund_delay", "0")
    workers.start()
    result = await asyncio.wait_for(saga_result(handle), 30)
    assert result.status is SagaStatus.COMPENSATED
    assert len(shop.calls("refund_card")) == 1
    entries = assert_chain_closed(pg_store, handle.id)
    assert_evidence_consistent(result, entries)
    assert_executed_ran_once(shop.calls(), handle.id, entries)


async def test_killed_while_awaiting_approval(
    temporal_env: WorkflowEnvironment,
    workers: WorkerProcesses,
    pg_store: JournalStore,
    shop: Shop,
) -> None:
    """No worker at all while the human decides: the decisions wait in Temporal, and the
    new worker judges them in order — the stale one refused and journaled, the right one
    approved — and the wire runs once."""
    first = workers.start()
    handle = await start(
        temporal_env.client, workers, [RESERVE, WIRE], tool_heartbeat_timeout_seconds=3
    )
    await eventually(
        lambda: has(pg_store, handle.id, Phase.AWAITING_APPROVAL, 2), 30, "AWAITING_APPROVAL"
    )
    workers.kill(first)

    good = approval_hash("send_wire_transfer", WIRE_ARGS)
    stale = approval_hash("send_wire_transfer", {**WIRE_ARGS, "amount": 50})
    body = {"saga_id": handle.id, "step": 2, "approver": "alice"}
    await handle.signal("approve", {**body, "payload_sha256": stale})  # no worker is up
    await handle.signal("approve", {**body, "payload_sha256": good})
    assert shop.wires() == []
    workers.start()
    result = await final(handle, pg_store, workers)

    assert result.status is SagaStatus.COMPLETED, result
    assert [w["key"] for w in shop.wires()] == [f"{handle.id}:2"]
    assert len(shop.calls("send_wire_transfer")) == 1
    entries = assert_chain_closed(pg_store, handle.id)
    # The refusal's journal write and the approval's run concurrently: order may vary.
    assert Counter((e.phase.value, e.step) for e in entries) == Counter(
        [("SAGA_OPENED", 0), ("INTENT", 1), ("EXECUTED", 1), ("AWAITING_APPROVAL", 2),
         ("APPROVAL_REFUSED", 2), ("APPROVED", 2), ("INTENT", 2), ("EXECUTED", 2),
         ("SAGA_CLOSED", 0)]
    )  # fmt: skip
    refused = entries_of(pg_store, handle.id, Phase.APPROVAL_REFUSED)
    assert (refused[0].error or "").startswith("HASH_MISMATCH")
    approved = entries_of(pg_store, handle.id, Phase.APPROVED)
    assert approved[0].actor == "alice" and approved[0].result["payload_sha256"] == good
    assert_evidence_consistent(result, entries)
    assert_executed_ran_once(shop.calls(), handle.id, entries)
    assert await failed_workflow_tasks(handle) == []


async def test_one_kill_with_sagas_in_every_state(
    temporal_env: WorkflowEnvironment,
    workers: WorkerProcesses,
    pg_store: JournalStore,
    shop: Shop,
) -> None:
    """Seven sagas caught by one SIGKILL: finished, mid-tool, mid-compensation, awaiting
    approval. All reach their final state on the new worker with exact journals."""
    shop.set_fault("ship_delay", "30")
    shop.set_fault("refund_delay", "30")
    client = temporal_env.client
    first = workers.start()
    opts: dict[str, Any] = {"tool_heartbeat_timeout_seconds": 3, "tool_timeout_seconds": 8}
    done = await start(client, workers, [RESERVE, CHARGE], **opts)
    # Their step 3 ends unknown: nobody resolves it here, so they close at a short deadline.
    unattended = ResolutionPolicy(deadline_seconds=1)
    mid_tool = [
        await start(client, workers, [RESERVE, CHARGE, SHIP], **opts, resolution=unattended)
        for _ in range(2)
    ]
    mid_comp = [await start(client, workers, [CHARGE, RESERVE_FAILS], **opts) for _ in range(2)]
    approve, reject = [await start(client, workers, [RESERVE, WIRE], **opts) for _ in range(2)]

    await asyncio.wait_for(saga_result(done), 30)
    for h in mid_tool:
        await eventually(lambda h=h: has(pg_store, h.id, Phase.INTENT, 3), 30, "mid tool")
    for h in mid_comp:
        await eventually(lambda h=h: pg_store.is_fenced(h.id, 1), 30, "mid compensation")
    for h in (approve, reject):
        await eventually(
            lambda h=h: has(pg_store, h.id, Phase.AWAITING_APPROVAL, 2), 30, "awaiting"
        )
    workers.kill(first)

    shop.set_fault("ship_delay", "0")
    shop.set_fault("refund_delay", "0")
    digest = approval_hash("send_wire_transfer", WIRE_ARGS)
    decision = {"step": 2, "payload_sha256": digest, "approver": "alice"}
    await approve.signal("approve", {**decision, "saga_id": approve.id})
    await reject.signal("reject", {**decision, "saga_id": reject.id, "reason": "not today"})
    workers.start()

    expected = {
        done.id: (SagaStatus.COMPLETED, ["SAGA_OPENED", "INTENT", "EXECUTED", "INTENT",
                                         "EXECUTED", "SAGA_CLOSED"]),
        approve.id: (SagaStatus.COMPLETED, ["SAGA_OPENED", "INTENT", "EXECUTED",
                                            "AWAITING_APPROVAL", "APPROVED", "INTENT",
                                            "EXECUTED", "SAGA_CLOSED"]),
        reject.id: (SagaStatus.COMPENSATED, ["SAGA_OPENED", "INTENT", "EXECUTED",
                                             "AWAITING_APPROVAL", "REJECTED", "COMPENSATING",
                                             "COMPENSATED", "SAGA_CLOSED"]),
        **{h.id: (SagaStatus.UNRESOLVED, ["SAGA_OPENED", "INTENT", "EXECUTED", "INTENT",
                                           "EXECUTED", "INTENT", "COMPENSATING", "COMPENSATED",
                                           "COMPENSATED", "NEEDS_HUMAN", "SAGA_CLOSED"])
           for h in mid_tool},
        **{h.id: (SagaStatus.COMPENSATED, ["SAGA_OPENED", "INTENT", "EXECUTED", "INTENT",
                                           "FAILED", "COMPENSATING", "COMPENSATED",
                                           "SAGA_CLOSED"])
           for h in mid_comp},
    }  # fmt: skip
    handles = [done, *mid_tool, *mid_comp, approve, reject]
    results = await asyncio.wait_for(asyncio.gather(*(saga_result(h) for h in handles)), RECOVERY_S)
    for handle, result in zip(handles, results, strict=True):
        status, story = expected[handle.id]
        assert result.status is status, (handle.id, result)
        entries = assert_chain_closed(pg_store, handle.id)
        assert [e.phase.value for e in entries] == story, (handle.id, phases(pg_store, handle.id))
        assert_evidence_consistent(result, entries)
        assert_executed_ran_once(shop.calls(), handle.id, entries)
        assert await failed_workflow_tasks(handle) == []
    assert [r.unknown_outcome_steps for r in results[1:3]] == [[3], [3]]
    assert shop.shipments() == []
    assert [w["key"] for w in shop.wires()] == [f"{approve.id}:2"]
    assert all(c["refunded"] for c in shop.charges() if not c["key"].startswith(done.id))
    assert len(shop.calls("refund_card")) == 4  # 2 mid-compensation + 2 mid-tool
