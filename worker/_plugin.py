"""SagacityPlugin: sagacity added to an existing Temporal client and worker.

    plugin = SagacityPlugin(store=open_store(url), toolbox=Toolbox.build(Shop()))
    config = ClientConfig.load_client_connect_config()  # TEMPORAL_ADDRESS, profiles, TLS
    config.setdefault("target_host", "localhost:7233")
    client = await Client.connect(**config, plugins=[plugin])
    worker = Worker(client, task_queue="orders", workflows=[OrderWorkflow])

Given to the client, the plugin applies to every worker built from it; given to a worker
only, that worker's client must already use the pydantic data converter (the plugin
says so at construction otherwise). It sets:

- the data converter: Temporal's pydantic payload converter (a codec or failure
  converter the client already has is kept);
- the sandbox: our modules and their libraries passed through (re-importing them per
  workflow run was measured at 10-30 ms of CPU per saga);
- the activities, bound to one journal store and one toolbox; and AgentSaga among the
  workflows unless `agent_saga=False`;
- while the worker runs, a second worker on the queue of this worker's identity (its
  toolbox and journal): an activity that reached a worker with another toolbox is
  refused there and runs again on that queue (see activities.identity);
- at worker start, the SagaStatus and SagaNeedsHuman search attributes, registered when
  the server lets it (a managed namespace has them registered by an operator);
- checkpoints: the saga activities sign checkpoints of chain heads with `log_key`, by
  default the data home's key (made on first use, see worker._log_keys), so `sagacity
  verify` checks this worker's sagas with no set-up; `log_key=None` turns them off, and
  verify then reports the journal as written without checkpoints by choice;
- when built, the approver registry held to the newest one its journal records: an
  older file (a revocation undone) refuses the start with RegistryRolledBackError.

The user's own workflows and activities stay on the worker, on its own task queue.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import DataConverter
from temporalio.plugin import SimplePlugin
from temporalio.worker import Worker, WorkerConfig, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from sagacity._errors import SagacityError
from sagacity.activities import SagaActivities, activity_queue
from sagacity.activities._checkpointing import DEFAULT_CHECKPOINT_EVERY
from sagacity.activities._model_clients import ModelClient
from sagacity.approval._registry_file import RegistryFile
from sagacity.stores import JournalStore
from sagacity.tlog._note_keys import NoteSigner
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._log_keys import DATA_HOME_KEY, LogKeyChoice, resolve_log_key
from sagacity.worker._search_attributes import register_search_attributes
from sagacity.workflows._agent_saga import AgentSagaWorkflow

PLUGIN_NAME = "sagacity.SagacityPlugin"
PASSTHROUGH = (
    "sagacity",
    "pydantic",
    "pydantic_core",
    "rfc8785",
    "cryptography",
    # What a passkey decision's check uses (sagacity.approval._passkey_check): the webauthn
    # package and the libraries it imports.
    "webauthn",
    "cbor2",
    "OpenSSL",
    "pyasn1",
    "pyasn1_modules",
)
"""Our modules and their libraries are passed through the sandbox instead of re-imported
for every workflow run. Measured (docs/benchmarks.md): re-importing the workflow modules
per run cost 10-30 ms of CPU per saga and ~170 KiB per cached saga. The guard against
nondeterministic edits is then the replay tests over recorded histories."""
_PINNED_COPIED = ("max_concurrent_activities", "graceful_shutdown_timeout", "identity")
"""Worker settings the identity queue's worker takes from the worker it serves."""


class PluginConfigError(SagacityError):
    """The worker cannot run sagas as configured (its client's data converter, no store
    or toolbox)."""


def saga_converter(existing: DataConverter | None) -> DataConverter:
    """The pydantic payload converter, keeping the codec and failure converter given. A
    subclass of it already chosen (Pydantic AI's plugin sets its own) is kept, so the
    order of the client's plugins does not matter."""
    if existing is None:
        existing = DataConverter.default
    if issubclass(existing.payload_converter_class, PydanticPayloadConverter):
        return existing
    return dataclasses.replace(existing, payload_converter_class=PydanticPayloadConverter)


def saga_runner(existing: WorkflowRunner | None) -> WorkflowRunner:
    """The sandbox with our modules passed through (an unsandboxed runner is kept)."""
    if existing is None or isinstance(existing, SandboxedWorkflowRunner):
        base = existing.restrictions if existing else SandboxRestrictions.default
        runner = existing or SandboxedWorkflowRunner()
        return dataclasses.replace(runner, restrictions=base.with_passthrough_modules(*PASSTHROUGH))
    return existing


