"""SagaClient's calls for a saga that needs a human: list what is dirty, resolve it
(`resolve`, `retry_compensation`, `accept`: one Resolution each, signed with the client's
signer when it has one, sent by the one path of every signed action), and compensate a
saga whose workflow ended without closing its journal (worker.saga_reset)."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client

from sagacity.approval._signing import SigningKey
from sagacity.stores import JournalStore
from sagacity.worker.client import _client as api
from sagacity.worker.client import _resolutions as fixes
from sagacity.worker.client._discovery import SagaSearch
from sagacity.worker.client._saga_reset import CompensationStarted, compensate_ended
from sagacity.workflows._models import DirtyStep, ResolutionResult

__all__ = ["DirtyStateCalls"]


class DirtyStateCalls:
    """The dirty-state half of SagaClient (a mixin: SagaClient sets the attributes)."""

    temporal: Client
    store: JournalStore | None
    signer: SigningKey | None

    def handle(self, saga_id: str) -> api.SagaHandle:
        raise NotImplementedError

    def _store(self) -> JournalStore:
        raise NotImplementedError

    async def dirty(self, saga_id: str) -> list[DirtyStep]:
        """The steps of `saga_id` that need a person (its `dirty` query)."""
        return await fixes.saga_dirty(self.handle(saga_id))

    async def needing_human(
        self,
        *,
        task_queue: str | None = None,
        workflow_type: str | None = None,
        limit: int | None = None,
    ) -> fixes.NeedingHuman:
        """Every saga needing a human (`sagacity dirty`), in any workflow type on any task
        queue unless `task_queue` or `workflow_type` narrows it: those flagged, with what
        is dirty, and those whose workflow ended without closing their journal
        (terminated, timed out; `item.ended` says how, what is live and what resolves
        it). `.searched` and `.not_searched` say what was looked at: without a journal
        store, only Temporal's visibility is (see worker.ended_sagas)."""
        return await fixes.needing_human(
            self.temporal,
            self.store,
            limit=limit,
            search=SagaSearch(task_queue=task_queue, workflow_type=workflow_type),
            why_no_journal="this SagaClient has no journal store: SagaClient(store=...)",
        )

    async def compensate(
        self, saga_id: str, *, reason: str, actor: str | None = None
    ) -> CompensationStarted:
        """Compensate a saga whose workflow ended without closing its journal (terminated,
        timed out): its run is reset to its last workflow task and cancelled at once, so
        the saga's own cancellation path undoes its executed steps and closes its journal
        (worker.saga_reset). Who asks (`actor`, default the signer's owner) and why are
        journaled with the cancel. Raises NotEndedError when the saga runs, is closed, or
        ended in a way a reset cannot undo."""
        if actor is None and self.signer is not None:
            actor = self.signer.approver
        if not actor or not actor.strip():
            raise api.SagaClientError("compensating a saga needs an actor: it is journaled")
        return await compensate_ended(
            self.temporal, self._store(), saga_id, actor=actor, reason=reason
        )

    async def resolve(
        self,
        saga_id: str,
        step: int,
        *,
        happened: bool,
        result: Any = None,
        reason: str = "",
        actor: str | None = None,
    ) -> ResolutionResult:
        """Say what became of a step whose outcome is unknown: it `happened` (with the
        `result` you read from the other side; a compensable step is then undone) or it
        did not (nothing to undo)."""
        action: fixes.Action = "happened" if happened else "did_not_happen"
        return await self._send(saga_id, action, actor, step=step, result=result, reason=reason)

    async def retry_compensation(
        self, saga_id: str, step: int, *, reason: str = "", actor: str | None = None
    ) -> ResolutionResult:
        """Run a failed compensation again (same idempotency key), e.g. once the service
        it calls is back."""
        return await self._send(saga_id, "retry_compensation", actor, step=step, reason=reason)

    async def accept(
        self,
        saga_id: str,
        *,
        reason: str,
        steps: list[int] | None = None,
        actor: str | None = None,
    ) -> ResolutionResult:
        """Close the saga with its remaining dirty steps accepted as they are. `steps` are
        the dirty steps you reviewed (default: those the saga lists now); the saga refuses
        the acceptance if they are not exactly what is dirty when it arrives."""
        if not reason.strip():
            raise api.SagaClientError("an acceptance needs a reason: it is journaled")
        if steps is None:
            steps = [d.step for d in await self.dirty(saga_id)]
        return await self._send(saga_id, "accept", actor, steps=steps, reason=reason)

    async def _send(
        self, saga_id: str, action: fixes.Action, actor: str | None, **fields: Any
    ) -> ResolutionResult:
        made = fixes.resolution_of(saga_id, action, actor=actor, signer=self.signer, **fields)
        return await fixes.resolve(self.handle(saga_id), made)
