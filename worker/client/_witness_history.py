"""What one Temporal run's history says about a saga's journal — and whether it may say
anything at all (`sagacity verify --witness temporal`, sagacity.worker.client._witness).

Only a run that is a sagacity saga may vouch for a journal or accuse it: an AgentSaga, or
a workflow in whose history sagacity's own activities ran (every saga run runs some: the
first pins its worker and journals SAGA_OPENED through the local activities
`sagacity.worker_identity` and `sagacity.journal_event`, a run continued as new checks
its hand-over through `sagacity.check_resume`). Any client may start a workflow of
another type under a saga's id (a raw client's default reuses a closed id) and have it
return or fail with whatever it likes, hashes included: such a run is counted by its
type and never read, so it can neither lend an inserted saga a history nor accuse an
honest one.

In a saga run the entries' seq and hash are read only where sagacity writes them:

- the results of sagacity's activities (`SAGA_ACTIVITY_TYPES`): a local activity's
  marker, by the activity type the marker names; a completed activity, by the type it
  was scheduled with. Every journal write returns its EntryRef there (the result itself,
  or its intent, outcome, entry or resolved field), and the close's (phase SAGA_CLOSED)
  says where the saga ended;
- a failed `sagacity.run_tool` whose failure is ToolFailed: the step's outcome, in its
  details;
- the saga's own result: an AgentSaga's completion, and a workflow failed with the
  saga's failure type `Saga<Status>` (its SagaResult in the details: its head, which is
  where the journal closed, and the refs of its step, compensation and resolution
  reports). A user's workflow result is the user's and is not read.

Nothing inside those is searched further: a tool's result, a model's answer or a
person's words may hold anything, an EntryRef-shaped object included.

What it still trusts: the namespace's workers, and whoever may complete its activities.
A run's workflow type, its activities' types and results are what the worker that ran
it wrote; whoever can run a worker on the namespace can register a workflow named
AgentSaga and activities named sagacity.*, and write any history under any id. A client
allowed to complete an activity by its id can also put a result into a saga's history
while that activity runs (a local activity's marker it cannot: the workflow's worker
writes it). Temporal's authorization decides who may do either; the witness cannot.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHistory

from sagacity.activities import RUN_TOOL, SAGA_ACTIVITY_TYPES
from sagacity.activities._models import TOOL_FAILED
from sagacity.journal._phases import Phase
from sagacity.worker.client._client import SAGA_WORKFLOW
from sagacity.workflows._saga_errors import SAGA_FAILURE_TYPES

_HASH = re.compile(r"^[0-9a-f]{64}$")
_LOCAL_ACTIVITY_MARKER = "core_local_activity"
_PHASES = frozenset(phase.value for phase in Phase)
_REF_FIELDS = ("intent", "outcome", "entry", "resolved")
"""Where sagacity's activity results hold EntryRefs (ToolOutcome's intent and outcome,
CompensationOutcome's entry, ResolveStepOutcome's resolved and outcome); the journal
event activity returns one itself."""


@dataclass
class RunRecord:
    """What one run's history holds: its type, whether it is a saga's run, and (only
    then) the seq -> hash of every entry it names and where it says the saga closed."""

    workflow_type: str
    saga: bool = False
    refs: list[tuple[int, str]] = field(default_factory=list)
    closes: list[int] = field(default_factory=list)
    first_run: str = ""
    """The first run of its chain (continue-as-new, retries): one start of the id."""
    previous: str | None = None
    """The run it continued from, if any."""


def read_run(history: WorkflowHistory) -> RunRecord:
    """Read one run's history: see the module docstring for what counts and where."""
    record = RunRecord("")
    scheduled: dict[int, str] = {}
    candidates: list[tuple[Any, bool]] = []
    """Decoded payloads that name entries, and whether they are a saga's result (else
    an activity's result or a tool's outcome)."""
    for event in history.events:
        kind = event.WhichOneof("attributes")
        if kind == "workflow_execution_started_event_attributes":
            started = event.workflow_execution_started_event_attributes
            record.workflow_type = started.workflow_type.name
            record.previous = started.continued_execution_run_id or None
            record.first_run = started.first_execution_run_id or started.original_execution_run_id
            record.saga |= record.workflow_type == SAGA_WORKFLOW
        elif kind == "activity_task_scheduled_event_attributes":
            name = event.activity_task_scheduled_event_attributes.activity_type.name
            scheduled[event.event_id] = name
            record.saga |= name in SAGA_ACTIVITY_TYPES
        elif kind == "marker_recorded_event_attributes":
            result = _local_activity_result(event)
            if result is not None:
                record.saga = True
                candidates += [(value, False) for value in _decoded(result)]
        elif kind == "activity_task_completed_event_attributes":
            done = event.activity_task_completed_event_attributes
            if scheduled.get(done.scheduled_event_id) in SAGA_ACTIVITY_TYPES:
                candidates += [(value, False) for value in _decoded(done.result.payloads)]
        elif kind == "activity_task_failed_event_attributes":
            failed = event.activity_task_failed_event_attributes
            if scheduled.get(failed.scheduled_event_id) == RUN_TOOL:
                details = _failure_details(failed.failure, {TOOL_FAILED})
                candidates += [(value, False) for value in _decoded(details)]
        elif kind == "workflow_execution_completed_event_attributes":
            if record.workflow_type == SAGA_WORKFLOW:
                payloads = event.workflow_execution_completed_event_attributes.result.payloads
                candidates += [(value, True) for value in _decoded(payloads)]
        elif kind == "workflow_execution_failed_event_attributes":
            failure = event.workflow_execution_failed_event_attributes.failure
            details = _failure_details(failure, SAGA_FAILURE_TYPES)
            candidates += [(value, True) for value in _decoded(details)]
    if record.saga:
        for value, is_result in candidates:
            _take(record, value, is_result)
    return record


