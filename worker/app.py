"""Composition root: the client, the store, the toolbox and the worker, wired one way for
production, the CLI and the tests alike."""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from activities import SagaActivities, activity_queue
from activities.model import ModelClient
from sagacity.errors import SagacityError
from sagacity.stores import JournalStore
from sagacity.toolbox import Toolbox
from worker.settings import Settings
from workflows.agent_saga import AgentSagaWorkflow

PASSTHROUGH = ("sagacity", "activities", "workflows", "pydantic", "pydantic_core", "rfc8785")
"""Our modules and their libraries are passed through the sandbox instead of re-imported
for every workflow run. Measured (docs/benchmarks.md): re-importing the workflow modules
per run cost 10-30 ms of CPU per saga and ~170 KiB per cached saga. The guard against
nondeterministic edits is then the replay tests over recorded histories."""


class ToolboxImportError(SagacityError):
    """`--tools module:attr` does not name an importable Toolbox."""


def load_toolbox(spec: str) -> Toolbox:
    """Import `module:attr` and return the Toolbox it names (or build one from it)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ToolboxImportError(f"--tools must look like module:attr, got {spec!r}")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ToolboxImportError(f"cannot import {module_name!r} for --tools: {exc}") from exc
    try:
        target = getattr(module, attr)
    except AttributeError as exc:
        raise ToolboxImportError(f"module {module_name!r} has no attribute {attr!r}") from exc
    if callable(target) and not isinstance(target, Toolbox):
        target = target()
    return target if isinstance(target, Toolbox) else Toolbox.build(target)


async def connect(settings: Settings) -> Client:
    """A client using the pydantic data converter, as every sagacity worker and caller must."""
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.namespace,
        data_converter=pydantic_data_converter,
    )


class SagaWorker:
    """A saga worker: two Temporal workers sharing one set of activities.

    One polls the task queue sagas are started on (workflows and their activities): a new
    saga's first workflow task pins the identity of the worker that runs it (its toolbox
    and journal, see activities.identity), and every activity checks it. The other polls
    the queue of this identity only: an activity that reached a worker with another
    toolbox or journal is refused there before it does anything and runs again on that
    queue, so a second worker with another toolbox on the same task queue can never run,
    or journal, another saga's step. (Routing every activity through the identity queue
    would cost Temporal's eager dispatch, measured at ~25 ms a step; moving the workflow
    there by continue-as-new costs ~1 s, the server's minimum interval between runs of one
    workflow id.)"""

    def __init__(self, workflows: Worker, pinned: Worker, identity: str) -> None:
        self.workflows = workflows
        self.pinned = pinned
        self.identity = identity

    @property
    def task_queue(self) -> str:
        return self.workflows.task_queue

    @property
    def activity_task_queue(self) -> str:
        return self.pinned.task_queue

    async def __aenter__(self) -> SagaWorker:
        await self.workflows.__aenter__()
        try:
            await self.pinned.__aenter__()
        except BaseException:
            await self.workflows.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.pinned.__aexit__(None, None, None)
        finally:
            await self.workflows.__aexit__(None, None, None)

    async def run(self) -> None:
        """Poll until shut down (or until one of the two fails)."""
        await asyncio.gather(self.workflows.run(), self.pinned.run())

    async def shutdown(self) -> None:
        await asyncio.gather(self.pinned.shutdown(), self.workflows.shutdown())


def new_worker(
    client: Client,
    *,
    store: JournalStore,
    toolbox: Toolbox,
    task_queue: str = "sagacity",
    models: Mapping[str, ModelClient] | None = None,
    max_concurrent_activities: int = 100,
    max_concurrent_workflow_tasks: int = 100,
    graceful_shutdown: timedelta = timedelta(0),
) -> SagaWorker:
    """The saga worker. The client must use the pydantic data converter (see `connect`)."""
    activities = SagaActivities(store, toolbox, models)
    common: dict[str, Any] = {
        "activities": activities.all(),
        "max_concurrent_activities": max_concurrent_activities,
        # Let running tool calls finish on shutdown: a call cut off mid-way is an unknown
        # outcome that needs a human. Production workers set this (Settings).
        "graceful_shutdown_timeout": graceful_shutdown,
    }
    runner = SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH)
    )
    workflows = Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentSagaWorkflow],
        max_concurrent_workflow_tasks=max_concurrent_workflow_tasks,
        workflow_runner=runner,
        **common,
    )
    pinned = Worker(client, task_queue=activity_queue(task_queue, activities.identity), **common)
    return SagaWorker(workflows, pinned, activities.identity)
