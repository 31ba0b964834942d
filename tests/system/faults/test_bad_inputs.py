"""Bad inputs: unknown tools, invalid arguments, arguments over Temporal's payload limit,
results that cannot be journaled, and a tool that hangs.

Each must end the saga with a clear error (and compensation of what ran), never hang it,
never fail a workflow task, and leave the journal exact and verifiable. The tools here
are the test's own (sagacity.tools decorators) beside the example shop, served by a
worker built with worker.app.new_worker, as production builds it.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType, TimeoutType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from sagacity._errors import BoundsError
from sagacity.activities._models import ModelTurn, ModelTurnInput
from sagacity.examples.orders import INITIAL_STOCK, Shop
from sagacity.journal._bounds import MAX_ARGS_BYTES
from sagacity.journal._phases import Phase, SagaStatus
from sagacity.stores import JournalStore, open_store
from sagacity.tools._decorators import (
    CompensationContext,
    ToolContext,
    compensable,
    compensation,
    tool,
)
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker.client._client import saga_result, start_saga
from sagacity.workflows._models import (
    ModelSettings,
    ResolutionPolicy,
    SagaInput,
    SagaResult,
    ToolCall,
)
from tests.support.workers import (
    CHARGE,
    RESERVE,
    assert_chain_closed,
    assert_evidence_consistent,
    entries_of,
    eventually,
    failed_workflow_tasks,
    history_events,
    phases,
)

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(60)]

Handle = WorkflowHandle[Any, SagaResult]
THREE_MB = 3 * 1024 * 1024


class Oddities:
    """Tools that misbehave on purpose. `calls` records every body run."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.payments: dict[str, bool] = {}  # key -> voided
        self.release = threading.Event()
        self.late: list[str] = []

    @tool
    def odd_result(self, kind: str) -> Any:
        """Return something with no exact JSON form."""
        self.calls.append(("odd_result", kind))
        values: dict[str, Any] = {
            "lock": {"held": threading.Lock()},
            "object": object(),
            "nan": {"ratio": float("nan")},
            "bigint": {"id": 2**64},
            "bytes": b"\xff\xfe",
        }
        return values[kind]

    @compensable("void_odd_payment")
    def pay_then_return_garbage(self, amount: int, ctx: ToolContext) -> Any:
        """Take a payment (the effect happens), then return an unjournalable value."""
        self.calls.append(("pay_then_return_garbage", ctx.idempotency_key))
        self.payments[ctx.idempotency_key] = False
        return {"payment": ctx.idempotency_key, "receipt": object()}

    @compensation
    def void_odd_payment(self, ctx: CompensationContext) -> None:
        self.calls.append(("void_odd_payment", ctx.idempotency_key))
        self.payments[ctx.idempotency_key] = True

    @tool
    def hang(self, ctx: ToolContext) -> dict[str, Any]:
        """Call a service that never answers (until the test lets it)."""
        self.calls.append(("hang", ctx.idempotency_key))
        self.release.wait(timeout=55)
        if ctx.is_fenced():  # the check every effectful tool makes right before its effect
            self.late.append("fenced: did nothing")
            raise RuntimeError("fenced off by compensation")
        self.late.append("applied the effect")
        return {"done": True}


class HugeArgumentModel:
    """A model that asks for a tool call with a 3 MB argument on its second turn."""

    async def next_turn(self, req: ModelTurnInput, tool_schemas: list[dict[str, Any]]) -> ModelTurn:
        if req.turn == 0:
            return ModelTurn(tool_calls=[ToolCall(tool="charge_card", args={"amount": 100},
                                                  call_id="a")])  # fmt: skip
        if req.turn == 1:
            huge = {"address": "x" * THREE_MB}
            return ModelTurn(tool_calls=[ToolCall(tool="ship_order", args=huge, call_id="b")])
        return ModelTurn(final="done")


