"""Continue-as-new state is the saga's own, never a caller's (found by an outside attack).

Temporal names a previous run for a cron run and a retried run as it does for a
continue-as-new, so a client could start an AgentSaga on a cron schedule with a `carry`
naming a chain someone inserted into the journal by hand: from the second run on, the
saga took the state as its own, passed the resume check, and closed (and checkpointed)
the inserted chain as if it had run it. Now an AgentSaga refuses a cron schedule, and a
run takes state only when it continues a run of its own and the state names that run.
"""

from __future__ import annotations

import uuid

from temporalio.client import WorkflowExecutionStatus

from sagacity.activities._identity import worker_identity
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import JournalStore
from sagacity.tools._toolbox import Toolbox
from tests.support.workflows import eventually

INSERTED = "ghost"


def _insert_open_chain(store: JournalStore, saga_id: str) -> tuple[int, str]:
    """An open chain appended as its writer could: one charge that never happened.
    Returns its head (seq, hash)."""
    store.append(EntryDraft.new(saga_id, Phase.SAGA_OPENED, input={"plan": []}))
    args = {"amount": 999_999, "currency": "EUR", "card": "tok_visa"}
    store.append(EntryDraft.new(saga_id, Phase.INTENT, step=1, tool="charge_card", input=args))
    head = store.append(
        EntryDraft.new(
            saga_id, Phase.EXECUTED, step=1, tool="charge_card", input=args,
            result={"charge": "ch_fake"},
        )
    )  # fmt: skip
    return head.seq, head.hash


async def test_a_cron_run_cannot_hand_a_saga_a_forged_state(saga) -> None:
    ghost = f"{INSERTED}-{uuid.uuid4().hex[:8]}"
    # The real worker's identity, as an attacker reads it from any honest saga.
    identity = worker_identity(Toolbox.build(saga.shop), saga.store.url)
    seq, digest = _insert_open_chain(saga.store, ghost)
    carry = {
        "next_step": 2,
        "head": {"seq": seq, "hash": digest, "phase": "EXECUTED"},
        "worker": identity,
        "steps": [],
        "plan_index": 0,
    }
    handle = await saga.client.start_workflow(
        "AgentSaga",
        {"plan": [], "carry": carry},
        id=ghost,
        task_queue=saga.task_queue,
        cron_schedule="@every 1s",
    )
    try:

        async def runs_refused() -> list[str] | None:
            closed = [
                run
                async for run in saga.client.list_workflows(f'WorkflowId="{ghost}"')
                if run.status is WorkflowExecutionStatus.FAILED
            ]
            return [run.run_id for run in closed] if len(closed) >= 3 else None

        refused = await eventually(runs_refused, 60)
        for run_id in refused:
            history = await saga.client.get_workflow_handle(ghost, run_id=run_id).fetch_history()
            failure = history.events[-1].workflow_execution_failed_event_attributes.failure
            assert "cron schedule" in failure.message, failure.message
    finally:
        await handle.terminate("test over")
    # The inserted chain was never taken over: still open, nothing appended to it.
    phases = [e.phase for e in saga.store.entries(ghost)]
    assert phases == [Phase.SAGA_OPENED, Phase.INTENT, Phase.EXECUTED]
