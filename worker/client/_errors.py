"""The errors a saga client call raises on purpose, and the translation of Temporal's
transport errors into them, so callers never have to read gRPC status codes."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from datetime import timedelta

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from sagacity._errors import SagacityError
from sagacity.journal._bounds import cut
from sagacity.worker.client._update_delivery import workflow_not_ready


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
        # The saga's sentence may lead with the code: said once, in `reason` and the message.
        self.detail = detail.removeprefix(f"{reason}: ")
        self.journaled = journaled
        evidence = "journaled as evidence" if journaled else self.unjournaled
        super().__init__(f"{self.what} refused ({reason}): {self.detail} ({evidence})")


class ApprovalRefusedError(RefusedError):
    """The saga refused the decision. `journaled` says whether the refusal was re-sent as a
    signal so the workflow records it in the journal."""

    what = "decision"
    unjournaled = "could not be journaled"


class ResolutionRefusedError(RefusedError):
    """The saga refused the action (what it names is not dirty, the actor may not resolve,
    the signature does not verify...)."""

    what = "resolution"


@contextlib.contextmanager
def rpc(
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
        raise translate(exc, client, saga_id, call=call, worker_timeout=worker_timeout) from exc


def translate(
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
                "TEMPORAL_NAMESPACE (or --namespace) or create it"
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


__all__ = [
    "ApprovalRefusedError",
    "NoWorkerError",
    "NothingPendingError",
    "PendingHashMismatchError",
    "RefusedError",
    "ResolutionRefusedError",
    "SagaAlreadyClosedError",
    "SagaClientError",
    "SagaExistsError",
    "SagaNotFoundError",
    "SagaNotOpenError",
    "TemporalUnavailableError",
    "UpdateFailedError",
    "connect_reason",
    "rpc",
    "translate",
]
