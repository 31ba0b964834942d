"""`sagacity start`: a saga started from a plan file or a goal, and followed until it
closes when asked to wait (`--wait`)."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from sagacity._errors import SagacityError
from sagacity.approval._signing import SigningKey
from sagacity.approval._statements import signed_request
from sagacity.journal._phases import SagaStatus
from sagacity.text._terminal_safe import json_line, neutralized
from sagacity.worker._settings import Settings
from sagacity.worker.cli._common import JsonOpt, global_options, run, settings_of
from sagacity.worker.cli._output import console, fail, note, say
from sagacity.worker.cli._progress_view import ProgressPrinter
from sagacity.worker.cli._render import saga_overview, steps_table
from sagacity.worker.cli._sagas import _closed_view
from sagacity.worker.client._client import (
    NoWorkerError,
    SagaHandle,
    SagaSummary,
    connect,
    describe_saga,
    start_saga,
)
from sagacity.worker.client._progress_follow import follow, readable_journal
from sagacity.worker.client._task_queues import require_pollers, task_queue_pollers
from sagacity.workflows._models import (
    ModelSettings,
    RequesterClaim,
    SagaInput,
    SagaResult,
)
from sagacity.workflows._start_input import check_start_fields


def _validation_message(source: str, exc: ValidationError) -> str:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}"
        for e in exc.errors(include_url=False)[:5]
    )
    return f"{source} is not a valid saga input: {problems}"


def read_plan(path: Path, settings: Settings, approvers: list[str] | None) -> SagaInput:
    """A plan file: a JSON list of {"tool", "args"} calls, or a full SagaInput object.

    Either form takes SAGACITY_APPROVAL_TIMEOUT_SECONDS unless the object names its own
    `approval_timeout_seconds`: the setting is the operator's default for every saga the
    CLI starts, whatever the shape of the file."""
    source = "stdin" if str(path) == "-" else str(path)
    try:
        text = sys.stdin.read() if source == "stdin" else path.read_text(encoding="utf-8")
    except OSError as exc:
        raise fail(f"cannot read plan {source}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise fail(f"{source} is not JSON: {exc.msg} at {where}") from None
    if isinstance(data, list):  # the short form: just the plan
        data = {"plan": data}
    if not isinstance(data, dict):
        raise fail(f"{source} must hold a list of tool calls or a saga input object")
    try:  # the start door's own checks, on the file as written (unknown fields included)
        check_start_fields(data)
    except SagacityError as exc:
        raise fail(f"{source}: {exc}") from None
    if "approval_timeout_seconds" not in data:
        data = {**data, "approval_timeout_seconds": settings.approval_timeout_seconds}
    try:
        inp = SagaInput.model_validate_json(json.dumps(data), strict=True)  # no coercion
    except ValidationError as exc:
        raise fail(_validation_message(source, exc)) from None
    return inp.model_copy(update={"approvers": approvers}) if approvers else inp


SCRIPTED_PROVIDER = "scripted"
OPENAI_PROVIDER = "openai"


def goal_model(settings: Settings, provider: str, model: str | None) -> ModelSettings:
    """The model of a `--goal` saga, refused here, before anything starts, when no model
    could answer it: a saga started without one would only fail at its first turn.

    The worker and the CLI read the same SAGACITY_OPENAI_* settings (environment or .env);
    the 'openai' provider needs at least a model name, given here or there. Other provider
    names are registered in code (`new_worker(models=...)`) and are passed through."""
    if provider == SCRIPTED_PROVIDER:
        raise fail(
            "the 'scripted' provider plays turns written in the saga input, which --goal "
            "cannot carry; write a saga input file with goal, model.provider 'scripted' and "
            "model.script, and start it with --plan FILE"
        )
    name = model or settings.openai_model
    if provider == OPENAI_PROVIDER and not name:
        raise fail(
            "no model provider configured for --goal: the 'openai' provider needs a model "
            "name; give --model NAME or set SAGACITY_OPENAI_MODEL, and point the worker at "
            "the provider (SAGACITY_OPENAI_BASE_URL for a local server such as Ollama, "
            "SAGACITY_OPENAI_API_KEY for OpenAI). Nothing was started"
        )
    return ModelSettings(provider=provider, model=name)


@global_options
def start(
    ctx: typer.Context,
    plan: Annotated[
        Path | None,
        typer.Option(
            "--plan",
            help='JSON file ("-" for stdin): a list of {"tool", "args"} or a full SagaInput',
        ),
    ] = None,
    goal: Annotated[str | None, typer.Option(help="the goal for a model-driven saga")] = None,
    saga_id: Annotated[str | None, typer.Option("--id", help="saga id (default: random)")] = None,
    allow_approver: Annotated[
        list[str] | None,
        typer.Option("--allow-approver", help="only these approvers may decide (repeatable)"),
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="model name for --goal \\[env: SAGACITY_OPENAI_MODEL]")
    ] = None,
    provider: Annotated[str, typer.Option(help="model provider for --goal")] = OPENAI_PROVIDER,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="follow the saga step by step until it closes, then print its result "
            "(refused when no worker polls the queue)",
        ),
    ] = False,
    as_json: JsonOpt = False,
    key: Annotated[
        Path | None,
        typer.Option(
            "--key",
            envvar="SAGACITY_KEY",
            show_envvar=False,
            help="your signing key file: you are the saga's signed requester (needed where "
            "the worker has an approver registry) \\[env: SAGACITY_KEY]",
        ),
    ] = None,
) -> None:
    """Start a saga from a plan file or a goal and print its id.

    With --wait, follow it live: each step as it is journaled (the approval it waits
    for, with the payload, its SHA-256 and the commands that decide it; the
    compensations), then its result; exit 0 only if it COMPLETED. With --wait --json,
    stdout is JSON Lines: a "started" event, one "progress" event per step, the "result".
    """
    settings = settings_of(ctx)
    if (plan is None) == (goal is None):
        raise fail("give exactly one of --plan FILE or --goal TEXT")
    if plan is not None:
        inp = read_plan(plan, settings, allow_approver)
    else:
        inp = SagaInput(
            goal=goal,
            model=goal_model(settings, provider, model),
            approval_timeout_seconds=settings.approval_timeout_seconds,
            approvers=allow_approver,
        )
    sid = saga_id or f"saga-{uuid.uuid4().hex[:12]}"
    if key is not None:
        try:
            signer = SigningKey.from_file(key)
        except SagacityError as exc:
            raise fail(str(exc)) from None
        claim = RequesterClaim.model_validate(signed_request(signer, sid))
        inp = inp.model_copy(update={"requester": claim})

    async def main() -> tuple[SagaResult | None, SagaSummary | None]:
        client = await connect(settings)
        if wait:  # waiting on a queue nobody polls would hang in silence: refuse first
            try:
                await require_pollers(client, settings.task_queue)
            except NoWorkerError as exc:
                raise NoWorkerError(f"{exc}. Not started: --wait would wait for ever") from None
        handle = await start_saga(client, inp, saga_id=sid, task_queue=settings.task_queue)
        printer = ProgressPrinter(console, sid, as_json=as_json)
        if wait and as_json:
            printer.started(settings.task_queue)
        else:
            say(sid)
        note(
            f"started saga {sid} on task queue {settings.task_queue}; follow it with "
            f"`sagacity status {sid}`",
        )
        if not wait:
            if not await task_queue_pollers(client, settings.task_queue):
                note(
                    f"warning: no worker polls task queue {settings.task_queue}; saga {sid} "
                    "waits until one does (`sagacity worker`)"
                )
            return None, None
        result = await _follow_until_closed(handle, settings, printer)
        # What Temporal says of the closed workflow, as `sagacity status` shows it (a
        # saga that did not complete fails its workflow): nothing taken from the settings.
        return result, await describe_saga(handle)

    result, summary = run(main())
    if not wait:
        return
    if result is None or summary is None:
        raise fail(f"saga {sid} was cancelled or terminated; see `sagacity journal {sid}`")
    if as_json:
        typer.echo(json_line({"event": "result", "result": result.model_dump(mode="json")}))
    else:
        shown = SagaResult.model_validate(neutralized(result.model_dump(mode="json")))
        console.print(saga_overview(summary, shown))
        if shown.steps:  # a plan refused before its first step has none: the overview says why
            console.print(steps_table(shown.steps))
    if result.status is not SagaStatus.COMPLETED:
        raise typer.Exit(1)


async def _follow_until_closed(
    handle: SagaHandle, settings: Settings, printer: ProgressPrinter
) -> SagaResult | None:
    """Show the saga's progress (worker.progress_follow: its journal, or its workflow's
    queries) until its workflow closes, then return its result."""
    store, why_not = readable_journal(settings)
    if store is None:
        note(f"{why_not}; following saga {handle.id} through its workflow's queries")
    closed = asyncio.ensure_future(_closed_view(handle))
    try:
        with printer.live():
            async for event in follow(handle, closed, store, note=note):
                printer.show(event)
        return await closed
    finally:
        closed.cancel()
        if store is not None:
            store.close()
