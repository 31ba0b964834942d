"""What the Temporal witness reads from one run's history, without a server: recorded
histories of real sagas (an AgentSaga and a user's workflow with the saga API) name every
entry and their close, while a run that is no saga, and places in a saga's history that
sagacity does not write (a user's activities and result, a tool's own result), are never
read — whatever hashes they carry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.common.v1 import ActivityType, Payload, Payloads, WorkflowType
from temporalio.api.enums.v1 import EventType
from temporalio.api.failure.v1 import ApplicationFailureInfo, Failure
from temporalio.api.history.v1 import (
    ActivityTaskCompletedEventAttributes,
    ActivityTaskFailedEventAttributes,
    ActivityTaskScheduledEventAttributes,
    HistoryEvent,
    MarkerRecordedEventAttributes,
    WorkflowExecutionCompletedEventAttributes,
    WorkflowExecutionFailedEventAttributes,
    WorkflowExecutionStartedEventAttributes,
)
from temporalio.client import WorkflowHistory

from sagacity.worker.client._witness import Witnessed, read_history
from sagacity.worker.client._witness_history import read_run
from tests.histories import AGENT_SAGA, SAGA_API

RECORDED = sorted([*SAGA_API.glob("*.json"), *AGENT_SAGA.glob("*.json")])
H1, H2 = "1" * 64, "2" * 64


def _payloads(*values: Any) -> Payloads:
    return Payloads(
        payloads=[
            Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(v).encode())
            for v in values
        ]
    )


def _failure(kind: str, *details: Any) -> Failure:
    info = ApplicationFailureInfo(type=kind, details=_payloads(*details))
    return Failure(message="failed", application_failure_info=info)


class Run:
    """A run's history, event by event, as a worker of any code could write it."""

    def __init__(self, workflow_type: str) -> None:
        started = WorkflowExecutionStartedEventAttributes(
            workflow_type=WorkflowType(name=workflow_type), original_execution_run_id="r1"
        )
        self.events = [
            HistoryEvent(
                event_id=1,
                event_type=EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
                workflow_execution_started_event_attributes=started,
            )
        ]

    def _add(self, **attributes: Any) -> int:
        event_id = len(self.events) + 1
        self.events.append(HistoryEvent(event_id=event_id, **attributes))
        return event_id

    def local(self, activity_type: str, result: Any) -> Run:
        data = {"seq": 1, "activity_id": "1", "activity_type": activity_type}
        details = {"data": _payloads(data), "result": _payloads(result)}
        marker = MarkerRecordedEventAttributes(marker_name="core_local_activity", details=details)
        self._add(marker_recorded_event_attributes=marker)
        return self

    def activity(
        self, activity_type: str, result: Any = None, failure: Failure | None = None
    ) -> Run:
        scheduled = self._add(
            activity_task_scheduled_event_attributes=ActivityTaskScheduledEventAttributes(
                activity_type=ActivityType(name=activity_type)
            )
        )
        if failure is not None:
            failed = ActivityTaskFailedEventAttributes(
                scheduled_event_id=scheduled, failure=failure
            )
            self._add(activity_task_failed_event_attributes=failed)
        else:
            done = ActivityTaskCompletedEventAttributes(
                scheduled_event_id=scheduled, result=_payloads(result)
            )
            self._add(activity_task_completed_event_attributes=done)
        return self

    def completes(self, result: Any) -> Run:
        done = WorkflowExecutionCompletedEventAttributes(result=_payloads(result))
        self._add(workflow_execution_completed_event_attributes=done)
        return self

    def fails(self, failure: Failure) -> Run:
        failed = WorkflowExecutionFailedEventAttributes(failure=failure)
        self._add(workflow_execution_failed_event_attributes=failed)
        return self

    def history(self) -> WorkflowHistory:
        return WorkflowHistory("s", self.events)


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_a_recorded_saga_names_every_entry_and_its_close(path: Path) -> None:
    run = read_run(WorkflowHistory.from_json("s", json.loads(path.read_text())))
    assert run.saga
    seqs = {seq for seq, _ in run.refs}
    assert seqs == set(range(1, max(seqs) + 1))  # every entry the saga wrote, none made up
    assert set(run.closes) == {max(seqs)}


