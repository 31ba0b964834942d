"""The client side of a saga: start, inspect, decide, cancel — for the CLI and for users.

Every function takes a connected Temporal client (see `connect`) or a saga's workflow
handle, and turns Temporal's transport errors into typed sagacity errors that say what to
do, so callers never have to read gRPC status codes.

A person's signed actions (decisions, resolutions) go through worker.client_actions;
the errors are in worker.client_errors, re-exported here.

Queries need a worker to answer; `QUERY_TIMEOUT` bounds them and a timeout becomes
NoWorkerError naming the query. (worker.task_queues asks the server which workers poll a
task queue, so a caller can say "no worker" before waiting at all.)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
)
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError

from sagacity.approval._judge import approval_hash
from sagacity.journal._phases import SagaStatus
from sagacity.text._saga_details import start_details, start_summary
from sagacity.worker._app import connect as _connect
from sagacity.worker._settings import Settings
from sagacity.worker.client._discovery import EVERY_SAGA, SagaSearch
from sagacity.worker.client._errors import (
    ApprovalRefusedError,
    NothingPendingError,
    NoWorkerError,
    PendingHashMismatchError,
    RefusedError,
    SagaAlreadyClosedError,
    SagaClientError,
    SagaExistsError,
    SagaNotFoundError,
    SagaNotOpenError,
    TemporalUnavailableError,
    UpdateFailedError,
    connect_reason,
    rpc,
)
from sagacity.workflows._inspection import SAGA_NEEDS_HUMAN, SAGA_STATUS
from sagacity.workflows._models import PendingApproval, SagaInput, SagaResult, SagaView, StepReport
from sagacity.workflows._saga_errors import SAGA_FAILURE_TYPES
from sagacity.workflows._start_input import check_start_fields

__all__ = [
    "SAGA_FAILURE_TYPES",
    "SAGA_WORKFLOW",
    "ApprovalRefusedError",
    "NoWorkerError",
    "NothingPendingError",
    "PendingHashMismatchError",
    "PendingItem",
    "RefusedError",
    "SagaAlreadyClosedError",
    "SagaClientError",
    "SagaExistsError",
    "SagaHandle",
    "SagaNotFoundError",
    "SagaNotOpenError",
    "SagaSummary",
    "TemporalUnavailableError",
    "UpdateFailedError",
    "cancel_reason",
    "cancel_saga",
    "check_pending",
    "connect",
    "connect_reason",
    "describe_saga",
    "list_sagas",
    "pending_approval",
    "result_of_failure",
    "saga_handle",
    "saga_result",
    "saga_steps",
    "saga_view",
    "start_saga",
]

SAGA_WORKFLOW = "AgentSaga"
QUERY_TIMEOUT = timedelta(seconds=10)
"""The RPC deadline of a query. A query is answered by a worker, and the server holds it
until one polls; past this deadline the call fails with NoWorkerError naming the query."""

SagaHandle = WorkflowHandle[Any, SagaResult]


@dataclass(frozen=True)
class SagaSummary:
    """One saga as Temporal visibility lists it (no worker needed)."""

    saga_id: str
    run_id: str | None
    status: str | None
    """The SagaStatus search attribute, None before the saga's first workflow task."""
    execution_status: str
    needs_human: bool | None
    started: datetime | None
    closed: datetime | None
    task_queue: str

    @property
    def running(self) -> bool:
        return self.execution_status == WorkflowExecutionStatus.RUNNING.name


async def connect(settings: Settings) -> Client:
    """A client for `settings`, or TemporalUnavailableError saying where it looked."""
    address = settings.temporal_address  # a bad configuration fails here, as itself
    try:
        return await _connect(settings)
    except RuntimeError as exc:  # temporalio raises RuntimeError when it cannot connect
        raise TemporalUnavailableError(unreachable(address, exc)) from exc


def unreachable(address: str, exc: BaseException) -> str:
    """Why Temporal at `address` could not be reached, and how to point at another."""
    return (
        f"cannot reach Temporal at {address} ({connect_reason(exc)}); start one with "
        "`sagacity dev`, or set TEMPORAL_ADDRESS (Temporal's environment configuration)"
    )


