"""One client path for every signed human action: a decision on an irreversible step, a
resolution of dirty state, and whatever kind comes next.

An action is built as its model (a sagacity.approval._signed_action.SignedAction), signed with the
person's key when a signer is given (its owner is the person acting) or sent unsigned
under the name it carries, and goes to the saga through the kind's update (`decide`,
`resolve`), which answers at once with what the saga journaled or a refusal: the kind's
RefusedError, whose `journaled` says whether the saga recorded the refusal as evidence
(see workflows/_approval_gate.py and workflows/_human_desk.py for how each door journals
a refused action). A passkey-signed action (sagacity.approval._passkeys) is sent the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar, overload

from pydantic import BaseModel, ValidationError
from temporalio.client import (
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.exceptions import ApplicationError

from sagacity.approval._models import ApprovalDecision
from sagacity.approval._resolutions import Resolution
from sagacity.approval._signed_action import SignedAction, SignerMismatchError, sign_action
from sagacity.approval._signing import SigningKey
from sagacity.worker.client._client import SagaHandle, handle_client
from sagacity.worker.client._errors import (
    ApprovalRefusedError,
    NoWorkerError,
    RefusedError,
    ResolutionRefusedError,
    SagaClientError,
    UpdateFailedError,
    rpc,
)
from sagacity.worker.client._update_delivery import execute_update
from sagacity.workflows._models import DecisionResult, ResolutionResult

__all__ = [
    "DOORS",
    "Door",
    "build_action",
    "decide",
    "made_by",
    "send_action",
    "send_update",
]

ACTION_TIMEOUT = timedelta(seconds=30)
"""An action's update returns once it is journaled; under a burst of decisions that can
take longer than a query (measured: 1 in 2,000 over 10 s with 50 at once)."""

A = TypeVar("A", bound=SignedAction)
R = TypeVar("R")


@dataclass(frozen=True)
class Door:
    """How one kind of action reaches the saga and how its refusal comes back."""

    update: str
    result_type: type[BaseModel]
    refusal_type: str
    refused: type[RefusedError]
    recheck: str


DOORS: dict[str, Door] = {
    ApprovalDecision.KIND: Door(
        "decide",
        DecisionResult,
        "ApprovalRefused",
        ApprovalRefusedError,
        "check with `sagacity status` before deciding again",
    ),
    Resolution.KIND: Door(
        "resolve",
        ResolutionResult,
        "ResolutionRefused",
        ResolutionRefusedError,
        "check with `sagacity dirty` before sending it again",
    ),
}


def build_action(kind: type[A], **fields: Any) -> A:
    """The action of `kind` from its fields, or a SagaClientError naming what is wrong
    (the field and the rule), before anything is sent."""
    try:
        return kind.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(body)'}: {e['msg']}"
            for e in exc.errors(include_url=False, include_input=False)[:5]
        )
        raise SagaClientError(f"cannot make this {kind.KIND}: {problems}") from None


def made_by(action: A, signer: SigningKey | None) -> A:
    """The action to send: signed by `signer` (its owner is the person acting; an action
    naming someone else is refused), or unsigned under the name it carries."""
    if signer is not None:
        try:
            return sign_action(signer, action)
        except SignerMismatchError as exc:
            raise SagaClientError(str(exc)) from None
    if not action.person.strip():
        raise SagaClientError(
            f"a {action.KIND} needs {action.SIGNER} (or a signer): it is journaled"
        )
    return action


@overload
async def send_action(handle: SagaHandle, action: ApprovalDecision) -> DecisionResult: ...
@overload
async def send_action(handle: SagaHandle, action: Resolution) -> ResolutionResult: ...
@overload
async def send_action(handle: SagaHandle, action: SignedAction) -> BaseModel: ...
async def send_action(handle: SagaHandle, action: SignedAction) -> BaseModel:
    """Send an action already made (signed here, with a passkey, or elsewhere) through
    its kind's update, unchanged. Raises the kind's RefusedError (its `reason` the
    journaled RefusalReason) when the saga refuses it."""
    door = DOORS[action.KIND]
    return await send_update(
        handle,
        door.update,
        action.body(),
        door.result_type,
        refusal_type=door.refusal_type,
        refused=door.refused,
        what=action.KIND,
        recheck=door.recheck,
    )


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
    if signer is not None and tool is None:
        raise SagaClientError("a signed decision names the tool of the pending step")
    decision = build_action(
        ApprovalDecision,
        saga_id=handle.id,
        step=step,
        tool=tool,
        payload_sha256=payload_sha256,
        approver=approver,
        approve=approve,
        reason=reason,
    )
    return await send_action(handle, made_by(decision, signer))


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
    client = handle_client(handle)
    with rpc(client, handle.id, call=f"the {name} update", worker_timeout=ACTION_TIMEOUT):
        try:
            return await execute_update(handle, name, body, result_type, rpc_timeout=ACTION_TIMEOUT)
        except WorkflowUpdateRPCTimeoutOrCancelledError as exc:
            raise NoWorkerError(
                f"no worker answered the {what} for saga {handle.id!r} within "
                f"{ACTION_TIMEOUT.seconds}s; it may still be applied when a worker polls — "
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
