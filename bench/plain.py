"""The plain Temporal baselines: what a user would run without sagacity.

`PlainWorkflow` runs N no-op activities one after another with the same activity options
the saga uses for a tool call; `PlainApprovalWorkflow` waits for a validated `decide`
update carrying the SHA-256 of its payload, then runs one no-op activity. Both are served
by `plain_worker` with the same worker settings as `worker.app.new_worker`.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

NOOP_ACTIVITY = "bench.noop"
ACTIVITY_OPTIONS: dict[str, Any] = {
    # as workflows.agent_saga runs a tool (SagaInput defaults)
    "start_to_close_timeout": timedelta(seconds=300),
    "heartbeat_timeout": timedelta(seconds=30),
    "retry_policy": RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=10,
    ),
}


@activity.defn(name=NOOP_ACTIVITY)
async def noop_activity(args: dict[str, Any]) -> dict[str, Any]:
    return {}


@workflow.defn(name="BenchPlain")
class PlainWorkflow:
    @workflow.run
    async def run(self, steps: int) -> int:
        for i in range(steps):
            await workflow.execute_activity(
                NOOP_ACTIVITY, {"i": i}, result_type=dict, **ACTIVITY_OPTIONS
            )
        return steps


def payload_hash(payload: dict[str, Any]) -> str:
    return hashlib.sha256(
        json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


@workflow.defn(name="BenchPlainApproval")
class PlainApprovalWorkflow:
    def __init__(self) -> None:
        self._hash: str | None = None
        self._approved = False

    @workflow.run
    async def run(self, payload: dict[str, Any]) -> str:
        self._hash = payload_hash(payload)
        await workflow.wait_condition(lambda: self._approved)
        await workflow.execute_activity(
            NOOP_ACTIVITY, payload, result_type=dict, **ACTIVITY_OPTIONS
        )
        return "COMPLETED"

    @workflow.query(name="pending")
    def pending(self) -> str | None:
        return None if self._approved else self._hash

    @workflow.update(name="decide")
    async def decide(self, body: dict[str, Any]) -> bool:
        self._approved = True
        return True

    @decide.validator
    def _validate(self, body: dict[str, Any]) -> None:
        if self._approved or body.get("payload_sha256") != self._hash:
            raise ApplicationError("refused: nothing pending with this hash", non_retryable=True)
