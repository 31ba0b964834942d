"""An update the server drops because its workflow task failed is sent again, once applied.

The race, forced on the real dev server: the update's handler closes the workflow in the
task that runs it, while a signal arrives during that task. The server refuses the
closing task (UNHANDLED_COMMAND: an event came in the meantime) and aborts the update
with WorkflowNotReadyFailure, though nothing of it was applied. A saga met this when a
cancelled tool's acknowledgement landed while an acceptance was closing it.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from sagacity.worker.client._client import saga_result
from sagacity.worker.client._errors import translate
from sagacity.worker.client._update_delivery import execute_update, workflow_not_ready


class Hold:
    """The local activity's gate: the first call waits until the test has sent its signal
    (so the signal lands while the closing task is running); later calls pass."""

    def __init__(self) -> None:
        self.calls = 0
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    @activity.defn(name="hold")
    async def hold(self) -> None:
        self.calls += 1
        if self.calls == 1:
            self.entered.set()
            await self.release.wait()


@workflow.defn(name="ClosesOnUpdate", sandboxed=False)
class ClosesOnUpdate:
    def __init__(self) -> None:
        self.finished = False

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.finished)
        return "closed"

    @workflow.signal
    def poke(self) -> None:
        """Any event that arrives during the closing task will do."""

    @workflow.update
    async def finish(self) -> str:
        await workflow.execute_local_activity("hold", start_to_close_timeout=timedelta(seconds=10))
        self.finished = True
        return "applied"


async def _unhandled_command_failures(handle: WorkflowHandle[object, object]) -> int:
    history = await handle.fetch_history()
    return sum(
        1
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
        and e.workflow_task_failed_event_attributes.cause
        == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND
    )


async def _race(
    client: Client, *, retried: bool
) -> tuple[WorkflowHandle[object, object], Hold, BaseException | str]:
    """Send `finish` and, while its handler holds the closing task, a signal. Returns the
    handle, the gate and what the update's sender got (its result or its error)."""
    hold = Hold()
    queue = f"not-ready-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[ClosesOnUpdate], activities=[hold.hold]):
        handle: WorkflowHandle[object, object] = await client.start_workflow(
            "ClosesOnUpdate", id=f"closes-{uuid.uuid4().hex[:8]}", task_queue=queue
        )

        async def send() -> str:
            if retried:
                return await execute_update(
                    handle, "finish", None, str, rpc_timeout=timedelta(seconds=20)
                )
            result: str = await handle.execute_update("finish", result_type=str)
            return result

        sent = asyncio.create_task(send())
        await asyncio.wait_for(hold.entered.wait(), 20)
        await handle.signal("poke")
        hold.release.set()
        try:
            outcome: BaseException | str = await asyncio.wait_for(sent, 30)
        except RPCError as exc:
            outcome = exc
        if retried:
            assert await saga_result(handle) == "closed"
    return handle, hold, outcome


@pytest.mark.timeout(60)
async def test_the_server_drops_an_update_whose_closing_task_met_an_event(
    temporal_env: WorkflowEnvironment,
) -> None:
    """The fault is real: sent once, the update fails with the not-ready error, though
    its handler ran (and was thrown away with the task)."""
    handle, hold, outcome = await _race(temporal_env.client, retried=False)
    assert isinstance(outcome, RPCError) and workflow_not_ready(outcome), outcome
    assert await _unhandled_command_failures(handle) == 1
    assert hold.calls == 1
    # Were every try dropped, the person is told that nothing was applied.
    told = translate(outcome, temporal_env.client, handle.id, call="the finish update")
    assert "kept failing while it took the finish update" in str(told)
    assert "nothing was applied" in str(told)


@pytest.mark.timeout(60)
async def test_a_dropped_update_is_sent_again_and_applied_once(
    temporal_env: WorkflowEnvironment,
) -> None:
    handle, hold, outcome = await _race(temporal_env.client, retried=True)
    assert outcome == "applied"
    assert await _unhandled_command_failures(handle) == 1  # the first try was dropped
    assert hold.calls == 2  # and the second was applied, once
    history = await handle.fetch_history()
    accepted = [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    ]
    assert len(accepted) == 1


def test_other_refusals_are_not_taken_for_a_dropped_update() -> None:
    """Only FAILED_PRECONDITION carrying WorkflowNotReadyFailure is sent again."""
    from google.protobuf.any_pb2 import Any as AnyProto
    from temporalio.api.common.v1 import GrpcStatus
    from temporalio.service import RPCStatusCode

    def error(status: RPCStatusCode, type_url: str | None) -> RPCError:
        grpc = GrpcStatus(code=status.value, message="x")
        if type_url is not None:
            grpc.details.append(AnyProto(type_url=type_url, value=b""))
        return RPCError("x", status, grpc.SerializeToString())

    prefix = "type.googleapis.com/temporal.api.errordetails.v1."
    assert workflow_not_ready(
        error(RPCStatusCode.FAILED_PRECONDITION, prefix + "WorkflowNotReadyFailure")
    )
    assert not workflow_not_ready(error(RPCStatusCode.FAILED_PRECONDITION, None))
    assert not workflow_not_ready(
        error(RPCStatusCode.FAILED_PRECONDITION, prefix + "NotFoundFailure")
    )
    assert not workflow_not_ready(
        error(RPCStatusCode.UNAVAILABLE, prefix + "WorkflowNotReadyFailure")
    )
    assert not workflow_not_ready(RPCError("x", RPCStatusCode.FAILED_PRECONDITION, b"\xff\x00"))
