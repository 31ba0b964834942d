"""The client side of a saga: start, inspect, decide, cancel — for the CLI and for users.

Every function takes a connected Temporal client (see `connect`) or a saga's workflow
handle, and turns Temporal's transport errors into typed sagacity errors that say what to
do, so callers never have to read gRPC status codes.

Approvals go through `decide`: it sends the validated `decide` update, which answers at
once with the journaled APPROVED/REJECTED entry or a refusal (ApprovalRefusedError, whose
`journaled` says whether the saga recorded the refusal as APPROVAL_REFUSED evidence; see
workflows/approval_gate.py for how each door into the saga journals a refused decision).

Queries need a worker to answer; `QUERY_TIMEOUT` bounds them and a timeout becomes
NoWorkerError naming the query. (worker.task_queues asks the server which workers poll a
task queue, so a caller can say "no worker" before waiting at all.)
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from sagacity.approval_models import ApprovalDecision
from sagacity.approvals import approval_hash
from sagacity.bounds import cut
from sagacity.decision_statement import signed_decision
from sagacity.errors import SagacityError
from sagacity.phases import SagaStatus
from sagacity.saga_details import start_details, start_summary
from sagacity.signing import SigningKey
from sagacity.worker.app import connect as _connect
from sagacity.worker.settings import Settings
from sagacity.worker.update_delivery import execute_update, workflow_not_ready
from sagacity.workflows.inspection import SAGA_NEEDS_HUMAN, SAGA_STATUS
from sagacity.workflows.models import (
    DecisionResult,
    PendingApproval,
    SagaInput,
    SagaResult,
    SagaView,
    StepReport,
)
from sagacity.workflows.saga_errors import SAGA_FAILURE_TYPES
from sagacity.workflows.start_input import check_start_fields

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
    "decide",
    "describe_saga",
    "list_sagas",
    "pending_approval",
    "pending_approvals",
    "result_of_failure",
    "saga_handle",
    "saga_result",
    "saga_steps",
    "saga_view",
    "send_decision",
    "start_saga",
]

SAGA_WORKFLOW = "AgentSaga"
QUERY_TIMEOUT = timedelta(seconds=10)
"""The RPC deadline of a query. A query is answered by a worker, and the server holds it
until one polls; past this deadline the call fails with NoWorkerError naming the query."""
DECISION_TIMEOUT = timedelta(seconds=30)
"""The decide update returns once the decision is journaled; under a burst of decisions
that can take longer than a query (measured: 1 in 2,000 over 10 s with 50 at once)."""

SagaHandle = WorkflowHandle[Any, SagaResult]


class SagaClientError(SagacityError):
    """Base of the errors a saga client call raises on purpose."""


class TemporalUnavailableError(SagaClientError):
    """The Temporal server cannot be reached (or the namespace does not exist)."""


class SagaNotFoundError(SagaClientError, LookupError):
    """No saga with this id in the namespace."""


class SagaExistsError(SagaClientError):
    """A saga with this id exists (running or closed): saga ids are never reused."""


class SagaAlreadyClosedError(SagaClientError):
    """The saga has finished; it takes no more decisions or cancels."""


class NoWorkerError(SagaClientError):
    """No worker answered a query or update in time."""


class SagaNotOpenError(SagaClientError):
    """The workflow has not opened its saga yet (or is not a saga): it answers no saga
    query."""


class NothingPendingError(SagaClientError):
    """The saga is not waiting for an approval."""


class PendingHashMismatchError(SagaClientError):
    """The hash the workflow reports is not the hash of the payload it shows: refuse to
    approve anything until someone finds out why."""


class UpdateFailedError(SagaClientError):
    """A person's update failed in the workflow for another reason than a refusal (its
    validator, a malformed body, an error in the workflow's handler): `reason` is the
    failure's type, `detail` its message. Temporal's WorkflowUpdateFailedError keeps both
    in its `cause`; this error says them."""

    def __init__(self, what: str, reason: str, detail: str) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{what} failed ({reason}): {detail}")


class RefusedError(SagaClientError):
    """The saga refused what a person sent: `reason` is the stable code (HASH_MISMATCH,
    NOT_ALLOWED...), `detail` the sentence, `journaled` whether the saga recorded the
    refusal as evidence. The message says all three."""

    what = "request"
    unjournaled = "not journaled"

    def __init__(self, reason: str, detail: str, *, journaled: bool) -> None:
        self.reason = reason
        self.detail = detail
        self.journaled = journaled
        evidence = "journaled as evidence" if journaled else self.unjournaled
        super().__init__(f"{self.what} refused ({reason}): {detail} ({evidence})")


class ApprovalRefusedError(RefusedError):
    """The saga refused the decision. `journaled` says whether the refusal was re-sent as a
    signal so the workflow records it in the journal."""

    what = "decision"
    unjournaled = "could not be journaled"


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
    try:
        return await _connect(settings)
    except RuntimeError as exc:  # temporalio raises RuntimeError when it cannot connect
        raise TemporalUnavailableError(
            f"cannot reach Temporal at {settings.temporal_address} ({connect_reason(exc)}); "
            "start one with `sagacity dev` or set SAGACITY_TEMPORAL_ADDRESS"
        ) from exc


def saga_handle(client: Client, saga_id: str) -> SagaHandle:
    return client.get_workflow_handle(saga_id, result_type=SagaResult)


def handle_client(handle: SagaHandle) -> Client:
    """The client a handle was made by (WorkflowHandle has no public accessor for it;
    the messages need its address)."""
    client: Client = handle._client
    return client


_client_of = handle_client


@contextlib.contextmanager
def _rpc(
    client: Client,
    saga_id: str | None = None,
    *,
    call: str = "the request",
    worker_timeout: timedelta | None = None,
) -> Iterator[None]:
    """Translate Temporal's RPC errors into sagacity errors that say what to do. `call`
    names the call in a timeout's message; `worker_timeout` is set for calls a worker
    must answer (queries), whose timeout means no worker answered."""
    try:
        yield
    except RPCError as exc:
        raise _translate(exc, client, saga_id, call=call, worker_timeout=worker_timeout) from exc


def _translate(
    exc: RPCError,
    client: Client,
    saga_id: str | None,
    *,
    call: str = "the request",
    worker_timeout: timedelta | None = None,
) -> SagacityError:
    target = client.service_client.config.target_host
    message = exc.message or str(exc)
    if exc.status is RPCStatusCode.NOT_FOUND:
        if "namespace" in message.lower():
            return TemporalUnavailableError(
                f"namespace {client.namespace!r} does not exist at {target}; set "
                "SAGACITY_NAMESPACE or create it"
            )
        if "already completed" in message.lower():
            return SagaAlreadyClosedError(f"saga {saga_id!r} has already finished")
        return SagaNotFoundError(
            f"no saga {saga_id!r} in namespace {client.namespace!r} at {target}"
        )
    if exc.status in (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED):
        of_saga = f" for saga {saga_id!r}" if saga_id is not None else ""
        if worker_timeout is not None:
            return NoWorkerError(
                f"no worker answered {call}{of_saga} within "
                f"{worker_timeout.total_seconds():g}s; is `sagacity worker` running on the "
                "saga's task queue?"
            )
        return TemporalUnavailableError(
            f"Temporal at {target} did not answer {call}{of_saga} in time "
            f"({exc.status.name}): {message}"
        )
    if workflow_not_ready(exc):
        of_saga = f" of saga {saga_id!r}" if saga_id is not None else ""
        return SagaClientError(
            f"the workflow task{of_saga} kept failing while it took {call}, so Temporal "
            "dropped it and nothing was applied; send it again, and if this repeats read "
            "the worker's log and the saga's history in the Temporal UI"
        )
    if exc.status is RPCStatusCode.UNAVAILABLE:
        return TemporalUnavailableError(f"cannot reach Temporal at {target}: {message}")
    if exc.status is RPCStatusCode.ALREADY_EXISTS:
        return SagaExistsError(f"a saga with id {saga_id!r} already exists; pick another id")
    if exc.status is RPCStatusCode.INVALID_ARGUMENT and "search attribute" in message:
        return SagaClientError(
            f"Temporal at {target} refused the query ({message}); register sagacity's search "
            "attributes SagaStatus (Keyword) and SagaNeedsHuman (Bool) — `sagacity dev` does"
        )
    return SagaClientError(f"Temporal refused the request ({exc.status.name}): {message}")


def connect_reason(exc: BaseException) -> str:
    """The readable part of temporalio's connect error ("Connection refused"), not the
    transport's debug rendering."""
    text = str(exc)
    found = re.search(r'message: "([^"]+)"', text) or re.search(r"\(([^()]*error[^()]*)\)", text)
    if found:
        return found.group(1)
    lines = text.strip().splitlines()
    return cut(lines[0], 200) if lines else type(exc).__name__


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
    any_workflow: bool = True,
) -> list[SagaSummary]:
    """Sagas by visibility query, newest first, optionally filtered by SagaStatus: every
    workflow that opened a saga (AgentSagas and user workflows on the saga API set the
    same search attributes), or AgentSagas only when `any_workflow` is False."""
    query = "SagaStatus IS NOT NULL" if any_workflow else f'WorkflowType="{SAGA_WORKFLOW}"'
    if status is not None:
        query += f' AND SagaStatus="{SagaStatus(status).value}"'
    if needs_human is not None:
        query += f" AND SagaNeedsHuman={'true' if needs_human else 'false'}"
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


