"""Temporal as a witness, attacked through workflow ids: a closed saga's id started again
by a raw client (its new run holds none of the saga's entries and once hid the old one),
a workflow started only to lend an inserted saga an id with a history, a workflow of
another type (an attacker's own, on a queue of its own) lending an inserted saga the
hashes it wants or making honest sagas look rewritten and cut, and a journal served by
two task queues with a saga deleted from the one verify is not configured for. Each is
done for real (dev server; PostgreSQL as superuser with the guards off, and SQLite),
shown to have happened, and found naming the saga (or, for the false alarms, shown to
raise none)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from sagacity.examples.orders import Shop
from sagacity.journal._chain import verify_chain
from sagacity.journal._phases import Phase
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.workflows._models import SagaResult
from tests.support.evidence import (
    CHECKPOINT_EVERY,
    EvidenceRig,
    hand_made,
    plan_for,
    rewrite,
    updates,
)


@workflow.defn(name="Forger", sandboxed=False)
class Forger:
    """An attacker's workflow: it ends as `spec` says, with whatever hashes it holds."""

    @workflow.run
    async def run(self, spec: dict[str, Any]) -> Any:
        if spec.get("fail"):
            raise ApplicationError(
                "forged", *spec["details"], type=spec["type"], non_retryable=True
            )
        return spec["result"]


@pytest.fixture
async def forger(rig: EvidenceRig) -> AsyncIterator[str]:
    """The attacker's own worker, on a task queue of its own: its queue."""
    queue = f"evil-{uuid.uuid4().hex[:8]}"
    async with Worker(rig.client, task_queue=queue, workflows=[Forger]):
        yield queue


async def _forge(rig: EvidenceRig, queue: str, saga_id: str, spec: dict[str, Any]) -> Any:
    """Run a Forger under `saga_id`; its result, or its failure's details."""
    handle = await rig.client.start_workflow("Forger", spec, id=saga_id, task_queue=queue)
    if not spec.get("fail"):
        return await handle.result()
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == spec["type"]
    return list(cause.details)


async def _runs(rig: EvidenceRig, saga_id: str) -> int:
    return len([r async for r in rig.client.list_workflows(f"WorkflowId = '{saga_id}'")])


async def test_a_closed_sagas_id_started_again_does_not_hide_its_history(
    rig: EvidenceRig,
) -> None:
    (victim,) = await rig.run_sagas(1, "reused")
    rig.tamper.run(*updates(rewrite(list(rig.store.entries(victim)), "1250", "9999999")))
    assert any("9999999" in e.input_json for e in rig.store.entries(victim))
    assert verify_chain(victim, rig.store.entries(victim)).ok
    again = await rig.client.start_workflow(
        "AgentSaga", plan_for(0), id=victim, task_queue=rig.task_queue, result_type=SagaResult
    )  # a raw client's default lets a new workflow reuse a closed id
    with pytest.raises(WorkflowFailureError):
        await again.result()  # the journal refuses its entries: it writes none
    assert await _runs(rig, victim) == 2

    for args in ([victim], ["--all"]):
        found = await rig.cli("verify", *args, "--witness", "temporal")
        assert found.code == 1, found.output
        assert f"{victim}: witness: entry 1 hashes to" in found.output
        assert "Temporal history recorded" in found.output
        assert "1 id(s) a saga was started under more than once" in found.output


async def test_a_workflow_started_to_lend_an_inserted_saga_a_history_vouches_for_nothing(
    rig: EvidenceRig,
) -> None:
    ghost = f"ghost-{uuid.uuid4().hex[:8]}"
    handle = await rig.client.start_workflow(
        "AgentSaga", plan_for(0), id=ghost, task_queue=f"nowhere-{uuid.uuid4().hex[:8]}"
    )  # no worker polls it: it never writes an entry
    try:
        rig.tamper.insert(
            hand_made(ghost, {"phase": Phase.SAGA_OPENED}, {"phase": Phase.SAGA_CLOSED})
        )
        assert [e.phase for e in rig.store.entries(ghost)][-1] is Phase.SAGA_CLOSED

        found = await rig.cli("verify", ghost, "--witness", "temporal")
        assert found.code == 1, found.output
        assert f"{ghost}: witness: Temporal has 1 run(s) under this id (AgentSaga), but " in (
            found.output
        )
        assert "their history holds no entry of this saga" in found.output
    finally:
        await handle.terminate("test over")


