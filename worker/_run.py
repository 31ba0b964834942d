"""Running a worker process until it is told to stop."""

from __future__ import annotations

import asyncio
import signal
from datetime import timedelta
from pathlib import Path

from sagacity.activities._openai_model import OpenAIChatModel
from sagacity.approval._registry_file import RegistryFile
from sagacity.stores import open_store
from sagacity.worker._app import connect, load_toolbox, load_workflow, new_worker
from sagacity.worker._log_keys import worker_log_key
from sagacity.worker._quiet_failures import quiet_expected_failures
from sagacity.worker._search_attributes import register_search_attributes
from sagacity.worker._settings import Settings, journal_location

OPENAI_BASE_URL = "https://api.openai.com/v1"
CHECKPOINTS_OFF = (
    "checkpoints off by choice (SAGACITY_CHECKPOINTS=off): sagas close unsigned, so only "
    "their hash chains vouch (a cut tail or a recomputed chain would not show)"
)


def openai_model(settings: Settings) -> OpenAIChatModel | None:
    """The 'openai' model provider, when any SAGACITY_OPENAI_* setting asks for one.

    A base URL alone is enough for a local server (Ollama, vLLM, llama.cpp); a key or a
    model without a base URL means OpenAI itself.
    """
    if not (settings.openai_base_url or settings.openai_api_key or settings.openai_model):
        return None
    key = settings.openai_api_key
    return OpenAIChatModel(
        base_url=settings.openai_base_url or OPENAI_BASE_URL,
        api_key=key.get_secret_value() if key is not None else None,
        model=settings.openai_model,
        timeout=settings.openai_timeout_seconds,
        allowed_base_urls=settings.openai_allowed_base_urls,
    )


async def run_worker(settings: Settings, *, ready: asyncio.Event | None = None) -> None:
    """Open the journal first (a journal that cannot be opened stops the start before any
    task is polled: no half-started worker), then poll until SIGINT/SIGTERM."""
    settings.prepare_home()
    store = open_store(settings.journal_url)
    quiet_expected_failures()
    model: OpenAIChatModel | None = None
    try:
        model = openai_model(settings)
        toolbox = load_toolbox(settings.tools)
        workflows = [load_workflow(spec) for spec in settings.workflows]
        client = await connect(settings)
        await register_search_attributes(client)
        registry = RegistryFile(Path(settings.approvers)) if settings.approvers else None
        log_key = worker_log_key(settings, create=True)
        worker = new_worker(
            client,
            store=store,
            toolbox=toolbox,
            approvers=registry,
            log_key=log_key,
            checkpoint_every=settings.checkpoint_every,
            workflows=workflows,
            task_queue=settings.task_queue,
            models={"openai": model} if model is not None else None,
            max_concurrent_activities=settings.max_concurrent_activities,
            max_concurrent_workflow_tasks=settings.max_concurrent_workflow_tasks,
            graceful_shutdown=timedelta(seconds=settings.graceful_shutdown_seconds),
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with worker:
            print(
                f"sagacity worker: task queue {settings.task_queue!r} on "
                f"{settings.temporal_address}, journal {journal_location(store.url)}, "
                f"tools {toolbox.names()}, "
                f"workflows {['AgentSaga', *(w.__name__ for w in workflows)]}, "
                f"openai model provider: {model.base_url if model else 'not configured'}, "
                + (
                    f"approver registry {registry.path} (version {registry.current().version}): "
                    "only signed decisions count"
                    if registry
                    else "no approver registry: decisions are not signed (see `sagacity keys`)"
                )
                + (
                    f", checkpoints signed by log {log_key.name} ({log_key.verifier.encode()})"
                    if log_key is not None
                    else f", {CHECKPOINTS_OFF}"
                ),
                flush=True,
            )
            if ready is not None:
                ready.set()
            await stop.wait()
    finally:
        if model is not None:
            await model.aclose()
        store.close()
