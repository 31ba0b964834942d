"""Recorded histories replay against the current workflow code.

The histories in tests/histories/agent_saga/ were recorded by the 1.0 code with
`python -m tests.histories.record_agent_saga`
(one per flow: happy path, failure with compensation, a failing compensation, approve by
signal, reject, a stale hash refused then approved, approve by update, cancel while
awaiting approval, a cancel that says who and why, the agent loop with a scripted model).
Replaying them needs no server.
The replayer is configured as the production worker is: the pydantic data converter and
the sandbox with worker.plugin.PASSTHROUGH.

The mutant tests show the replay test can fail: a workflow that runs its activities in a
different order is caught as nondeterministic. They also pin a limit worth knowing:
Temporal compares commands (activity type and sequence), not their arguments, so
reordering activities of the same type — e.g. running a plan backwards — replays cleanly;
that ordering is guarded by the journal-order assertions of the other tests.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.common import RawValue
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

with workflow.unsafe.imports_passed_through():
    from sagacity.activities._models import EntryRef, JournalEventInput, ToolCall, ToolOutcome
    from sagacity.journal._phases import Phase
    from sagacity.worker._plugin import PASSTHROUGH
    from sagacity.workflows._agent_saga import AgentSagaWorkflow
    from sagacity.workflows._models import SagaResult
    from sagacity.workflows._saga_engine import SagaCore as Saga
    from tests.histories._recording import assert_replayed, recorded_flows
    from tests.histories.record_agent_saga import FLOWS, HISTORIES

CLOSING_EVENTS = {
    "workflow_execution_completed_event_attributes",
    "workflow_execution_failed_event_attributes",
    "workflow_execution_canceled_event_attributes",
}


def _runner() -> SandboxedWorkflowRunner:
    """The workflow runner worker.app.new_worker gives the production worker."""
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH)
    )


def _replayer(*workflows: type) -> Replayer:
    """A replayer configured like worker.app.new_worker configures the worker."""
    return Replayer(
        workflows=list(workflows), data_converter=pydantic_data_converter, workflow_runner=_runner()
    )


def _load(name: str) -> WorkflowHistory:
    path = HISTORIES / f"{name}.json"
    assert path.exists(), f"{path} missing; run `python -m tests.histories.record_agent_saga`"
    history = WorkflowHistory.from_json(name, path.read_text())
    last = history.events[-1].WhichOneof("attributes")
    assert last in CLOSING_EVENTS, f"{name}: history ends with {last}, not a closing event"
    return history


async def _replay_failure(history: WorkflowHistory, workflow_cls: type) -> Exception | None:
    result = await _replayer(workflow_cls).replay_workflow(history, raise_on_replay_failure=False)
    return result.replay_failure


def test_every_flow_has_a_committed_history_and_nothing_else() -> None:
    on_disk = recorded_flows(HISTORIES)
    assert on_disk == set(FLOWS), (
        f"missing {sorted(set(FLOWS) - on_disk)}, unexpected {sorted(on_disk - set(FLOWS))}"
    )
    for path in HISTORIES.glob("*.json"):
        assert json.loads(path.read_text())["events"], path


@pytest.mark.parametrize("name", sorted(FLOWS))
async def test_recorded_history_replays_deterministically(name: str) -> None:
    assert_replayed(name, await _replay_failure(_load(name), AgentSagaWorkflow))


def test_unsuccessful_sagas_fail_their_workflow_with_the_result() -> None:
    """A compensated saga's history ends in a failure whose details are its result (what
    the Temporal UI shows red), a completed saga's in a completion."""
    for name, status in (
        ("failure_compensated", "COMPENSATED"),
        ("reject_by_signal", "COMPENSATED"),
        ("compensation_failed_unresolved", "UNRESOLVED"),
    ):
        text = (HISTORIES / f"{name}.json").read_text()
        last = WorkflowHistory.from_json(name, text).events[-1]
        failure = last.workflow_execution_failed_event_attributes.failure
        info = failure.application_failure_info
        assert info.type == "Saga" + status.title().replace("_", ""), name
        [detail] = info.details.payloads
        assert json.loads(detail.data)["status"] == status, name
    happy = WorkflowHistory.from_json("h", (HISTORIES / "happy_path.json").read_text())
    assert happy.events[-1].HasField("workflow_execution_completed_event_attributes")