async def pending_approvals(
    client: Client, *, limit: int | None = None, any_workflow: bool = True
) -> list[PendingItem]:
    """Every saga listed as AWAITING_APPROVAL with what it waits for. Visibility lags, so a
    saga decided a moment ago is left out (its query answers None); a saga whose query
    fails is kept with the error, so nothing awaiting a human is silently hidden."""
    listed = await list_sagas(
        client, status=SagaStatus.AWAITING_APPROVAL, limit=limit, any_workflow=any_workflow
    )

    async def one(summary: SagaSummary) -> PendingItem:
        try:
            pending = await pending_approval(saga_handle(client, summary.saga_id))
        except SagacityError as exc:
            return PendingItem(summary, None, str(exc))
        return PendingItem(summary, pending)

    items = await asyncio.gather(*(one(s) for s in listed))
    return [item for item in items if item.pending is not None or item.error is not None]


# ---- deciding and cancelling ---------------------------------------------------------------


async def decide(
    handle: SagaHandle,
    *,
    step: int,
    payload_sha256: str,
    approver: str,
    approve: bool,
    reason: str = "",
    tool: str | None = None,
    signer: SigningKey | None = None,
) -> DecisionResult:
    """Approve or reject the pending step and return where the decision was journaled.
    With `signer`, the decision is a statement signed by that key (its owner is the
    approver; `approver` must then name the same person); `tool` is the pending step's.

    Raises ApprovalRefusedError when the saga refuses the decision (wrong hash or step,
    approver not allowed, already decided...). The saga journals every refusal itself,
    whichever door the decision came through; only a saga that is closing refuses without
    journaling (`journaled` is then False).
    """
    if signer is None:
        body: dict[str, Any] = {
            "saga_id": handle.id,
            "step": step,
            "payload_sha256": payload_sha256,
            "approver": approver,
            "approve": approve,
            "reason": reason,
        }
        if tool is not None:
            body["tool"] = tool
    else:
        if approver != signer.approver:
            raise SagaClientError(
                f"the key {signer.key_id} belongs to {signer.approver!r}, not {approver!r}: "
                "a key decides only for its owner"
            )
        if tool is None:
            raise SagaClientError("a signed decision names the tool of the pending step")
        body = signed_decision(
            signer,
            saga_id=handle.id,
            step=step,
            tool=tool,
            payload_sha256=payload_sha256,
            approve=approve,
            reason=reason,
        )
    return await send_decision(handle, body)