def _local_activity_result(event: HistoryEvent) -> list[Payload] | None:
    """The result payloads of a sagacity local activity's marker (an empty list for one
    that failed), or None for any other marker."""
    marker = event.marker_recorded_event_attributes
    if marker.marker_name != _LOCAL_ACTIVITY_MARKER or "data" not in marker.details:
        return None
    data = next(_decoded(marker.details["data"].payloads), None)
    if not isinstance(data, dict) or data.get("activity_type") not in SAGA_ACTIVITY_TYPES:
        return None
    if "result" not in marker.details:
        return []
    return list(marker.details["result"].payloads)


def _failure_details(failure: Failure, types: frozenset[str] | set[str]) -> list[Payload]:
    """The details of an application failure of one of `types`; none for any other."""
    info = failure.application_failure_info
    if not failure.HasField("application_failure_info") or info.type not in types:
        return []
    return list(info.details.payloads)


def _decoded(payloads: Any) -> Iterator[Any]:
    for payload in payloads:
        if payload.metadata.get("encoding") != b"json/plain":
            continue
        try:
            yield json.loads(payload.data)
        except (ValueError, RecursionError):
            continue


def _take(record: RunRecord, value: Any, is_result: bool) -> None:
    """The entries a decoded payload names, at the places sagacity puts them (never in a
    tool's result or anything else a tool, a model or a user wrote inside it)."""
    if not isinstance(value, dict):
        return
    if is_result:
        _saga_result(record, value)
        return
    for ref in (value, *(value.get(name) for name in _REF_FIELDS)):
        if isinstance(ref, dict) and ref.get("phase") in _PHASES:
            _pair(record, ref, "seq", "hash")
            if ref["phase"] == Phase.SAGA_CLOSED.value and _is_seq(ref.get("seq")):
                record.closes.append(ref["seq"])


def _saga_result(record: RunRecord, result: dict[str, Any]) -> None:
    """A SagaResult's head (where the journal closed) and the refs of its reports."""
    _pair(record, result, "head_seq", "head_hash")
    if _is_seq(result.get("head_seq")):
        record.closes.append(result["head_seq"])
    for step in _items(result.get("steps")):
        _pair(record, step, "intent_seq", "intent_hash")
        _pair(record, step, "seq", "hash")
    for report in (*_items(result.get("compensations")), *_items(result.get("resolutions"))):
        _pair(record, report, "seq", "hash")


def _pair(record: RunRecord, item: dict[str, Any], seq_key: str, hash_key: str) -> None:
    seq, digest = item.get(seq_key), item.get(hash_key)
    if _is_seq(seq) and _is_hash(digest):
        record.refs.append((seq, digest))


def _items(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _is_hash(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and bool(_HASH.match(value))


def _is_seq(value: object) -> TypeGuard[int]:
    """A position in a chain: a positive int, never a bool."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
