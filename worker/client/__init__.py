"""The client side of a saga: `SagaClient` starts, inspects, approves, resolves and
cancels sagas, for the CLI, the inbox and users; the errors it raises say what to do."""

from __future__ import annotations

from sagacity.worker.client._errors import (
    ApprovalRefusedError,
    NothingPendingError,
    NoWorkerError,
    PendingHashMismatchError,
    RefusedError,
    ResolutionRefusedError,
    SagaAlreadyClosedError,
    SagaClientError,
    SagaExistsError,
    SagaNotFoundError,
    SagaNotOpenError,
    TemporalUnavailableError,
    UpdateFailedError,
)
from sagacity.worker.client._saga_client import SagaClient

__all__ = [
    "ApprovalRefusedError",
    "NoWorkerError",
    "NothingPendingError",
    "PendingHashMismatchError",
    "RefusedError",
    "ResolutionRefusedError",
    "SagaAlreadyClosedError",
    "SagaClient",
    "SagaClientError",
    "SagaExistsError",
    "SagaNotFoundError",
    "SagaNotOpenError",
    "TemporalUnavailableError",
    "UpdateFailedError",
]
