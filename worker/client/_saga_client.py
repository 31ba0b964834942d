"""SagaClient: start, inspect, approve, reject, cancel and clean up sagas in one typed
call each.

    async def main() -> None:
        client = await SagaClient.connect(task_queue="orders")
        await client.approve("order-42", approver="alice@example.com")

    asyncio.run(main())

It works for AgentSaga and for a user's own workflow on the saga API alike: both answer
the same queries and take decisions through the same `decide` update. `approve` is the
whole "show, check, decide" flow an approver needs: it reads the pending request from
the workflow, recomputes the payload's SHA-256 here from the payload shown (and refuses
to go on if the workflow reports another), optionally asks `confirm` (the CLI shows the
payload and prompts there), and sends the decision through the synchronous update, which
answers with the journaled APPROVED or REJECTED entry. Errors are the typed errors of
worker.client (SagaNotFoundError, NothingPendingError, ApprovalRefusedError...): a
refusal carries its code (`reason`) and sentence (`detail`), and an update that fails
otherwise raises UpdateFailedError, never Temporal's WorkflowUpdateFailedError with the
reason left in its cause.

A saga that needs a human (an unknown outcome, a failed compensation) is listed by
`needing_human` and `dirty`, and cleaned up by `resolve`, `retry_compensation` and
`accept` (worker.client_resolutions; refusals raise ResolutionRefusedError), signed with
the client's signer when it has one. A saga whose workflow ended without closing its
journal (terminated, timed out) is listed by `needing_human` too, and compensated by
`compensate` (worker.saga_reset).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, TypeVar, Unpack, overload

from pydantic import BaseModel, ValidationError
from temporalio.client import Client, Plugin, WorkflowHandle
from temporalio.contrib.pydantic import PydanticPayloadConverter

from sagacity.approval._models import ApprovalDecision
from sagacity.approval._resolutions import Resolution
from sagacity.approval._signed_action import SignedAction
from sagacity.approval._signing import SigningKey
from sagacity.approval._statements import signed_request
from sagacity.audit._export import verify_store
from sagacity.journal._chain import VerifyReport
from sagacity.journal._entry import JournalEntry
from sagacity.stores import JournalStore
from sagacity.worker._plugin import saga_converter
from sagacity.worker._temporal_env import TemporalTarget
from sagacity.worker.client import _actions as acts
from sagacity.worker.client import _client as api
from sagacity.worker.client._discovery import SagaSearch
from sagacity.worker.client._pending_list import PendingPage, pending_page
from sagacity.worker.client._saga_client_dirty import DirtyStateCalls
from sagacity.worker.client._saga_runs import saga_run
from sagacity.workflows._models import (
    DecisionResult,
    PendingApproval,
    RequesterClaim,
    ResolutionResult,
    SagaInput,
    SagaResult,
    SagaView,
    StepReport,
)

R = TypeVar("R")
Confirm = Callable[[PendingApproval, str], bool | Awaitable[bool]]
"""Asked with the pending request and the hash recomputed here; False sends nothing."""


class DecisionOptions(TypedDict, total=False):
    """What `approve` and `reject` take besides the reason, as `decide` does."""

    approver: str | None
    payload_sha256: str | None
    confirm: Confirm | None


class DeclinedError(api.SagaClientError):
    """`confirm` answered no: nothing was sent."""


@dataclass(frozen=True)
class Review:
    """What an approver must see before deciding: the request and its hash, recomputed."""

    pending: PendingApproval
    local_sha256: str


class SagaClient(DirtyStateCalls):
    """A Temporal client for sagas (the pydantic data converter set), plus the task queue
    new sagas start on."""

    def __init__(
        self,
        client: Client,
        *,
        task_queue: str = "sagacity",
        store: JournalStore | None = None,
        signer: SigningKey | None = None,
    ) -> None:
        if not issubclass(client.data_converter.payload_converter_class, PydanticPayloadConverter):
            raise api.SagaClientError(
                "this Temporal client does not use the pydantic data converter; connect "
                "with SagaClient.connect, or pass data_converter=pydantic_data_converter"
            )
        self.temporal = client
        self.task_queue = task_queue
        self.store = store
        """The journal, for `journal` and `verify` (None: those raise)."""
        self.signer = signer
        """The person's key (sagacity keys new): decisions are signed with it and sagas
        started through this client name its owner as their signed requester."""

    @classmethod
    async def connect(
        cls,
        target_host: str | None = None,
        *,
        namespace: str | None = None,
        profile: str | None = None,
        task_queue: str = "sagacity",
        plugins: Sequence[Plugin] = (),
        store: JournalStore | None = None,
        signer: SigningKey | None = None,
        **connect_options: Any,
    ) -> SagaClient:
        """Connect as Temporal's own tools do, as the CLI and the worker do: the profile
        of Temporal's environment configuration (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
        TEMPORAL_API_KEY, TLS settings, the config file's profiles;
        worker._temporal_env), overridden by what is given here."""
        config = TemporalTarget(target_host, namespace, profile).connect_config()
        config.update(connect_options)
        config["data_converter"] = saga_converter(config.get("data_converter"))
        target = config.pop("target_host")
        try:
            temporal = await Client.connect(target, plugins=list(plugins), **config)
        except RuntimeError as exc:
            raise api.TemporalUnavailableError(api.unreachable(target, exc)) from exc
        return cls(temporal, task_queue=task_queue, store=store, signer=signer)

    # ---- starting -----------------------------------------------------------------------------

    async def start(self, inp: SagaInput, *, saga_id: str) -> api.SagaHandle:
        """Start an AgentSaga (its id is the workflow id, never reused). With a signer,
        its owner is the saga's signed requester (unless `inp` names one already)."""
        if self.signer is not None and inp.requester is None:
            inp = inp.model_copy(update={"requester": self.requester_claim(saga_id)})
        return await api.start_saga(self.temporal, inp, saga_id=saga_id, task_queue=self.task_queue)

    def requester_claim(self, saga_id: str) -> RequesterClaim:
        """The signed requester claim for starting `saga_id` (for a workflow of your own:
        put it in the SagaOptions your workflow opens its saga with)."""
        if self.signer is None:
            raise api.SagaClientError("this SagaClient has no signer (SagaClient(signer=...))")
        return RequesterClaim.model_validate(signed_request(self.signer, saga_id))

    async def start_workflow(
        self,
        workflow: Callable[..., Awaitable[R]],
        *args: Any,
        saga_id: str,
        task_queue: str | None = None,
    ) -> WorkflowHandle[Any, R]:
        """Start a user's workflow that opens a saga: its `@workflow.run` method, typed.
        Saga ids are never reused, as for AgentSaga."""
        handle: WorkflowHandle[Any, R] = await api.start_once(
            self.temporal, workflow, list(args), saga_id=saga_id,
            task_queue=task_queue or self.task_queue,
        )  # fmt: skip
        return handle

    def handle(self, saga_id: str) -> api.SagaHandle:
        return api.saga_handle(self.temporal, saga_id)

    # ---- reading ------------------------------------------------------------------------------

    async def status(self, saga_id: str) -> SagaView:
        return await api.saga_view(self.handle(saga_id))

    async def steps(self, saga_id: str) -> list[StepReport]:
        return await api.saga_steps(self.handle(saga_id))

    async def result(self, saga_id: str) -> SagaResult:
        """An AgentSaga's result whatever its status (one that did not complete carries it in
        its workflow's failure); a user's workflow returns its own: use its handle."""
        try:
            return await api.saga_result(self.handle(saga_id))
        except ValidationError as exc:
            raise api.SagaClientError(
                f"workflow {saga_id!r} did not return a SagaResult (is it a workflow of "
                "your own on the saga API? read its result from its handle)"
            ) from exc

    async def describe(self, saga_id: str) -> api.SagaSummary:
        """What Temporal knows of the saga (no worker needed): of the run that holds it,
        past a later run started under its id and refused (saga_runs.saga_run)."""
        handle, _ = await saga_run(self.temporal, saga_id)
        return await api.describe_saga(handle)

    def journal(self, saga_id: str) -> list[JournalEntry]:
        """The saga's journal entries, in order (read from the store, not from Temporal)."""
        return list(self._store().entries(saga_id))

    def verify(self, saga_id: str) -> VerifyReport:
        """Recompute the saga's hash chain from the store and say whether it holds."""
        return verify_store(self._store(), saga_id)

    def _store(self) -> JournalStore:
        if self.store is None:
            raise api.SagaClientError(
                "this SagaClient has no journal store; pass store=open_store(URL)"
            )
        return self.store

    async def pending(
        self,
        *,
        task_queue: str | None = None,
        workflow_type: str | None = None,
        limit: int = 200,
    ) -> PendingPage:
        """Every saga awaiting approval, in any workflow type on any task queue of the
        namespace unless `task_queue` or `workflow_type` narrows it, with what it waits
        for; `.searched` says what was asked (worker.client._pending_list)."""
        search = SagaSearch(task_queue=task_queue, workflow_type=workflow_type)
        return await pending_page(self.temporal, search, limit=limit)

    async def review(self, saga_id: str, *, verb: str = "decide on") -> Review:
        """The pending request of a running saga, its hash recomputed and checked here
        (`verb` says what the caller wanted to do, in the error when nothing is pending)."""
        handle = self.handle(saga_id)
        summary = await api.describe_saga(handle)
        if not summary.running:
            raise api.NothingPendingError(
                f"saga {saga_id!r} has finished ({summary.status or summary.execution_status}); "
                f"nothing to {verb}"
            )
        pending = await api.pending_approval(handle)
        if pending is None:
            raise api.NothingPendingError(
                f"saga {saga_id!r} has nothing pending approval now (status "
                f"{summary.status or summary.execution_status}; it may just have been "
                "decided or cancelled); see `sagacity pending`"
            )
        return Review(pending, api.check_pending(pending))

    async def wait_pending(self, saga_id: str, *, timeout: float = 60.0) -> Review:
        """Wait until the saga asks for an approval (polling its `pending_approval` query;
        Temporal has no push for it), and return the request, its hash checked here.
        A saga that has finished asks for nothing more: NothingPendingError at once (a
        script run again after its saga was decided does not wait out the timeout)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            summary = await api.describe_saga(self.handle(saga_id))
            if not summary.running:
                raise api.NothingPendingError(
                    f"saga {saga_id!r} has finished "
                    f"({summary.status or summary.execution_status}); nothing is pending"
                )
            try:
                pending = await api.pending_approval(self.handle(saga_id))
            except api.SagaNotOpenError:
                pending = None  # the workflow has not reached its saga yet: keep waiting
            if pending is not None:
                return Review(pending, api.check_pending(pending))
            if asyncio.get_running_loop().time() > deadline:
                raise api.NothingPendingError(
                    f"saga {saga_id!r} asked for no approval within {timeout:g}s"
                )
            await asyncio.sleep(0.2)

    # ---- deciding -----------------------------------------------------------------------------

    async def decide(
        self,
        saga_id: str,
        *,
        approve: bool,
        approver: str | None = None,
        reason: str = "",
        payload_sha256: str | None = None,
        confirm: Confirm | None = None,
    ) -> DecisionResult:
        """Review, confirm, decide. `payload_sha256` is the hash the approver reviewed
        earlier: sent as given, so a payload that changed since is refused (and the
        refusal journaled); None binds the decision to the payload reviewed now. With a
        signer the decision is signed and `approver` defaults to the key's owner."""
        if approver is None and self.signer is not None:
            approver = self.signer.approver
        if not approver or not approver.strip():
            raise api.SagaClientError("a decision needs an approver: it is journaled")
        review = await self.review(saga_id, verb="approve" if approve else "reject")
        # Hex is case-insensitive to a person; the saga takes the lowercase form only.
        sent = review.local_sha256 if payload_sha256 is None else payload_sha256.strip().lower()
        if confirm is not None:
            answer = confirm(review.pending, review.local_sha256)
            if inspect.isawaitable(answer):
                answer = await answer
            if not answer:
                verb = "approved" if approve else "rejected"
                raise DeclinedError(f"not {verb}: nothing was sent")
        return await acts.decide(
            self.handle(saga_id),
            step=review.pending.step,
            payload_sha256=sent,
            approver=approver,
            approve=approve,
            reason=reason,
            tool=review.pending.tool,
            signer=self.signer,
        )

    @overload
    async def send(self, saga_id: str, action: ApprovalDecision) -> DecisionResult: ...
    @overload
    async def send(self, saga_id: str, action: Resolution) -> ResolutionResult: ...
    @overload
    async def send(self, saga_id: str, action: SignedAction) -> BaseModel: ...
    async def send(self, saga_id: str, action: SignedAction) -> BaseModel:
        """Send an action made elsewhere — a decision or a resolution signed with a passkey
        (sagacity.approval._passkeys.passkey_signed), or signed with another key — to the saga,
        unchanged (no review: the action already names what it was made for)."""
        return await acts.send_action(self.handle(saga_id), action)

    async def approve(
        self, saga_id: str, *, reason: str = "", **options: Unpack[DecisionOptions]
    ) -> DecisionResult:
        """Approve the step the saga waits on, bound to the SHA-256 of its exact payload."""
        return await self.decide(saga_id, approve=True, reason=reason, **options)

    async def reject(
        self, saga_id: str, *, reason: str, **options: Unpack[DecisionOptions]
    ) -> DecisionResult:
        """Reject the step the saga waits on (a reason is required: it is journaled); the
        saga compensates its executed steps."""
        if not reason.strip():
            raise api.SagaClientError("a rejection needs a reason: it is journaled")
        return await self.decide(saga_id, approve=False, reason=reason, **options)

    async def cancel(
        self, saga_id: str, *, actor: str | None = None, reason: str = ""
    ) -> api.SagaSummary:
        """Ask a running saga to stop; it compensates its executed steps and closes. Who
        asks (`actor`, default the signer's owner) and why go with the request: Temporal's
        history records them, and the saga journals them in its close entry (its first
        failure reads "saga cancelled (by ACTOR: REASON)")."""
        if actor is None and self.signer is not None:
            actor = self.signer.approver
        reason = api.cancel_reason(actor, reason)
        return await api.cancel_saga(self.handle(saga_id), reason=reason)
