"""Temporal activities of a saga: run a tool under the journal, compensate, journal an
event, fence a step, ask the model. Each re-derives its authority from the journal (who
scheduled it, what the journal holds), never from its input. Dependencies (store,
toolbox, models) are injected by the worker; activity names are pinned so workflows and
histories never depend on Python names."""

from __future__ import annotations

from sagacity.activities._authority import NOT_THE_SAGAS_RUN
from sagacity.activities._identity import activity_queue
from sagacity.activities._model_clients import ModelClient, ScriptedModel
from sagacity.activities._saga_activities import (
    APPROVER_KEY,
    CHECK_PLAN,
    CHECK_RESUME,
    COMPENSATE,
    FENCE_STEP,
    JOURNAL_EVENT,
    NEXT_TURN,
    RESOLVE_STEP,
    RUN_TOOL,
    SAGA_ACTIVITY_TYPES,
    WORKER_IDENTITY,
    WRONG_WORKER,
    SagaActivities,
)

__all__ = [
    "APPROVER_KEY",
    "CHECK_PLAN",
    "CHECK_RESUME",
    "COMPENSATE",
    "FENCE_STEP",
    "JOURNAL_EVENT",
    "NEXT_TURN",
    "NOT_THE_SAGAS_RUN",
    "RESOLVE_STEP",
    "RUN_TOOL",
    "SAGA_ACTIVITY_TYPES",
    "WORKER_IDENTITY",
    "WRONG_WORKER",
    "ModelClient",
    "SagaActivities",
    "ScriptedModel",
    "activity_queue",
]
