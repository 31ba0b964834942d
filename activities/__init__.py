"""Temporal activities of a saga. Dependencies (store, toolbox, models) are injected by
the worker; names are pinned so workflows and histories never depend on Python names."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.compensation_runner import CompensationRunner
from activities.model import ModelClient, ScriptedModel
from activities.models import (
    CompensateInput,
    CompensationOutcome,
    EntryRef,
    FenceInput,
    JournalEventInput,
    ModelTurn,
    ModelTurnInput,
    RunToolInput,
    ToolOutcome,
)
from activities.tool_runner import ToolRunner, entry_ref, store_call
from sagacity.entry import EntryDraft
from sagacity.errors import (
    InvalidEntryError,
    JournalConflictError,
    SagacityError,
    SagaClosedError,
)
from sagacity.phases import Phase
from sagacity.stores.base import JournalStore
from sagacity.toolbox import Toolbox

RUN_TOOL = "sagacity.run_tool"
COMPENSATE = "sagacity.compensate"
JOURNAL_EVENT = "sagacity.journal_event"
NEXT_TURN = "sagacity.next_turn"
FENCE_STEP = "sagacity.fence_step"

__all__ = [
    "COMPENSATE",
    "FENCE_STEP",
    "JOURNAL_EVENT",
    "NEXT_TURN",
    "RUN_TOOL",
    "SagaActivities",
    "ScriptedModel",
]


class SagaActivities:
    """The activities a saga worker registers, bound to one store and one toolbox."""

    def __init__(
        self,
        store: JournalStore,
        toolbox: Toolbox,
        models: Mapping[str, ModelClient] | None = None,
    ) -> None:
        self.store = store
        self.toolbox = toolbox
        self.models: dict[str, ModelClient] = {"scripted": ScriptedModel(), **(models or {})}
        self._compensations = CompensationRunner(store, toolbox)
        self._runner = ToolRunner(store, toolbox)

    def all(self) -> list[Callable[..., Any]]:
        return [self.run_tool, self.compensate, self.journal_event, self.next_turn, self.fence_step]

    @activity.defn(name=RUN_TOOL)
    async def run_tool(self, req: RunToolInput) -> ToolOutcome:
        return await self._runner.run(req)

    @activity.defn(name=COMPENSATE)
    async def compensate(self, req: CompensateInput) -> CompensationOutcome:
        return await self._compensations.run(req)

    @activity.defn(name=JOURNAL_EVENT)
    async def journal_event(self, req: JournalEventInput) -> EntryRef:
        """Journal a lifecycle or approval event. Bad entries and closed sagas are not
        retryable: retrying cannot make them succeed."""
        try:
            draft = EntryDraft.new(
                req.saga_id,
                req.phase,
                step=req.step,
                attempt=req.attempt,
                tool=req.tool,
                input=req.input,
                result=req.result,
                error=req.error,
                actor=req.actor,
            )
            return entry_ref(await store_call(self.store.append, draft))
        except JournalConflictError as exc:
            if req.phase == Phase.SAGA_OPENED:
                raise ApplicationError(
                    f"saga id {req.saga_id!r} was used before: its journal is already open "
                    "(or closed) by another run. Saga ids are never reused; start the saga "
                    "with a new id.",
                    type="SagaIdReused",
                    non_retryable=True,
                ) from exc
            raise ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True) from exc
        except (InvalidEntryError, SagaClosedError) as exc:
            raise ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True) from exc

    @activity.defn(name=FENCE_STEP)
    async def fence_step(self, req: FenceInput) -> None:
        """Tombstone a step whose outcome is unknown, so a late attempt cannot apply."""
        await store_call(self.store.fence, req.saga_id, req.step)

    @activity.defn(name=NEXT_TURN)
    async def next_turn(self, req: ModelTurnInput) -> ModelTurn:
        client = self.models.get(req.settings.provider)
        if client is None:
            raise ApplicationError(
                f"no model provider {req.settings.provider!r} on this worker; "
                f"configured: {sorted(self.models)}",
                type="UnknownModelProvider",
                non_retryable=True,
            )
        toolbox = self.toolbox
        if req.allowed_tools is not None:
            try:
                toolbox = toolbox.restrict(req.allowed_tools)
            except SagacityError as exc:
                raise ApplicationError(
                    f"allowed_tools: {exc}", type="SagaConfigError", non_retryable=True
                ) from exc
        return await client.next_turn(req, toolbox.schemas())
