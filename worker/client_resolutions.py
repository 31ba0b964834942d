"""The client side of dirty state: list what needs a person, and resolve it.

A saga left dirty (an unknown outcome, a compensation that failed) waits in
NEEDS_HUMAN; `dirty_sagas` lists every saga flagged as needing a human (waiting, and
closed UNRESOLVED) with what is dirty, and `resolve` sends one action through the
`resolve` update, which answers once the saga has applied and journaled it — or with a
refusal (ResolutionRefusedError, journaled by the saga as RESOLUTION_REFUSED). With a
signer the action is a statement signed by the person's key (required where the
worker has an approver registry).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from temporalio.client import Client

from sagacity.decision_statement import signed_resolution
from sagacity.errors import SagacityError
from sagacity.resolutions import ACTIONS, Action
from sagacity.signing import SigningKey
from sagacity.worker.client import (
    RefusedError,
    SagaClientError,
    SagaHandle,
    SagaSummary,
    _query,
    list_sagas,
    saga_handle,
    send_update,
)
from sagacity.workflows.models import DirtyStep, ResolutionResult

__all__ = [
    "Action",
    "DirtyItem",
    "ResolutionRefusedError",
    "dirty_sagas",
    "resolution_body",
    "resolve",
    "saga_dirty",
]


class ResolutionRefusedError(RefusedError):
    """The saga refused the action (what it names is not dirty, the actor may not resolve,
    the signature does not verify...)."""

    what = "resolution"


@dataclass(frozen=True)
class DirtyItem:
    summary: SagaSummary
    dirty: list[DirtyStep]
    error: str | None = None


async def saga_dirty(handle: SagaHandle) -> list[DirtyStep]:
    """The `dirty` query: steps that need a person (needs a worker)."""
    dirty: list[DirtyStep] = await _query(handle, "dirty", list[DirtyStep])
    return dirty


async def dirty_sagas(client: Client, *, limit: int | None = None) -> list[DirtyItem]:
    """Every saga flagged as needing a human, newest first, with what is dirty. A saga
    whose query fails is kept with the error: nothing needing a human is hidden."""
    listed = await list_sagas(client, needs_human=True, limit=limit)

    async def one(summary: SagaSummary) -> DirtyItem:
        try:
            return DirtyItem(summary, await saga_dirty(saga_handle(client, summary.saga_id)))
        except SagacityError as exc:
            return DirtyItem(summary, [], str(exc))

    return list(await asyncio.gather(*(one(s) for s in listed)))


def resolution_body(
    saga_id: str,
    action: Action,
    *,
    actor: str | None,
    step: int | None = None,
    steps: list[int] | None = None,
    result: Any = None,
    reason: str = "",
    signer: SigningKey | None = None,
) -> dict[str, Any]:
    """The body of one action, signed by `signer` when given (its owner is the actor)."""
    if action not in ACTIONS:
        raise SagaClientError(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}")
    if signer is not None:
        if actor is not None and actor != signer.approver:
            raise SagaClientError(
                f"the key {signer.key_id} belongs to {signer.approver!r}, not {actor!r}: a "
                "key speaks only for its owner"
            )
        return signed_resolution(
            signer, saga_id=saga_id, action=action, step=step, steps=steps, result=result,
            reason=reason,
        )  # fmt: skip
    if not actor or not actor.strip():
        raise SagaClientError("a resolution needs an actor (or a signer): it is journaled")
    body: dict[str, Any] = {"saga_id": saga_id, "action": action, "actor": actor}
    body.update({"reason": reason} if reason else {})
    body.update({"step": step} if step is not None else {})
    body.update({"steps": steps} if steps is not None else {})
    body.update({"result": result} if result is not None else {})
    return body


async def resolve(handle: SagaHandle, body: dict[str, Any]) -> ResolutionResult:
    """Send one action and return what the saga did (journaled RESOLVED and its effect)."""
    return await send_update(
        handle,
        "resolve",
        body,
        ResolutionResult,
        refusal_type="ResolutionRefused",
        refused=ResolutionRefusedError,
        what="resolution",
        recheck="check with `sagacity dirty` before sending it again",
    )