def test_a_failed_tool_fails_its_activity() -> None:
    """The failed step is a failed activity (red in the UI) whose details are the step's
    outcome; the workflow read it from there and compensated."""
    text = (HISTORIES / "failure_compensated.json").read_text()
    events = WorkflowHistory.from_json("f", text).events
    failed = [
        e.activity_task_failed_event_attributes.failure
        for e in events
        if e.HasField("activity_task_failed_event_attributes")
    ]
    [failure] = failed
    assert failure.application_failure_info.type == "ToolFailed"
    assert failure.application_failure_info.non_retryable
    [detail] = failure.application_failure_info.details.payloads
    outcome = json.loads(detail.data)
    assert (outcome["kind"], outcome["tool"], outcome["step"]) == ("FAILED", "ship_order", 3)


def test_a_failed_compensation_waits_for_resolutions_by_signal_and_update() -> None:
    events = json.loads((HISTORIES / "compensation_failed_resolved.json").read_text())["events"]
    signals = [
        e["workflowExecutionSignaledEventAttributes"]["signalName"]
        for e in events
        if "workflowExecutionSignaledEventAttributes" in e
    ]
    updates = [
        e["workflowExecutionUpdateAcceptedEventAttributes"]["acceptedRequest"]["input"]["name"]
        for e in events
        if "workflowExecutionUpdateAcceptedEventAttributes" in e
    ]
    assert signals == ["resolve", "resolve"] and updates == ["resolve"]  # the resolutions


# ---- the replay test can fail ----------------------------------------------------------------


class _OpensLate(Saga):
    """A plausible edit: journal SAGA_OPENED after the first tool call instead of before.
    The same activities, run in a different order."""

    _deferred: JournalEventInput | None = None

    async def journal(self, event: JournalEventInput) -> EntryRef:
        if event.phase == Phase.SAGA_OPENED:
            self._deferred = event
            return EntryRef(seq=1, hash="0" * 64, phase=event.phase)
        return await super().journal(event)

    async def _run_tool(self, step: int, call: ToolCall, approved: str | None) -> ToolOutcome:
        outcome = await super()._run_tool(step, call, approved)
        if self._deferred is not None:
            event, self._deferred = self._deferred, None
            await super().journal(event)
        return outcome


class _SkipsDecisions(Saga):
    """Another plausible edit: stop journaling decisions (an activity fewer)."""

    async def journal(self, event: JournalEventInput) -> EntryRef:
        if event.phase in (Phase.APPROVED, Phase.REJECTED):
            return EntryRef(seq=0, hash="0" * 64, phase=event.phase)
        return await super().journal(event)


class _OnMutantSaga(AgentSagaWorkflow):
    """AgentSaga on a mutant saga class (`mutant`)."""

    mutant: type[Saga]

    @workflow.init
    def __init__(self, raw: RawValue) -> None:
        super().__init__(raw)
        self._saga = self.mutant(self._inp, self._inp.carry, install=False)


@workflow.defn(name="AgentSaga")
class OpensAfterFirstStep(_OnMutantSaga):
    """AgentSaga on the saga that journals SAGA_OPENED late."""

    mutant = _OpensLate

    @workflow.run
    async def run(self, raw: RawValue) -> SagaResult:
        return await super().run(raw)


@workflow.defn(name="AgentSaga")
class SkipsTheApprovalJournal(_OnMutantSaga):
    """AgentSaga on the saga that does not journal decisions."""

    mutant = _SkipsDecisions

    @workflow.run
    async def run(self, raw: RawValue) -> SagaResult:
        return await super().run(raw)


