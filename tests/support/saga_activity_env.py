"""Running a saga's activities without a server, as the saga's own run would.

Every sagacity activity checks who scheduled it (the workflow id must be the saga id, the
run must own the saga's chain, as SAGA_OPENED journaled it): these helpers give
temporalio's ActivityEnvironment that identity and journal the matching opening.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from sagacity.activities._models import TOOL_FAILED, OutcomeKind, ToolOutcome
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase

RUN = "run-0001"
"""The run id of the saga's own (first) run in these tests."""


def saga_env(saga_id: str, *, run_id: str = RUN, attempt: int = 1) -> ActivityEnvironment:
    """An activity environment as scheduled by `saga_id`'s workflow run `run_id`."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info, workflow_id=saga_id, workflow_run_id=run_id, attempt=attempt
    )
    return env


def opening(saga_id: str, *, run_id: str = RUN) -> EntryDraft:
    """SAGA_OPENED as the run `run_id` (the first of its chain) journals it."""
    return EntryDraft.new(saga_id, Phase.SAGA_OPENED, input={"run_id": run_id, "chain": run_id})


async def tool_outcome(env: ActivityEnvironment, *args: Any) -> ToolOutcome:
    """`env.run(*args)` of the run_tool activity, as the workflow reads it: a tool that
    failed fails its activity (journaled FAILED, not retried) with its outcome attached."""
    try:
        outcome: ToolOutcome = await env.run(*args)
    except ApplicationError as exc:
        if exc.type != TOOL_FAILED:
            raise
        assert exc.non_retryable, exc
        failed = ToolOutcome.model_validate(exc.details[0])
        assert failed.kind is OutcomeKind.FAILED
        return failed
    assert outcome.kind is not OutcomeKind.FAILED  # a failure always fails the activity
    return outcome