async def send_decision(
    handle: SagaHandle, decision: ApprovalDecision | dict[str, Any]
) -> DecisionResult:
    """Send a decision already made (a passkey decision from sagacity.passkeys, or a
    body signed elsewhere) through the `decide` update, unchanged. Raises
    ApprovalRefusedError (its `reason` the journaled RefusalReason) like `decide`."""
    body = decision.model_dump(mode="json") if isinstance(decision, ApprovalDecision) else decision
    return await send_update(
        handle,
        "decide",
        body,
        DecisionResult,
        refusal_type="ApprovalRefused",
        refused=ApprovalRefusedError,
        what="decision",
        recheck="check with `sagacity status` before deciding again",
    )


R = TypeVar("R")


async def send_update(
    handle: SagaHandle,
    name: str,
    body: dict[str, Any],
    result_type: type[R],
    *,
    refusal_type: str,
    refused: type[RefusedError],
    what: str,
    recheck: str,
) -> R:
    """Send a person's update (a decision, a resolution) and return the saga's answer. A
    refusal the saga raised (its ApplicationError of `refusal_type`, details: reason code,
    whether journaled) becomes `refused(reason, message, journaled=...)`; no worker in
    time becomes NoWorkerError saying the update may still be applied."""
    client = _client_of(handle)
    with _rpc(client, handle.id, call=f"the {name} update", worker_timeout=DECISION_TIMEOUT):
        try:
            return await execute_update(
                handle, name, body, result_type, rpc_timeout=DECISION_TIMEOUT
            )
        except WorkflowUpdateRPCTimeoutOrCancelledError as exc:
            raise NoWorkerError(
                f"no worker answered the {what} for saga {handle.id!r} within "
                f"{DECISION_TIMEOUT.seconds}s; it may still be applied when a worker polls — "
                f"{recheck}"
            ) from exc
        except WorkflowUpdateFailedError as exc:
            cause = exc.cause
            if not (isinstance(cause, ApplicationError) and cause.type == refusal_type):
                kind = getattr(cause, "type", None) or type(cause or exc).__name__
                detail = getattr(cause, "message", None) or str(cause or exc)
                raise UpdateFailedError(what, kind, detail) from exc
            code = str(cause.details[0]) if cause.details else "REFUSED"
            journaled = len(cause.details) > 1 and cause.details[1] == "journaled"
            raise refused(code, cause.message, journaled=journaled) from exc


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