def _registry(approvers: RegistryFile | Path | str | None) -> RegistryFile | None:
    """The approver registry to judge decisions with (a path is loaded now: a bad file,
    or one older than a registry the journal records, fails the worker's start, not a
    decision)."""
    if approvers is None or isinstance(approvers, RegistryFile):
        return approvers
    return RegistryFile(Path(approvers))


class SagacityPlugin(SimplePlugin):
    """Sagacity's activities, converter, sandbox settings and search attributes, for a
    client (and the workers built from it) or for one worker."""

    def __init__(
        self,
        *,
        store: JournalStore | None = None,
        toolbox: Toolbox | None = None,
        models: Mapping[str, ModelClient] | None = None,
        approvers: RegistryFile | Path | str | None = None,
        log_key: LogKeyChoice = DATA_HOME_KEY,
        checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
        agent_saga: bool = True,
        identity_queue: bool = True,
        register_attributes: bool = True,
    ) -> None:
        registry = _registry(approvers)
        if registry is not None and store is not None:
            # A registry older than one the journal records would undo its revocations:
            # refused here, before anything polls (RegistryRolledBackError names both).
            registry.guard(store.registry_marks, store.url)
        self.saga_activities: SagaActivities | None = None
        self.log_key: NoteSigner | None = None
        """The key this worker signs checkpoints with; None: checkpoints off, by choice."""
        if store is not None and toolbox is not None:
            self.log_key = resolve_log_key(log_key)
            self.saga_activities = SagaActivities(
                store,
                toolbox,
                models,
                registry=registry,
                checkpoints=store.checkpoint_log(self.log_key) if self.log_key else None,
                checkpoint_every=checkpoint_every,
            )
        """None for a plugin made for a client or a replayer only (no store or toolbox)."""
        self._identity_queue = identity_queue
        self._register_attributes = register_attributes
        self._pinned_queues: set[str] = set()
        super().__init__(
            PLUGIN_NAME,
            data_converter=saga_converter,
            workflows=[AgentSagaWorkflow] if agent_saga else None,
            workflow_runner=saga_runner,
        )

    @property
    def identity(self) -> str:
        """This worker's identity: a hash of its toolbox and journal (activities.identity)."""
        return self._activities().identity

    def _activities(self) -> SagaActivities:
        if self.saga_activities is None:
            raise PluginConfigError(
                "this SagacityPlugin has no journal store or toolbox, so it can configure "
                "clients and replayers but not a worker: give it store= and toolbox="
            )
        return self.saga_activities

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        existing = list(config.get("activities") or [])
        ours = [a for a in self._activities().all() if a not in existing]
        config["activities"] = existing + ours
        if config.get("task_queue") in self._pinned_queues:
            return config  # the identity queue's worker: activities only
        converter = config["client"].data_converter
        if not issubclass(converter.payload_converter_class, PydanticPayloadConverter):
            raise PluginConfigError(
                "sagas need the pydantic data converter, and this worker's client does not "
                "use it: connect the client with plugins=[SagacityPlugin(...)] (or with "
                "data_converter=pydantic_data_converter)"
            )
        config = super().configure_worker(config)
        # The same plugin given to the client and the worker adds its workflows twice.
        workflows = list(config.get("workflows") or [])
        config["workflows"] = [w for i, w in enumerate(workflows) if w not in workflows[:i]]
        return config

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        if worker.task_queue in self._pinned_queues:
            await next(worker)
            return
        if self._register_attributes:
            await register_search_attributes(worker.client)
        if not self._identity_queue:
            await next(worker)
            return
        async with self.identity_worker(worker.client, worker.task_queue, worker.config()):
            await next(worker)

    def identity_worker(
        self, client: Client, task_queue: str, settings: Mapping[str, Any] | None = None
    ) -> Worker:
        """The worker of this identity's own queue for sagas started on `task_queue`."""
        queue = activity_queue(task_queue, self.identity)
        self._pinned_queues.add(queue)
        copied = {k: v for k, v in (settings or {}).items() if k in _PINNED_COPIED and v}
        from_client = self in client.config().get("plugins", [])
        return Worker(client, task_queue=queue, plugins=[] if from_client else [self], **copied)