async def test_a_workflow_of_another_type_cannot_lend_an_inserted_saga_its_hashes(
    rig: EvidenceRig, forger: str
) -> None:
    """Finding 1 of the second attack: the witness took any seq and hash in any run's
    result or failure, so a Forger failing as `SagaCompleted` with the inserted chain's
    hashes in its details vouched for it."""
    ghost = f"ghost-{uuid.uuid4().hex[:8]}"
    chain = hand_made(ghost, {"phase": Phase.SAGA_OPENED}, {"phase": Phase.SAGA_CLOSED})
    rig.tamper.insert(chain)
    assert [e.hash for e in rig.store.entries(ghost)] == [e.hash for e in chain]
    steps = [{"ref": {"seq": 1, "hash": chain[0].hash}}]
    result = {"status": "COMPLETED", "head_seq": 2, "head_hash": chain[1].hash, "steps": steps}
    details = await _forge(
        rig, forger, ghost, {"fail": True, "type": "SagaCompleted", "details": [result]}
    )
    assert details == [result]  # its history holds every hash of the inserted chain

    for args in ([ghost], ["--all"]):
        found = await rig.cli("verify", *args, "--witness", "temporal")
        assert found.code == 1, found.output
        assert (
            f"{ghost}: witness: Temporal has no saga run under this id, only run(s) of "
            "another workflow type (1 of Forger)"
        ) in found.output


async def test_runs_of_another_type_under_an_honest_sagas_id_raise_no_false_alarm(
    rig: EvidenceRig, forger: str
) -> None:
    """Finding 7 of the second attack: with a Temporal client and a worker of its own,
    anyone made an honest saga look rewritten ("two hashes for entry 2") or cut ("holds
    entries up to 999"). Such runs are named in the summary, never read."""
    honest, _ = await rig.run_sagas(2, "honest")
    first = next(iter(rig.store.entries(honest)))
    closes_early = [{"head_seq": 1, "head_hash": first.hash}]
    forged = [
        {"result": {"seq": 2, "hash": "0" * 64}},
        {"result": {"seq": 999, "hash": "0" * 64}},
        {"fail": True, "type": "SagaCompensated", "details": closes_early},
    ]
    for spec in forged:
        await _forge(rig, forger, honest, spec)
    assert await _runs(rig, honest) == 4  # the saga's own run and three forged ones

    for args in ([honest], ["--all"]):
        ran = await rig.cli("verify", *args, "--witness", "temporal")
        assert ran.code == 0, ran.output
        assert (
            "1 id(s) also used by a workflow that is no saga, not read as the saga's history: "
            f"{honest} (run(s) of another workflow type (3 of Forger))"
        ) in ran.output


async def test_a_saga_deleted_from_a_journal_served_by_two_task_queues_is_found(
    rig: EvidenceRig, tmp_path: Path
) -> None:
    other_queue = f"ev-b-{uuid.uuid4().hex[:8]}"
    second = new_worker(
        rig.client,
        store=rig.store,
        toolbox=Toolbox.build(Shop(tmp_path / "shop-b.db")),
        task_queue=other_queue,
        log_key=rig.signer,
        checkpoint_every=CHECKPOINT_EVERY,
    )
    async with second:
        await rig.run_sagas(1, "queue-a")
        on_b = []
        for i in range(2):
            saga_id = f"queue-b-{uuid.uuid4().hex[:8]}-{i}"
            handle = await rig.client.start_workflow(
                "AgentSaga",
                plan_for(0),
                id=saga_id,
                task_queue=other_queue,
                result_type=SagaResult,
            )
            await handle.result()
            on_b.append(saga_id)
    victim = on_b[0]
    rig.tamper.run(
        ("DELETE FROM {journal} WHERE saga_id=?", (victim,)),
        ("DELETE FROM {cp} WHERE saga_id=?", (victim,)),
    )  # its checkpoints too: only the witness is left to show it
    assert rig.store.head(victim) is None

    found = await rig.cli("verify", "--all", "--witness", "temporal")
    assert found.code == 1, found.output
    assert f"{victim}: witness: its workflow (1 run(s)) journaled" in found.output
    assert "the saga's journal was deleted" in found.output
    assert other_queue in found.output and rig.task_queue in found.output  # both compared