@dataclass
class Harness:
    client: Client
    store: JournalStore
    shop: Shop
    odd: Oddities
    task_queue: str
    handles: list[Handle] = field(default_factory=list)

    async def start(self, inp: SagaInput) -> Handle:
        handle = await self.client.start_workflow(
            "AgentSaga", inp, id=f"bad-{uuid.uuid4().hex[:12]}",
            task_queue=self.task_queue, result_type=SagaResult,
        )  # fmt: skip
        self.handles.append(handle)
        return handle

    async def run(self, inp: SagaInput, timeout: float = 30) -> SagaResult:
        return await asyncio.wait_for(saga_result(await self.start(inp)), timeout)


@pytest.fixture
async def bad(temporal_env: WorkflowEnvironment, tmp_path: Path) -> AsyncIterator[Harness]:
    store = open_store(f"sqlite:///{tmp_path}/journal.db")
    shop, odd = Shop(tmp_path / "shop.db"), Oddities()
    task_queue = f"bad-{uuid.uuid4().hex[:8]}"
    worker = new_worker(
        temporal_env.client, store=store, toolbox=Toolbox.build(shop, odd),
        task_queue=task_queue, models={"huge": HugeArgumentModel()},
    )  # fmt: skip
    harness = Harness(temporal_env.client, store, shop, odd, task_queue)
    try:
        async with worker:
            yield harness
            for handle in harness.handles:  # no bad input may break workflow code
                described = await handle.describe()
                if described.status is WorkflowExecutionStatus.COMPLETED:
                    assert await failed_workflow_tasks(handle) == [], handle.id
    finally:
        odd.release.set()
        store.close()


async def test_unknown_tool_in_a_plan_is_refused_before_anything_runs(bad: Harness) -> None:
    """The whole plan is checked before its first step: nothing runs, nothing needs
    undoing, and the saga says REFUSED (not COMPENSATED)."""
    result = await bad.run(SagaInput(plan=[RESERVE, ToolCall(tool="teleport", args={})]))
    assert result.status is SagaStatus.REFUSED
    failure = result.first_failure or ""
    assert "step 2 (teleport)" in failure and "unknown tool 'teleport'" in failure
    assert "known tools:" in failure  # says what exists
    entries = assert_chain_closed(bad.store, result.saga_id)
    assert [(e.phase.value, e.step) for e in entries] == [("SAGA_OPENED", 0), ("SAGA_CLOSED", 0)]
    assert entries[-1].result["status"] == "REFUSED"
    assert bad.shop.calls() == [] and bad.shop.stock("widget") == INITIAL_STOCK["widget"]


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"sku": "widget", "qty": "many"}, "qty"),
        ({"sku": "widget"}, "qty: Field required"),
        ({"sku": "widget", "qty": 1, "admin": True}, "admin: Extra inputs are not permitted"),
        ({"sku": ["widget"], "qty": 1}, "sku"),
    ],
)
async def test_invalid_arguments_are_refused_before_anything_runs(
    bad: Harness, args: dict[str, Any], problem: str
) -> None:
    result = await bad.run(SagaInput(plan=[CHARGE, ToolCall(tool="reserve_inventory", args=args)]))
    assert result.status is SagaStatus.REFUSED
    assert "invalid arguments for tool 'reserve_inventory'" in (result.first_failure or "")
    assert problem in (result.first_failure or ""), result.first_failure
    assert bad.shop.calls() == []  # neither step's body ran: the plan was checked first
    assert bad.shop.charges() == []
    entries = assert_chain_closed(bad.store, result.saga_id)
    assert [e.phase.value for e in entries] == ["SAGA_OPENED", "SAGA_CLOSED"]


# ---- payload limits -----------------------------------------------------------------------


async def test_three_megabyte_argument_in_a_plan_is_refused_at_start(bad: Harness) -> None:
    """Over the per-call bound (sagacity.journal._bounds.MAX_ARGS_BYTES): the client refuses it
    before starting, naming the step and the limit; no saga exists, nothing is journaled.
    (A raw client meets the same bound in the workflow: tests/system/faults/test_hostile_inputs.)"""
    saga_id = f"huge-{uuid.uuid4().hex[:12]}"
    plan = [RESERVE, ToolCall(tool="ship_order", args={"address": "x" * THREE_MB})]
    with pytest.raises(BoundsError, match=r"plan step 2 \('ship_order'\) arguments .* over"):
        await start_saga(bad.client, SagaInput(plan=plan), saga_id=saga_id,
                         task_queue=bad.task_queue)  # fmt: skip
    with pytest.raises(Exception, match=r"(?i)not found"):
        await bad.client.get_workflow_handle(saga_id).describe()
    assert list(bad.store.entries(saga_id)) == []
    assert bad.shop.calls() == []


