"""What `sagacity pending` and `dirty` search: every saga of the namespace, in any
workflow type on any task queue (worker.client._discovery), narrowed only by what the
command line asks for.

`--task-queue` narrows only when written on the command line (before or after the
command): SAGACITY_TASK_QUEUE configures where new sagas start and the worker polls, and
a saga of a workflow of your own runs on its own queue, so a list that took the
configured queue as a filter would miss it and say "none".
"""

from __future__ import annotations

from typing import Annotated

import typer

from sagacity.worker.cli._common import CliState
from sagacity.worker.client._discovery import SagaSearch

__all__ = ["WorkflowTypeOpt", "search_of"]

WorkflowTypeOpt = Annotated[
    str | None,
    typer.Option(
        "--workflow-type",
        help="only sagas of this workflow type (default: any, AgentSaga and your own)",
        show_default=False,
    ),
]


def search_of(ctx: typer.Context, workflow_type: str | None) -> SagaSearch:
    """The search the command line asks for: --task-queue and --workflow-type when given."""
    state = ctx.find_object(CliState)
    task_queue = state.overrides.get("task_queue") if state else None
    return SagaSearch(task_queue=task_queue or None, workflow_type=workflow_type or None)
