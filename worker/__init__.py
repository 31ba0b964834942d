"""The Temporal side of sagacity, in one module: the `Saga` a workflow opens, the
`SagacityPlugin` a client and worker add, the `SagaClient` that starts sagas and decides
their steps, and the errors a caller catches.

This package is also the composition root: the only layer that reads configuration
(`SAGACITY_` settings) and picks backends; `client`, `cli` and `inbox` are its parts."""

from __future__ import annotations

from sagacity.worker._plugin import SagacityPlugin
from sagacity.worker.client import (
    ApprovalRefusedError,
    NothingPendingError,
    SagaClient,
    SagaClientError,
    SagaExistsError,
    SagaNotFoundError,
    TemporalUnavailableError,
)
from sagacity.workflows import (
    AgentSagaWorkflow,
    Saga,
    SagaFailedError,
    SagaInput,
    SagaOptions,
    SagaResult,
    SagaUsageError,
    StepError,
    ToolCall,
)

__all__ = [
    "AgentSagaWorkflow",
    "ApprovalRefusedError",
    "NothingPendingError",
    "Saga",
    "SagaClient",
    "SagaClientError",
    "SagaExistsError",
    "SagaFailedError",
    "SagaInput",
    "SagaNotFoundError",
    "SagaOptions",
    "SagaResult",
    "SagaUsageError",
    "SagacityPlugin",
    "StepError",
    "TemporalUnavailableError",
    "ToolCall",
]
