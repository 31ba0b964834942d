"""A saga whose workflow ended without closing its journal — terminated, timed out, a
child killed by its parent — is found by `sagacity dirty`, SagaClient.needing_human()
and the inbox, with its executed steps read from the journal and the command that
resolves it, and `sagacity compensate` undoes it: the run is reset (same run chain) and
cancelled, and the saga's own cancellation path compensates and closes the journal."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from starlette.testclient import TestClient
from temporalio.client import WorkflowFailureError

from sagacity.examples.order_workflow import OrderWorkflow
from sagacity.examples.orders import INITIAL_STOCK
from sagacity.journal._phases import Phase
from sagacity.worker.client._ended_sagas import EndedSaga
from sagacity.worker.client._resolutions import DirtyItem, NeedingHuman
from sagacity.worker.client._saga_client import SagaClient
from sagacity.worker.client._saga_reset import NotEndedError
from sagacity.worker.inbox import InboxConfig, create_app
from sagacity.worker.inbox._source import SagaSource
from tests.integration.worker.client.ended.conftest import Ended, order
from tests.integration.worker.client.ended.parents import OrdersParent, Stranger
from tests.support.workers import eventually, phases

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(120)]

LIVE = [(1, "reserve_inventory"), (2, "charge_card"), (3, "ship_order")]
"""What the order saga has executed when it waits on its wire's approval (step 4)."""


async def listed(client: SagaClient, saga_id: str) -> DirtyItem | None:
    return next((i for i in await client.needing_human() if i.summary.saga_id == saga_id), None)


def assert_found(item: DirtyItem | None, how: str) -> EndedSaga:
    """Listed as ended without closing, with its live steps from the journal."""
    assert item is not None and item.ended is not None, item
    found = item.ended
    assert how in found.how, found.how
    assert found.journaled and found.resettable
    assert [(s.step, s.tool) for s in found.executed] == LIVE
    assert found.executed[1].input["amount"] == 1250
    assert found.awaiting == (4,) and found.unknown == ()
    assert any(c.startswith(f"sagacity compensate {item.summary.saga_id} ") for c in found.commands)
    return found


def assert_compensated(ended: Ended, saga_id: str, *, asked_by: str) -> None:
    """The ledger read back and the journal: everything undone, the chain closed."""
    said = ended.undone(saga_id)["first_failure"]
    assert f"saga cancelled (by {asked_by}: compensate the saga that ended" in said


async def test_a_terminated_saga_is_listed_and_compensated_from_the_cli(ended: Ended) -> None:
    saga_id = ended.new_id()
    await ended.client.start_workflow(
        OrderWorkflow.run, order(), saga_id=saga_id, task_queue=ended.task_queue
    )
    await ended.awaiting_approval(saga_id)
    await ended.client.handle(saga_id).terminate(reason="operator pulled the plug")
    assert ended.shop.stock("widget") == INITIAL_STOCK["widget"] - 2  # live after the end
    assert ended.store.head(saga_id).phase is Phase.AWAITING_APPROVAL

    how = "terminated (operator pulled the plug)"
    found = assert_found(await listed(ended.client, saga_id), how)
    assert found.summary.execution_status == "TERMINATED" and found.parent_id is None

    said = await ended.cli("dirty", "--json")
    assert said.code == 0, said.output
    row = next(r for r in json.loads(said.stdout) if r["saga_id"] == saga_id)
    assert [(s["step"], s["tool"]) for s in row["ended"]["executed"]] == LIVE
    assert row["ended"]["execution_status"] == "TERMINATED" and row["dirty"] == []
    assert "searched: Temporal visibility" in said.stderr and "open chain(s)" in said.stderr
    text = await ended.cli("dirty")
    assert saga_id in text.stdout and "reserve_inventory" in text.stdout
    assert f"$ sagacity compensate {saga_id} --actor NAME --reason 'WHY'" in text.stdout

    done = await ended.cli(
        "compensate", saga_id, "--actor", "olivia", "--reason", "stock must go back",
        "--yes", "--wait",
    )  # fmt: skip
    assert done.code == 0, done.output
    assert "closed COMPENSATED" in done.stdout
    assert_compensated(ended, saga_id, asked_by="olivia")
    assert await listed(ended.client, saga_id) is None