def test_a_run_of_another_workflow_type_is_no_saga_and_never_read() -> None:
    """Finding 1 and 7 of the second attack: a Forger under a saga's id failing with a
    Saga-typed failure full of refs, or completing with a ref, lent hashes or accused."""
    steps = [{"ref": {"seq": 1, "hash": H1}}]
    forged = [{"status": "COMPLETED", "head_seq": 2, "head_hash": H2, "steps": steps}]
    for run in (
        Run("Forger").fails(_failure("SagaFailed", *forged)),
        Run("Forger").fails(_failure("SagaCompleted", *forged)),
        Run("Forger").completes({"seq": 2, "hash": "0" * 64}),
        Run("Forger").local("my.activity", {"seq": 1, "hash": H1}),
    ):
        record = read_run(run.history())
        assert not record.saga and record.refs == [] and record.closes == []
        seen = Witnessed("s")
        read_history(seen, run.history())
        assert seen.runs == 0 and seen.foreign == {"Forger": 1} and seen.refs == {}


def test_a_saga_run_is_read_only_where_sagacity_writes() -> None:
    ref = {"seq": 1, "hash": H1, "phase": "SAGA_OPENED"}
    run = (
        Run("OrderWorkflow")
        .local("sagacity.journal_event", ref)
        .local("user.lookup", {"seq": 5, "hash": H2})  # the user's own local activity
        .activity("user.charge", {"seq": 6, "hash": H2})  # and its own activity
        .activity("user.ship", failure=_failure("ToolFailed", {"seq": 7, "hash": H2}))
        .activity("sagacity.run_tool", failure=_failure("Other", {"seq": 8, "hash": H2}))
        .completes({"seq": 9, "hash": H2, "head_seq": 9})  # the user's result is the user's
    )
    record = read_run(run.history())
    assert record.saga and record.refs == [(1, H1)] and record.closes == []
    failed = Run("OrderWorkflow").local("sagacity.journal_event", ref)
    failed.fails(_failure("SagaCompensated", {"head_seq": 2, "head_hash": H2}))
    assert read_run(failed.history()).closes == [2]
    wrong_type = Run("OrderWorkflow").local("sagacity.journal_event", ref)
    wrong_type.fails(_failure("OrderRefused", {"head_seq": 2, "head_hash": H2}))
    assert read_run(wrong_type.history()).refs == [(1, H1)]


def test_a_failed_tool_and_an_agent_sagas_result_are_read() -> None:
    def ref(seq: int, digest: str, phase: str) -> dict[str, Any]:
        return {"seq": seq, "hash": digest, "phase": phase}

    planted = {"seq": 1, "hash": "0" * 64, "phase": "EXECUTED"}  # a tool's own result
    executed = {"kind": "EXECUTED", "intent": ref(2, H1, "INTENT"), "result": planted}
    failed = {"kind": "FAILED", "intent": ref(3, H2, "INTENT"), "outcome": ref(4, H1, "FAILED")}
    steps = [{"intent_seq": 2, "intent_hash": H1, "seq": 4, "hash": H1, "result": planted}]
    result = {"status": "COMPENSATED", "head_seq": 5, "head_hash": H2, "steps": steps}
    run = (
        Run("AgentSaga")
        .activity("sagacity.run_tool", executed)
        .activity("sagacity.run_tool", failure=_failure("ToolFailed", failed))
        .activity("sagacity.compensate", {"step": 1, "entry": ref(5, H2, "SAGA_CLOSED")})
        .fails(_failure("SagaCompensated", result))
    )
    record = read_run(run.history())
    assert record.saga
    assert sorted(set(record.refs)) == [(2, H1), (3, H2), (4, H1), (5, H2)]  # never seq 1
    assert record.closes == [5, 5]
    done = Run("AgentSaga").completes({"status": "COMPLETED", "head_seq": 7, "head_hash": H1})
    assert read_run(done.history()).closes == [7]
    empty = read_run(Run("AgentSaga").history())  # started on a queue no worker polls
    assert empty.saga and empty.refs == []