@workflow.defn(name="AgentSaga")
class RunsPlanBackwards(AgentSagaWorkflow):
    """Runs the plan's tool calls last to first: wrong, but the same commands (one
    sagacity.run_tool activity per step) in the same sequence."""

    @workflow.init
    def __init__(self, raw: RawValue) -> None:
        super().__init__(raw)
        if self._inp.carry is None:  # a continued run inherits the reversed plan
            plan = list(reversed(self._inp.plan)) if self._inp.plan is not None else None
            self._inp = self._inp.model_copy(update={"plan": plan})

    @workflow.run
    async def run(self, raw: RawValue) -> SagaResult:
        return await super().run(raw)


@pytest.mark.parametrize(
    ("mutant", "name"),
    [
        (OpensAfterFirstStep, "happy_path"),
        (OpensAfterFirstStep, "agent_scripted"),
        (SkipsTheApprovalJournal, "approve_by_signal"),
        (SkipsTheApprovalJournal, "reject_by_signal"),
    ],
)
async def test_replay_catches_a_nondeterministic_edit(mutant: type, name: str) -> None:
    failure = await _replay_failure(_load(name), mutant)
    assert failure is not None, f"{mutant.__name__} replayed {name} without complaint"
    assert isinstance(failure, workflow.NondeterminismError), repr(failure)

    with pytest.raises(workflow.NondeterminismError):
        await _replayer(mutant).replay_workflow(_load(name))


async def test_replay_does_not_see_reordered_activities_of_one_type() -> None:
    """Pins the limit described in the module docstring; if Temporal ever starts
    comparing activity arguments on replay, this fails and the docstring must change."""
    for name in ("happy_path", "approve_by_signal"):
        failure = await _replay_failure(_load(name), RunsPlanBackwards)
        assert failure is None, f"{name}: {failure!r}"


# ---- freshly recorded histories replay too -------------------------------------------------


@pytest.mark.temporal
@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(FLOWS))
async def test_fresh_history_replays(saga: Any, name: str) -> None:
    """Record the flow now on the test server and replay it: catches nondeterminism in the
    current code (a stray clock read, random, set iteration) that the committed histories,
    recorded by the code of their day, would not exercise."""
    handle = await FLOWS[name](saga, f"fresh-{name}-{saga.task_queue}")
    history = await handle.fetch_history()
    assert_replayed(name, await _replay_failure(history, AgentSagaWorkflow))


@pytest.mark.temporal
@pytest.mark.timeout(60)
async def test_the_backwards_mutant_really_runs_backwards(saga: Any) -> None:
    """So the test above is not vacuous: run live, the mutant does reorder the effects."""
    from temporalio.worker import Worker

    from sagacity.activities import SagaActivities, activity_queue
    from sagacity.tools._toolbox import Toolbox

    task_queue = f"{saga.task_queue}-backwards"
    activities = SagaActivities(saga.store, Toolbox.build(saga.shop))
    workers = [
        Worker(
            saga.client,
            task_queue=queue,
            workflows=[RunsPlanBackwards],
            activities=activities.all(),
            workflow_runner=_runner(),
        )
        for queue in (task_queue, activity_queue(task_queue, activities.identity))
    ]
    async with workers[0], workers[1]:
        handle = await FLOWS["happy_path"](
            _OnQueue(saga, task_queue), f"backwards-{saga.task_queue}"
        )
    intents = [e.tool for e in saga.store.entries(handle.id) if e.phase is Phase.INTENT]
    assert intents == ["ship_order", "charge_card", "reserve_inventory"]


class _OnQueue:
    def __init__(self, harness: Any, task_queue: str) -> None:
        self.client, self.store, self.shop = harness.client, harness.store, harness.shop
        self.task_queue = task_queue
