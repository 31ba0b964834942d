"""Load: 200 concurrent sagas of mixed outcomes on one worker, journaling to PostgreSQL.

A quarter complete, a quarter fail and compensate, a quarter are approved and a quarter
rejected (a simulated approver watches the journal for AWAITING_APPROVAL and decides).
Every saga must end in its expected status with exactly its expected journal — checked
saga by saga and by a count of every row in the schema — and every chain must verify.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from sagacity.approval._judge import approval_hash
from sagacity.examples.orders import Shop
from sagacity.journal._phases import SagaStatus
from sagacity.stores import JournalStore
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker.client._client import saga_result
from sagacity.workflows._models import SagaInput, SagaResult
from tests.support.workers import (
    CHARGE,
    RESERVE,
    SHIP,
    SHIP_FAILS,
    WIRE,
    WIRE_ARGS,
    assert_chain_closed,
    assert_evidence_consistent,
    assert_executed_ran_once,
    failed_workflow_tasks,
    restock,
)

pytestmark = [pytest.mark.temporal, pytest.mark.postgres, pytest.mark.timeout(90)]

SAGAS = 200
STOCK = 10_000
OPEN, CLOSE = ("SAGA_OPENED", 0), ("SAGA_CLOSED", 0)
KINDS: dict[str, tuple[list[Any], SagaStatus, list[tuple[str, int]]]] = {
    "complete": ([RESERVE, CHARGE, SHIP], SagaStatus.COMPLETED,
                 [OPEN, ("INTENT", 1), ("EXECUTED", 1), ("INTENT", 2), ("EXECUTED", 2),
                  ("INTENT", 3), ("EXECUTED", 3), CLOSE]),
    "fail": ([RESERVE, CHARGE, SHIP_FAILS], SagaStatus.COMPENSATED,
             [OPEN, ("INTENT", 1), ("EXECUTED", 1), ("INTENT", 2), ("EXECUTED", 2),
              ("INTENT", 3), ("FAILED", 3), ("COMPENSATING", 0), ("COMPENSATED", 2),
              ("COMPENSATED", 1), CLOSE]),
    "approve": ([RESERVE, WIRE], SagaStatus.COMPLETED,
                [OPEN, ("INTENT", 1), ("EXECUTED", 1), ("AWAITING_APPROVAL", 2), ("APPROVED", 2),
                 ("INTENT", 2), ("EXECUTED", 2), CLOSE]),
    "reject": ([RESERVE, CHARGE, WIRE], SagaStatus.COMPENSATED,
               [OPEN, ("INTENT", 1), ("EXECUTED", 1), ("INTENT", 2), ("EXECUTED", 2),
                ("AWAITING_APPROVAL", 3), ("REJECTED", 3), ("COMPENSATING", 0), ("COMPENSATED", 2),
                ("COMPENSATED", 1), CLOSE]),
}  # fmt: skip


async def approver(
    postgres_url: str, schema: str, kinds: dict[str, str], handles: dict[str, Any]
) -> int:
    """Watch the journal for AWAITING_APPROVAL and decide as the saga's kind says,
    with the hash of the payload it recomputes (never one copied from the saga)."""
    digest = approval_hash("send_wire_transfer", WIRE_ARGS)
    query = sql.SQL("SELECT saga_id, step FROM {} WHERE phase = 'AWAITING_APPROVAL'").format(
        sql.Identifier(schema, "sagacity_journal")
    )
    decided: set[str] = set()
    waiting = {sid for sid, kind in kinds.items() if kind in ("approve", "reject")}
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        while decided != waiting:
            rows = await (await conn.execute(query)).fetchall()
            fresh = [(sid, step) for sid, step in rows if sid in waiting and sid not in decided]
            sends = []
            for sid, step in fresh:
                approve = kinds[sid] == "approve"
                decision = {
                    "saga_id": sid,
                    "step": step,
                    "payload_sha256": digest,
                    "approver": "load-approver",
                    "reason": "" if approve else "no",
                }
                sends.append(handles[sid].signal("approve" if approve else "reject", decision))
                decided.add(sid)
            await asyncio.gather(*sends)
            await asyncio.sleep(0.2)
    return len(decided)


async def test_two_hundred_concurrent_sagas_of_mixed_outcomes(
    temporal_env: WorkflowEnvironment,
    pg_store: JournalStore,
    pg_schema: str,
    postgres_url: str,
    tmp_path: Path,
) -> None:
    restock(tmp_path / "shop.db", STOCK)
    shop = Shop(tmp_path / "shop.db")
    client = temporal_env.client
    task_queue = f"load-{uuid.uuid4().hex[:8]}"
    names = list(KINDS)
    kinds = {f"load-{uuid.uuid4().hex[:12]}": names[i % len(names)] for i in range(SAGAS)}

    started = time.monotonic()
    async with new_worker(
        client, store=pg_store, toolbox=Toolbox.build(shop), task_queue=task_queue
    ):
        starts = [
            client.start_workflow(
                "AgentSaga",
                SagaInput(plan=KINDS[kind][0]),
                id=sid,
                task_queue=task_queue,
                result_type=SagaResult,
            )
            for sid, kind in kinds.items()
        ]
        handles: dict[str, WorkflowHandle[Any, SagaResult]] = dict(
            zip(kinds, await asyncio.gather(*starts), strict=True)
        )
        decided = asyncio.create_task(approver(postgres_url, pg_schema, kinds, handles))
        results = await asyncio.wait_for(
            asyncio.gather(*(saga_result(h) for h in handles.values())), 90
        )
        assert await asyncio.wait_for(decided, 5) == SAGAS // 2
    elapsed = time.monotonic() - started

    by_status = Counter(r.status for r in results)
    assert by_status == {SagaStatus.COMPLETED: SAGAS // 2, SagaStatus.COMPENSATED: SAGAS // 2}
    calls = shop.calls()
    for (sid, kind), result in zip(kinds.items(), results, strict=True):
        _, status, story = KINDS[kind]
        assert result.status is status, (sid, kind, result)
        entries = assert_chain_closed(pg_store, sid)
        assert [(e.phase.value, e.step) for e in entries] == story, (sid, kind)
        assert_evidence_consistent(result, entries)
        assert_executed_ran_once(calls, sid, entries)
        assert not result.needs_human

    # Exactly the expected rows, and nothing else, in the whole journal.
    table = sql.Identifier(pg_schema, "sagacity_journal")
    with psycopg.connect(postgres_url) as conn:
        count = sql.SQL("SELECT count(*), count(DISTINCT saga_id) FROM {}").format(table)
        row = conn.execute(count).fetchone()
    assert row == (sum(len(KINDS[k][2]) for k in kinds.values()), SAGAS)

    # The shop agrees: what completed is live, what was compensated is undone.
    quarter = SAGAS // 4
    assert len(shop.shipments()) == quarter and len(shop.wires()) == quarter
    charges = shop.charges()
    assert len(charges) == 3 * quarter
    assert sum(c["refunded"] for c in charges) == 2 * quarter
    assert shop.stock("widget") == STOCK - 2 * quarter

    # No workflow task failed anywhere (sampled concurrently from Temporal's history).
    semaphore = asyncio.Semaphore(20)

    async def failures(handle: WorkflowHandle[Any, SagaResult]) -> list[str]:
        async with semaphore:
            return await failed_workflow_tasks(handle)

    assert not any(await asyncio.gather(*(failures(h) for h in handles.values())))
    print(f"\n{SAGAS} sagas in {elapsed:.1f}s ({SAGAS / elapsed:.1f}/s)")
