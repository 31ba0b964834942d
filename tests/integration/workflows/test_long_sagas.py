"""Long sagas and large results stay within Temporal's limits: a 5 MB tool result is cut
for the model but journaled whole, and a 300-step saga continues as new with one chain."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType

from sagacity.journal._chain import verify_chain
from sagacity.journal._phases import SagaStatus
from sagacity.worker.client._client import saga_result
from sagacity.workflows._models import ModelSettings, ModelTurn, SagaInput, ToolCall
from tests.integration.workflows.test_approval_flows import decision, pending
from tests.support.workflows import RESERVE, WIRE, entries_of

FIVE_MB = 5 * 1024 * 1024


async def test_five_megabyte_result_is_journaled_whole_and_cut_for_the_model(saga) -> None:
    script = [
        ModelTurn(
            tool_calls=[ToolCall(tool="catalog_export", args={"size_bytes": FIVE_MB}, call_id="x")]
        ),
        ModelTurn(final="exported"),
    ]
    handle = await saga.start(SagaInput(goal="export", model=ModelSettings(script=script)))
    result = await saga_result(handle)

    assert result.status is SagaStatus.COMPLETED
    executed = entries_of(saga.store, handle.id, "EXECUTED")[0]
    assert len(executed.result["rows"]) == FIVE_MB
    assert "journal holds the full result" in str(result.steps[0].result)
    history = await handle.fetch_history()
    biggest = max(len(e.SerializeToString()) for e in history.events)
    assert biggest < 200_000  # nothing near the 5 MB went through history


async def test_three_hundred_steps_continue_as_new_and_the_chain_verifies(saga) -> None:
    plan = [ToolCall(tool="catalog_export", args={"size_bytes": 10}) for _ in range(299)]
    plan.insert(0, RESERVE)
    plan.append(WIRE)  # an approval after the boundaries, and compensation across them
    handle = await saga.start(SagaInput(plan=plan, max_steps=400, continue_as_new_after_steps=100))
    # 300 steps and three continue-as-new (each at least ~1 s apart, the server's minimum)
    # before the approval: more than the default wait when two test processes share the CPU.
    p = await pending(handle, timeout=90)
    assert p.step == 301
    await handle.signal("reject", {**decision(p), "reason": "no"})
    result = await saga_result(handle)

    assert result.status is SagaStatus.COMPENSATED
    entries = list(saga.store.entries(handle.id))
    assert verify_chain(handle.id, entries).ok
    assert [e.phase.value for e in entries].count("SAGA_OPENED") == 1
    assert [e.phase.value for e in entries].count("EXECUTED") == 300
    assert [e.step for e in entries_of(saga.store, handle.id, "COMPENSATED")] == [1]
    assert saga.shop.stock("widget") == 10  # step 1, three runs back, was compensated
    first_run = saga.client.get_workflow_handle(handle.id, run_id=handle.result_run_id)
    history = await first_run.fetch_history()
    assert history.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    assert len(result.steps) == 301