@pytest.mark.parametrize("timeout", ["run_timeout", "execution_timeout"])
async def test_a_saga_ended_by_a_timeout_is_listed_and_compensated(
    ended: Ended, timeout: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The reset run gets a fresh timeout of the same length (measured): compensating
    within it closes the saga; a compensation cut off again is listed again, and
    compensating again goes on where it stopped."""
    saga_id = ended.new_id()
    handle = await ended.start(saga_id, **{timeout: timedelta(seconds=8)})
    await ended.awaiting_approval(saga_id)
    with pytest.raises(WorkflowFailureError):
        await handle.result()

    kind = timeout.split("_")[0]
    warned = [r.getMessage() for r in caplog.records if saga_id in r.getMessage()]
    said = f"runs with a timeout ({'run 0:00:08, ' if kind == 'execution' else ''}{kind} 0:00:08)"
    assert any(said in m for m in warned), warned  # Saga.open said so
    found = assert_found(await listed(ended.client, saga_id), "timed out")
    assert found.summary.execution_status == "TIMED_OUT"
    assert f"{kind} timeout 8s" in found.how

    for _attempt in range(3):
        await ended.client.compensate(saga_id, reason="the order timed out", actor="olivia")

        async def settled() -> bool:
            head = ended.store.head(saga_id)
            if head is not None and head.phase is Phase.SAGA_CLOSED:
                return True
            return not (await ended.client.describe(saga_id)).running

        await eventually(settled, 30, "the reset run closing or timing out")
        if ended.store.head(saga_id).phase is Phase.SAGA_CLOSED:
            break
    assert_compensated(ended, saga_id, asked_by="olivia")


async def test_a_child_killed_by_its_parent_is_listed_and_compensated(ended: Ended) -> None:
    """Started with Temporal's own start_child_workflow (policy TERMINATE): the parent's
    failure terminates the child saga. It is listed with its parent, and compensated."""
    parent, child_id = await ended.start_parent(helper=False)
    await ended.awaiting_approval(child_id)
    await parent.signal(OrdersParent.give_up)
    with pytest.raises(WorkflowFailureError):
        await parent.result()

    async def child_ended() -> DirtyItem | None:
        return await listed(ended.client, child_id)

    found = assert_found(await eventually(child_ended, 20, "the child listed"), "terminated")
    assert found.parent_id == parent.id

    done = await ended.cli(
        "compensate", child_id, "--actor", "olivia", "--reason", "parent failed", "--yes", "--wait"
    )
    assert done.code == 0, done.output
    assert_compensated(ended, child_id, asked_by="olivia")


@pytest.mark.parametrize("journal_url", ["sqlite"], indirect=True)
async def test_without_the_journal_it_is_still_found_and_the_gap_is_said(ended: Ended) -> None:
    saga_id = await ended.awaiting_order()
    await ended.client.handle(saga_id).terminate(reason="gone")

    blind = SagaClient(ended.temporal, task_queue=ended.task_queue)  # no journal store

    async def seen() -> NeedingHuman | None:  # visibility lags the terminate a moment
        found = await blind.needing_human()
        return found if any(i.summary.saga_id == saga_id for i in found) else None

    found = await eventually(seen, 20, "the terminated saga in visibility")
    item = next(i for i in found if i.summary.saga_id == saga_id)
    assert item.ended is not None and not item.ended.journaled and not item.ended.resettable
    assert any("journal" in gap and "store" in gap for gap in found.not_searched)
    assert found.searched and "visibility" in found.searched[0]

    said = await ended.cli("dirty", "--journal", "memory://")
    assert saga_id in said.stdout
    assert "NOT searched: the journal (the journal memory:// lives in the worker's memory)" in (
        said.stderr.replace("\n", " ")
    )


@pytest.mark.parametrize("journal_url", ["sqlite"], indirect=True)
async def test_compensate_refuses_a_running_and_a_closed_saga(ended: Ended) -> None:
    saga_id = await ended.awaiting_order()
    before = phases(ended.store, saga_id)

    running = await ended.cli("compensate", saga_id, "--actor", "o", "--reason", "r", "--yes")
    assert running.code == 1 and f"saga {saga_id!r} is running" in running.stderr
    assert phases(ended.store, saga_id) == before
    assert (await ended.client.status(saga_id)).pending_approval is not None  # untouched

    await ended.client.cancel(saga_id, actor="olivia", reason="changed my mind")
    await eventually(lambda: ended.store.head(saga_id).phase is Phase.SAGA_CLOSED, 30)
    with pytest.raises(NotEndedError, match="is closed \\(COMPENSATED\\)"):
        await ended.client.compensate(saga_id, reason="again", actor="olivia")


@pytest.mark.parametrize("journal_url", ["sqlite"], indirect=True)
async def test_the_inbox_lists_it_with_its_steps_and_the_command(ended: Ended) -> None:
    saga_id = await ended.awaiting_order()
    await ended.client.handle(saga_id).terminate(reason="operator pulled the plug")

    base = "http://localhost:8200"
    app = create_app(InboxConfig(origin=base), source=SagaSource(ended.client))

    def browse() -> tuple[str, str]:  # the app in TestClient's own thread and event loop
        with TestClient(app, base_url=base) as web:
            return web.get("/").text, web.get("/dirty").text

    index, page = await asyncio.to_thread(browse)
    assert "need a human" in index
    section = page[page.index(f'data-saga="{saga_id}"') :]
    section = section[: section.index("</section>")]
    assert "terminated (operator pulled the plug)" in section
    for step, tool in LIVE:
        assert f"step {step} {tool}" in section
    assert "step 4: awaited approval, nothing ran" in section
    assert f"sagacity compensate {saga_id} --actor NAME" in section
    assert 'id="searched"' in page and "open chain(s)" in page


@pytest.mark.parametrize("journal_url", ["sqlite"], indirect=True)
async def test_a_run_of_another_chain_under_the_saga_id_is_never_reset(ended: Ended) -> None:
    """After the saga's run was terminated, a workflow of another type is started under
    its id: that run is another run chain. Running, it does not hide the saga; ended, it
    is never reset in the saga's place: the saga is listed with no reset offered, and
    `compensate` refuses."""
    saga_id = await ended.awaiting_order()
    await ended.client.handle(saga_id).terminate(reason="first")
    stranger = await ended.temporal.start_workflow(
        Stranger.run, id=saga_id, task_queue=ended.task_queue
    )
    hidden = await listed(ended.client, saga_id)  # the stranger runs: it hides nothing
    assert hidden is not None and hidden.ended is not None and not hidden.ended.resettable
    assert "another run chain runs under its id" in hidden.ended.how
    await stranger.terminate(reason="second")

    item = await listed(ended.client, saga_id)
    assert item is not None and item.ended is not None
    assert not item.ended.resettable and "another run chain" in item.ended.note
    assert not any("compensate" in c for c in item.ended.commands)
    with pytest.raises(NotEndedError, match="another run chain"):
        await ended.client.compensate(saga_id, reason="try", actor="olivia")
    current = await ended.temporal.get_workflow_handle(saga_id).describe()
    assert current.run_id == stranger.result_run_id  # nothing was reset
    assert ended.store.head(saga_id).phase is Phase.AWAITING_APPROVAL