def saga_handle(client: Client, saga_id: str) -> SagaHandle:
    return client.get_workflow_handle(saga_id, result_type=SagaResult)


def handle_client(handle: SagaHandle) -> Client:
    """The client a handle was made by (WorkflowHandle has no public accessor for it;
    the messages need its address)."""
    client: Client = handle._client
    return client


_client_of = handle_client
_rpc = rpc


# ---- starting and reading --------------------------------------------------------------------


async def start_saga(
    client: Client, inp: SagaInput, *, saga_id: str, task_queue: str
) -> SagaHandle:
    """Start a saga; its id is the workflow id. An id is never reused, not even after its
    saga closed: it names the saga's journal chain, and a closed chain takes no entries."""
    check_start_fields(inp.model_dump(mode="json"))
    plan = None if inp.plan is None else [(call.tool, call.args) for call in inp.plan]
    handle: SagaHandle = await start_once(
        client,
        SAGA_WORKFLOW,
        [inp],
        saga_id=saga_id,
        task_queue=task_queue,
        result_type=SagaResult,
        summary=start_summary(None if plan is None else [t for t, _ in plan], inp.goal),
        details=start_details(plan, inp.goal),
    )
    return handle


async def start_once(
    client: Client,
    workflow: Any,
    args: list[Any],
    *,
    saga_id: str,
    task_queue: str,
    result_type: type | None = None,
    summary: str | None = None,
    details: str | None = None,
) -> WorkflowHandle[Any, Any]:
    """Start `workflow` (AgentSaga or a user's on the saga API) under `saga_id`, which is
    never reused (SagaExistsError). `summary` and `details` are what the Temporal UI shows
    for it from its start (markdown details)."""
    with _rpc(client, saga_id, call="the start of the saga"):
        try:
            return await client.start_workflow(
                workflow,
                args=args,
                id=saga_id,
                task_queue=task_queue,
                result_type=result_type,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                static_summary=summary,
                static_details=details,
            )
        except WorkflowAlreadyStartedError as exc:
            raise SagaExistsError(
                f"a saga with id {saga_id!r} already exists; pick another id"
            ) from exc


def summary_of(saga_id: str, desc: Any) -> SagaSummary:
    """A visibility listing or a description of a run as a SagaSummary."""
    attrs = desc.typed_search_attributes
    status = desc.status
    return SagaSummary(
        saga_id=saga_id,
        run_id=desc.run_id,
        status=attrs.get(SAGA_STATUS),
        execution_status=status.name if status is not None else "UNKNOWN",
        needs_human=attrs.get(SAGA_NEEDS_HUMAN),
        started=desc.start_time,
        closed=desc.close_time,
        task_queue=desc.task_queue,
    )


async def describe_saga(handle: SagaHandle) -> SagaSummary:
    """What Temporal knows of the saga without asking a worker."""
    with _rpc(_client_of(handle), handle.id, call="describe"):
        desc = await handle.describe()
    return summary_of(handle.id, desc)


async def _query(handle: SagaHandle, name: str, result_type: Any) -> Any:
    with _rpc(
        _client_of(handle), handle.id, call=f"the {name!r} query", worker_timeout=QUERY_TIMEOUT
    ):
        try:
            return await handle.query(name, result_type=result_type, rpc_timeout=QUERY_TIMEOUT)
        except WorkflowQueryFailedError as exc:
            if "not found" in str(exc).lower():
                raise SagaNotOpenError(
                    f"workflow {handle.id!r} answers no {name!r} query: its saga has not "
                    "opened yet (a workflow on the saga API registers the queries when it "
                    "opens its saga), or it is not a saga"
                ) from exc
            raise SagaClientError(f"the {name!r} query failed: {exc}") from exc


async def saga_view(handle: SagaHandle) -> SagaView:
    """The `status` query (needs a worker)."""
    view: SagaView = await _query(handle, "status", SagaView)
    return view


async def saga_steps(handle: SagaHandle) -> list[StepReport]:
    """The `steps` query (needs a worker)."""
    steps: list[StepReport] = await _query(handle, "steps", list[StepReport])
    return steps


