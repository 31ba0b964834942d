"""Composition root: the client, the store, the toolbox and the worker, wired one way for
production, the CLI and the tests alike."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from sagacity._errors import SagacityError
from sagacity._extras import missing_extra
from sagacity.activities import activity_queue
from sagacity.activities._checkpointing import DEFAULT_CHECKPOINT_EVERY
from sagacity.activities._model_clients import ModelClient
from sagacity.approval._registry_file import RegistryFile
from sagacity.stores import JournalStore
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._converter import SAGA_DATA_CONVERTER
from sagacity.worker._log_keys import DATA_HOME_KEY, LogKeyChoice
from sagacity.worker._plugin import SagacityPlugin
from sagacity.worker._settings import Settings


class ToolboxImportError(SagacityError):
    """`--tools module:attr` does not name an importable Toolbox."""


def _import_attr(spec: str, option: str) -> object:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ToolboxImportError(f"{option} must look like module:attr, got {spec!r}")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = missing_extra(exc)
        raise ToolboxImportError(
            f"cannot import {module_name!r} for {option}: {hint or exc}"
        ) from exc
    try:
        return getattr(module, attr)
    except AttributeError as exc:
        raise ToolboxImportError(f"module {module_name!r} has no attribute {attr!r}") from exc


def load_toolbox(spec: str) -> Toolbox:
    """Import `module:attr` and return the Toolbox it names (or build one from it)."""
    target = _import_attr(spec, "--tools")
    if callable(target) and not isinstance(target, Toolbox):
        target = target()
    return target if isinstance(target, Toolbox) else Toolbox.build(target)


def load_workflow(spec: str) -> type:
    """Import `module:Class` and return the workflow class it names (a user's workflow
    on the saga API, run by this worker beside AgentSaga)."""
    target = _import_attr(spec, "--workflow")
    if not isinstance(target, type) or not hasattr(target, "__temporal_workflow_definition"):
        raise ToolboxImportError(f"{spec!r} is not a @workflow.defn class")
    return target


async def connect(settings: Settings) -> Client:
    """A client using the pydantic data converter, as every sagacity worker and caller must
    (worker.converter's form of it, which a worker builds once rather than per saga), to
    the server Temporal's environment configuration names (address, namespace, API key,
    TLS: worker._temporal_env) unless the settings' --address / --namespace say otherwise."""
    config = settings.temporal_config()
    return await Client.connect(
        config.pop("target_host"), data_converter=SAGA_DATA_CONVERTER, **config
    )


class SagaWorker:
    """A saga worker: one Temporal worker with SagacityPlugin (worker.plugin).

    It polls the task queue sagas are started on (workflows and their activities): a new
    saga's first workflow task pins the identity of the worker that runs it (its toolbox
    and journal, see activities.identity), and every activity checks it. While it runs,
    the plugin runs a second worker on the queue of this identity only: an activity that
    reached a worker with another toolbox or journal is refused there before it does
    anything and runs again on that queue, so a second worker with another toolbox on the
    same task queue can never run, or journal, another saga's step. (Routing every
    activity through the identity queue would cost Temporal's eager dispatch, measured at
    ~25 ms a step; moving the workflow there by continue-as-new costs ~1 s, the server's
    minimum interval between runs of one workflow id.)"""

    def __init__(self, worker: Worker, plugin: SagacityPlugin) -> None:
        self.worker = worker
        self.plugin = plugin

    @property
    def identity(self) -> str:
        return self.plugin.identity

    @property
    def task_queue(self) -> str:
        return self.worker.task_queue

    @property
    def activity_task_queue(self) -> str:
        return activity_queue(self.worker.task_queue, self.identity)

    async def __aenter__(self) -> SagaWorker:
        await self.worker.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.worker.__aexit__(None, None, None)

    async def run(self) -> None:
        """Poll until shut down (or until the worker fails)."""
        await self.worker.run()

    async def shutdown(self) -> None:
        await self.worker.shutdown()


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
    register_attributes: bool = False,
    workflows: Sequence[type] = (),
    approvers: RegistryFile | Path | str | None = None,
    log_key: LogKeyChoice = DATA_HOME_KEY,
    checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
) -> SagaWorker:
    """The saga worker: AgentSaga, the user's `workflows` on the saga API and the saga
    activities, through SagacityPlugin. The client must use the pydantic data converter
    (see `connect`). The worker signs checkpoints of its sagas' chains into the
    journal's checkpoint log (sagacity.tlog._log) with `log_key`: by default the data
    home's key (made on first use), as SagacityPlugin's; None turns checkpoints off."""
    plugin = SagacityPlugin(
        store=store,
        toolbox=toolbox,
        models=models,
        register_attributes=register_attributes,
        approvers=approvers,
        log_key=log_key,
        checkpoint_every=checkpoint_every,
    )
    worker = Worker(
        client,
        task_queue=task_queue,
        plugins=[plugin],
        workflows=list(workflows),
        max_concurrent_activities=max_concurrent_activities,
        max_concurrent_workflow_tasks=max_concurrent_workflow_tasks,
        # Let running tool calls finish on shutdown: a call cut off mid-way is an unknown
        # outcome that needs a human. Production workers set this (Settings).
        graceful_shutdown_timeout=graceful_shutdown,
    )
    return SagaWorker(worker, plugin)