async def test_three_megabyte_argument_from_the_model_is_a_refused_call(bad: Harness) -> None:
    """The model's turn is bounded before it reaches the workflow: the oversized call keeps
    its place but is refused (CALL_REFUSED, the model told why), nothing of the 3 MB
    reaches history or the journal, and the model goes on to its final answer."""
    result = await bad.run(SagaInput(goal="ship it", model=ModelSettings(provider="huge")))
    assert result.status is SagaStatus.COMPLETED
    assert [s.status for s in result.steps] == ["EXECUTED", "REFUSED"]
    assert "over the limit of 65,536" in (result.steps[1].error or "")
    entries = assert_chain_closed(bad.store, result.saga_id)
    assert [(e.phase.value, e.step) for e in entries] == [
        ("SAGA_OPENED", 0), ("INTENT", 1), ("EXECUTED", 1), ("CALL_REFUSED", 2),
        ("SAGA_CLOSED", 0),
    ]  # fmt: skip
    assert len(entries[3].input_json) < 2_000
    assert bad.shop.calls("ship_order") == []


@pytest.mark.parametrize("size", [MAX_ARGS_BYTES // 2, MAX_ARGS_BYTES - 100])
async def test_argument_just_under_the_limit_runs_and_is_journaled_whole(
    bad: Harness, size: int
) -> None:
    """Under the per-call bound the call is legitimate: it runs, the saga completes
    (no payload error when it hands over to a new run or returns its result), and the
    journal holds the argument in full."""
    handle = await bad.start(
        SagaInput(plan=[RESERVE, ToolCall(tool="ship_order", args={"address": "x" * size})])
    )
    deadline = time.monotonic() + 30
    while (await handle.describe()).close_time is None:
        failures = await failed_workflow_tasks(handle)
        if failures:  # a payload error here repeats forever: fail fast instead of hanging
            await handle.terminate("wedged")
            pytest.fail(f"workflow task failed: {failures[0]}")
        assert time.monotonic() < deadline, "saga neither final nor failing after 30 s"
        await asyncio.sleep(0.5)
    result = await saga_result(handle)
    assert result.status is SagaStatus.COMPLETED, result.first_failure
    entries = assert_chain_closed(bad.store, handle.id)
    executed = [e for e in entries if e.phase is Phase.EXECUTED and e.step == 2]
    assert executed[0].input["address"] == "x" * size
    assert bad.shop.shipments() == [f"{handle.id}:2"]


# ---- results that cannot be journaled ----------------------------------------------------


@pytest.mark.parametrize("kind", ["object", "lock", "nan", "bigint", "bytes"])
async def test_unjournalable_result_fails_the_saga_and_compensates(bad: Harness, kind: str) -> None:
    """The tool returned normally, so it ran: the step is journaled EXECUTED with a
    stand-in that says what came back (type, a repr prefix and its hash, the reason), and
    the saga fails with a message naming the tool and the problem, then compensates."""
    result = await bad.run(
        SagaInput(plan=[RESERVE, CHARGE, ToolCall(tool="odd_result", args={"kind": kind})])
    )
    assert result.status is SagaStatus.COMPENSATED
    failure = result.first_failure or ""
    assert failure.startswith("step 3 (odd_result) ran, but result not journaled"), failure
    assert "odd_result" in failure.split("journaled", 1)[1], failure
    executed = [e for e in entries_of(bad.store, result.saga_id, Phase.EXECUTED) if e.step == 3]
    stand_in = executed[0].result["unjournalable_result"]
    assert set(stand_in) == {"type", "repr_prefix", "repr_sha256", "error"}
    assert [(c.step, c.ok) for c in result.compensations] == [(2, True), (1, True)]
    entries = assert_chain_closed(bad.store, result.saga_id)
    assert [e.phase.value for e in entries] == [
        "SAGA_OPENED", "INTENT", "EXECUTED", "INTENT", "EXECUTED", "INTENT", "EXECUTED",
        "COMPENSATING", "COMPENSATED", "COMPENSATED", "SAGA_CLOSED",
    ]  # fmt: skip
    assert_evidence_consistent(result, entries)
    assert bad.odd.calls == [("odd_result", kind)]  # ran once
    assert bad.shop.stock("widget") == INITIAL_STOCK["widget"]


async def test_effect_behind_an_unjournalable_result_is_compensated(bad: Harness) -> None:
    """A compensable tool takes a payment, then returns garbage: the payment is live, so
    the step counts as executed and its compensation voids it."""
    result = await bad.run(
        SagaInput(plan=[RESERVE, ToolCall(tool="pay_then_return_garbage", args={"amount": 9})])
    )
    assert result.status is SagaStatus.COMPENSATED
    key = f"{result.saga_id}:2"
    assert bad.odd.payments == {key: True}
    assert bad.odd.calls == [("pay_then_return_garbage", key), ("void_odd_payment", key)]
    assert [(c.step, c.ok) for c in result.compensations] == [(2, True), (1, True)]
    entries = assert_chain_closed(bad.store, result.saga_id)
    assert [(e.phase.value, e.step) for e in entries] == [
        ("SAGA_OPENED", 0), ("INTENT", 1), ("EXECUTED", 1), ("INTENT", 2), ("EXECUTED", 2),
        ("COMPENSATING", 0), ("COMPENSATED", 2), ("COMPENSATED", 1), ("SAGA_CLOSED", 0),
    ]  # fmt: skip


# ---- a tool that hangs --------------------------------------------------------------------


async def test_hanging_tool_times_out_is_unknown_and_its_late_attempt_is_fenced(
    bad: Harness,
) -> None:
    """The tool blocks forever. Temporal times the attempt out; the retry finds its
    orphan INTENT and reports the step as an unknown outcome (not run again); the saga
    fences the step and compensates the rest. When the hung call finally returns, its
    fence check stops it from applying anything, and the closed journal stays closed."""
    handle = await bad.start(
        SagaInput(
            plan=[RESERVE, ToolCall(tool="hang", args={})],
            tool_timeout_seconds=3,
            tool_heartbeat_timeout_seconds=2,
            tool_attempts=3,
            resolution=ResolutionPolicy(deadline_seconds=1),  # nobody comes: UNRESOLVED
        )
    )
    result = await asyncio.wait_for(saga_result(handle), 40)

    assert result.status is SagaStatus.UNRESOLVED, result
    assert result.unknown_outcome_steps == [2] and result.needs_human
    assert "step 2 (hang) unknown" in (result.first_failure or ""), result.first_failure
    assert [(c.step, c.ok) for c in result.compensations] == [(1, True)]
    assert bad.store.is_fenced(handle.id, 2)
    entries = assert_chain_closed(bad.store, handle.id)
    story = [(e.phase.value, e.step) for e in entries]
    assert story == [
        ("SAGA_OPENED", 0), ("INTENT", 1), ("EXECUTED", 1), ("INTENT", 2),
        ("COMPENSATING", 0), ("COMPENSATED", 1), ("NEEDS_HUMAN", 0), ("SAGA_CLOSED", 0),
    ]  # fmt: skip
    assert_evidence_consistent(result, entries)
    assert bad.odd.calls.count(("hang", f"{handle.id}:2")) == 1  # never run a second time

    # Temporal's own record: the first attempt timed out, a second attempt ran.
    started = [
        e.activity_task_started_event_attributes
        for e in await history_events(handle)
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    retried = [a for a in started if a.attempt >= 2]
    assert retried, started
    assert retried[0].last_failure.timeout_failure_info.timeout_type in (
        TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE,
        TimeoutType.TIMEOUT_TYPE_HEARTBEAT,
    )

    bad.odd.release.set()  # the hung call returns at last
    # Its attempt was cancelled when it timed out, so nothing awaits it: once the tool has
    # checked its fence (the last thing it does), nothing else can write for it.
    await eventually(lambda: bad.odd.late, 10, "the late attempt to finish")
    assert bad.odd.late == ["fenced: did nothing"]
    assert phases(bad.store, handle.id) == story  # nothing appended after the close
