"""The saga API for any workflow (`Saga`), the prebuilt `AgentSagaWorkflow`, and the models
a caller sends and reads. Deterministic code only: imported into the workflow sandbox."""

from __future__ import annotations

from sagacity.workflows._agent_saga import AgentSagaWorkflow
from sagacity.workflows._models import (
    CompensationReport,
    DecisionResult,
    DirtyStep,
    PendingApproval,
    ResolutionResult,
    SagaInput,
    SagaResult,
    SagaView,
    StepReport,
    ToolCall,
)
from sagacity.workflows._saga import (
    Saga,
    SagaFailedError,
    SagaOptions,
    SagaUsageError,
    StepError,
    execute_child_saga,
    start_child_saga,
)

__all__ = [
    "AgentSagaWorkflow",
    "CompensationReport",
    "DecisionResult",
    "DirtyStep",
    "PendingApproval",
    "ResolutionResult",
    "Saga",
    "SagaFailedError",
    "SagaInput",
    "SagaOptions",
    "SagaResult",
    "SagaUsageError",
    "SagaView",
    "StepError",
    "StepReport",
    "ToolCall",
    "execute_child_saga",
    "start_child_saga",
]
