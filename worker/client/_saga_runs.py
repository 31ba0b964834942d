"""Which run of a saga's workflow id is the saga, and who asked it to stop.

A saga id is never reused, yet Temporal lets anyone start another run under it (its own
client, its UI, `temporal workflow start`): the saga refuses such a run (SagaIdReused)
and it fails at once, becoming the workflow id's latest run. `saga_run` finds the run
that holds the saga behind it, so `sagacity status` never shows the refused run in the
saga's place. `cancel_request` reads the cancel request (reason, client identity) from a
run's history, read without a worker. `owning_chain` names the run chain that opened the
saga (a run of another chain under its id can act for nothing: worker.saga_reset).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from sagacity.journal._entry import JournalEntry
from sagacity.journal._phases import Phase
from sagacity.worker.client._client import SagaHandle, _client_of, _rpc, describe_saga, saga_handle
from sagacity.workflows._models import SagaResult

__all__ = [
    "SAGA_ID_REUSED",
    "CancelRequest",
    "cancel_request",
    "opening",
    "owning_chain",
    "saga_run",
]


@dataclass(frozen=True)
class CancelRequest:
    """A cancel request as Temporal's history records it."""

    reason: str
    identity: str


async def cancel_request(handle: SagaHandle) -> CancelRequest | None:
    """The cancel request in the run's history (its reason and the client that sent it),
    or None if nobody asked the saga to stop."""
    with _rpc(_client_of(handle), handle.id, call="the history"):
        async for event in handle.fetch_history_events():
            if event.HasField("workflow_execution_cancel_requested_event_attributes"):
                attrs = event.workflow_execution_cancel_requested_event_attributes
                return CancelRequest(reason=attrs.cause, identity=attrs.identity)
    return None


SAGA_ID_REUSED = "SagaIdReused"
"""The failure of a run started under a saga id whose journal another run holds."""


async def saga_run(client: Client, saga_id: str) -> tuple[SagaHandle, list[str]]:
    """The run that holds the saga, and the run ids of later runs skipped to find it.

    Saga ids are never reused, yet a run can still be started under one outside
    sagacity (Temporal's own client, its UI, `temporal workflow start`): the saga refuses
    it (SagaIdReused) and that run fails at once. Temporal calls it the workflow's latest
    run; the saga is the run before, which is the one returned."""
    latest = saga_handle(client, saga_id)
    summary = await describe_saga(latest)
    if summary.execution_status != WorkflowExecutionStatus.FAILED.name:
        return latest, []
    if not await _refused_reuse(latest):
        return latest, []
    runs: list[Any] = []
    query = f"WorkflowId = {_quoted(saga_id)}"
    with _rpc(client, saga_id, call="the list of the saga's runs"):
        async for run in client.list_workflows(query):
            runs.append(run)
    runs.sort(key=lambda r: r.start_time, reverse=True)
    skipped: list[str] = []
    for run in runs:
        handle: SagaHandle = client.get_workflow_handle(
            saga_id, run_id=run.run_id, result_type=SagaResult
        )
        if run.status is WorkflowExecutionStatus.FAILED and await _refused_reuse(handle):
            skipped.append(run.run_id)
            continue
        return handle, skipped
    return latest, []


async def _refused_reuse(handle: SagaHandle) -> bool:
    """Whether this (failed) run was refused for reusing its saga's id."""
    try:
        with _rpc(_client_of(handle), handle.id, call="the result"):
            await handle.result(follow_runs=False)
    except WorkflowFailureError as exc:
        cause = exc.cause
        return isinstance(cause, ApplicationError) and cause.type == SAGA_ID_REUSED
    except Exception:  # not readable as a failure: not the case looked for
        return False
    return False


def _quoted(text: str) -> str:
    """A visibility query string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def opening(entries: list[JournalEntry]) -> dict[str, Any]:
    """What SAGA_OPENED recorded: the run that opened the saga (and the chain's first run
    id, where recorded)."""
    first = entries[0] if entries else None
    if first is not None and first.phase is Phase.SAGA_OPENED and isinstance(first.input, dict):
        return first.input
    return {}


async def owning_chain(client: Client, saga_id: str, opened: dict[str, Any]) -> str | None:
    """The first run id of the run chain that opened the saga, as its SAGA_OPENED records
    it (`chain`): the chain whose runs the saga's activities serve (None: not recorded)."""
    recorded = opened.get("chain")
    return recorded if isinstance(recorded, str) and recorded else None