async def pending_approval(handle: SagaHandle) -> PendingApproval | None:
    """The approval the saga waits for, or None (needs a worker)."""
    pending: PendingApproval | None = await _query(
        handle, "pending_approval", PendingApproval | None
    )
    return pending


def result_of_failure(exc: WorkflowFailureError) -> SagaResult | None:
    """The SagaResult a failed saga workflow carries, or None when the workflow failed for
    another reason (cancelled, terminated, timed out, a refused input)."""
    cause = exc.cause
    if not isinstance(cause, ApplicationError) or cause.type not in SAGA_FAILURE_TYPES:
        return None
    if not cause.details or not isinstance(cause.details[0], dict):
        return None
    return SagaResult.model_validate(cause.details[0])


async def saga_result(handle: SagaHandle) -> SagaResult:
    """Wait for the saga's result (read from history: a closed saga needs no worker),
    whatever its status. A saga that did not complete fails its workflow, so the Temporal
    UI shows it as failed; its result travels in the failure and is returned here.
    Raises temporalio's WorkflowFailureError for a cancelled or terminated saga."""
    with _rpc(_client_of(handle), handle.id, call="the wait for the result"):
        try:
            return await handle.result()
        except WorkflowFailureError as exc:
            result = result_of_failure(exc)
            if result is None:
                raise
            return result


def check_pending(pending: PendingApproval) -> str:
    """Recompute the pending payload's hash here, from the payload shown, and return it;
    raise PendingHashMismatchError when the workflow reports another hash (an approver must
    never sign a hash they cannot reproduce from what they saw)."""
    local = approval_hash(pending.tool, pending.payload)
    if local != pending.payload_sha256:
        raise PendingHashMismatchError(
            f"saga {pending.saga_id!r} reports hash {pending.payload_sha256[:16]}… for step "
            f"{pending.step} but its payload hashes to {local[:16]}… here; not deciding — "
            "check that worker and client run the same sagacity version"
        )
    return local


async def list_sagas(
    client: Client,
    *,
    status: SagaStatus | str | None = None,
    needs_human: bool | None = None,
    limit: int | None = None,
    search: SagaSearch = EVERY_SAGA,
) -> list[SagaSummary]:
    """Sagas by visibility query, newest first, optionally filtered by SagaStatus: every
    workflow that opened a saga, whatever its type and task queue (they all set the same
    search attributes), narrowed by `search`'s filters (worker.client._discovery)."""
    clauses = []
    if status is not None:
        clauses.append(f'SagaStatus="{SagaStatus(status).value}"')
    if needs_human is not None:
        clauses.append(f"SagaNeedsHuman={'true' if needs_human else 'false'}")
    query = search.query(" AND ".join(clauses) or None)
    found: list[SagaSummary] = []
    with _rpc(client, call="the visibility list"):
        async for wf in client.list_workflows(query, limit=limit):
            found.append(summary_of(wf.id, wf))
    return found


@dataclass(frozen=True)
class PendingItem:
    summary: SagaSummary
    pending: PendingApproval | None
    error: str | None = None


# ---- cancelling ---------------------------------------------------------------------------


def cancel_reason(actor: str | None, reason: str = "") -> str:
    """The reason a cancel request carries: who asked and why ("by alice: customer called
    back"). The saga keeps it in its failure, so its close entry and result say it."""
    who = f"by {actor.strip()}" if actor and actor.strip() else ""
    why = " ".join(reason.split())
    return f"{who}: {why}" if who and why else who or why


async def cancel_saga(handle: SagaHandle, *, reason: str = "") -> SagaSummary:
    """Ask a running saga to stop; it compensates its executed steps and closes. `reason`
    (see cancel_reason) is recorded with the request in Temporal's history and, by the
    saga, in its journal. Temporal accepts a cancel of a finished workflow silently, so
    that case is refused here."""
    summary = await describe_saga(handle)
    if not summary.running:
        raise SagaAlreadyClosedError(
            f"saga {handle.id!r} has already finished "
            f"({summary.status or summary.execution_status}); nothing to cancel"
        )
    with _rpc(_client_of(handle), handle.id, call="the cancel request"):
        await handle.cancel(reason=reason)
    return summary
