"""Saga commands: start, status, list, pending, cancel. (Approvals: worker.cli_approvals.)

They talk to Temporal only, through worker.client; what needs no worker (visibility,
describe, the result of a closed saga) is read without one.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError

from sagacity._errors import SagacityError
from sagacity.approval._signing import SigningKey
from sagacity.approval._statements import signed_request
from sagacity.journal._phases import SagaStatus
from sagacity.text._terminal_safe import json_line, neutralized
from sagacity.worker._settings import Settings
from sagacity.worker.cli._common import (
    Actor,
    JsonOpt,
    SagaId,
    console,
    fail,
    global_options,
    note,
    print_json,
    run,
    say,
    settings_of,
)
from sagacity.worker.cli._progress_view import ProgressPrinter
from sagacity.worker.cli._render import pending_list, saga_overview, sagas_table, steps_table
from sagacity.worker.client._client import (
    NoWorkerError,
    SagaHandle,
    SagaSummary,
    cancel_reason,
    cancel_saga,
    connect,
    describe_saga,
    list_sagas,
    saga_handle,
    saga_result,
    saga_steps,
    saga_view,
    start_saga,
)
from sagacity.worker.client._progress_follow import follow, readable_journal
from sagacity.worker.client._saga_runs import cancel_request, saga_run
from sagacity.worker.client._task_queues import require_pollers, task_queue_pollers
from sagacity.workflows._models import (
    ModelSettings,
    RequesterClaim,
    SagaInput,
    SagaResult,
    SagaView,
    StepReport,
)
from sagacity.workflows._start_input import check_start_fields

RUNNING = WorkflowExecutionStatus.RUNNING.name
COMPLETED = WorkflowExecutionStatus.COMPLETED.name
FAILED = WorkflowExecutionStatus.FAILED.name


def _summary_json(summary: SagaSummary) -> dict[str, Any]:
    data = asdict(summary)
    for key in ("started", "closed"):
        data[key] = data[key].isoformat() if data[key] else None
    return data


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


async def _announce_approval(handle: SagaHandle) -> None:
    """While --wait waits, say once each when the saga starts waiting for a human: for an
    approval, or to resolve its dirty state."""
    said: set[str] = set()
    hints = {
        SagaStatus.AWAITING_APPROVAL.value: f"saga {handle.id} awaits approval: `sagacity "
        f"pending`, then `sagacity approve {handle.id}` or `sagacity reject {handle.id}`",
        SagaStatus.NEEDS_HUMAN.value: f"saga {handle.id} needs a human (an unknown outcome or "
        f"a failed compensation): `sagacity dirty`, then `sagacity resolve {handle.id} STEP "
        "...`, `retry-compensation` or `close --accept`",
    }
    while len(said) < len(hints):
        await asyncio.sleep(1.0)
        try:
            summary = await describe_saga(handle)
        except SagacityError:
            return  # only a hint; the wait itself reports real trouble
        if summary.status in hints and summary.status not in said:
            said.add(summary.status)
            note(hints[summary.status])


async def _closed_view(handle: SagaHandle) -> SagaResult | None:
    """The result of a saga that ended with one (completed or compensated); None when it
    was cancelled or terminated (those end without a result)."""
    try:
        return await saga_result(handle)
    except WorkflowFailureError:
        return None


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

    async def main() -> SagaResult | None:
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
            return None
        return await _follow_until_closed(handle, settings, printer)

    result = run(main())
    if not wait:
        return
    if result is None:
        raise fail(f"saga {sid} was cancelled or terminated; see `sagacity journal {sid}`")
    if as_json:
        typer.echo(json_line({"event": "result", "result": result.model_dump(mode="json")}))
    else:
        shown = SagaResult.model_validate(neutralized(result.model_dump(mode="json")))
        console.print(saga_overview(_result_summary(shown, settings), shown))
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


def _result_summary(result: SagaResult, settings: Settings) -> SagaSummary:
    return SagaSummary(
        saga_id=result.saga_id,
        run_id=None,
        status=result.status.value,
        execution_status=COMPLETED,
        needs_human=result.needs_human,
        started=None,
        closed=None,
        task_queue=settings.task_queue,
    )


@global_options
def status(ctx: typer.Context, saga_id: SagaId, as_json: JsonOpt = False) -> None:
    """Show a saga: status, steps, pending approval, failure, compensations (and, for a
    cancelled saga, who asked and why)."""
    settings = settings_of(ctx)

    async def main() -> tuple[SagaSummary, SagaView | SagaResult | None, list[StepReport], str]:
        handle, skipped = await saga_run(await connect(settings), saga_id)
        if skipped:
            note(
                f"{len(skipped)} later run(s) of workflow {saga_id} (run {skipped[0]}) were "
                "started under the saga's id outside sagacity and refused (SagaIdReused); "
                "showing the saga's own run"
            )
        summary = await describe_saga(handle)
        if summary.execution_status == RUNNING:
            try:
                view = await saga_view(handle)
                return summary, view, await saga_steps(handle), ""
            except NoWorkerError as exc:
                return summary, None, [], f"{exc}; showing what visibility knows"
        if summary.execution_status in (COMPLETED, FAILED):  # a saga that did not complete
            # fails its workflow, with its result in the failure
            try:
                result = await _closed_view(handle)
            except ValidationError:  # a workflow of the user's own returns its own result
                return (
                    summary,
                    None,
                    [],
                    (
                        f"workflow {saga_id} completed with a result of its own (a workflow on "
                        f"the saga API); its journal has every step: `sagacity journal {saga_id}`"
                    ),
                )
            if result is not None:
                return summary, result, result.steps, ""
        remark = (
            f"the saga ended {summary.execution_status} without a result; its journal has "
            f"every step: `sagacity journal {saga_id}`"
        )
        request = await cancel_request(handle)
        if request is not None:
            why = request.reason or "with no reason given"
            said = why if why.startswith("by ") else f"({why})"
            remark = f"cancel requested {said} (client {request.identity}); {remark}"
        return summary, None, [], remark

    summary, view, steps, remark = run(main())
    if as_json:
        data = _summary_json(summary)
        if view is not None:
            data.update(view.model_dump(mode="json", exclude={"steps"}))
        data["steps"] = [s.model_dump(mode="json") for s in steps]
        data["remark"] = remark or None
        print_json(data)
    else:
        console.print(saga_overview(summary, view))
        if steps:
            console.print(steps_table(steps))
    if remark and not as_json:
        note(remark)


@global_options
def list_cmd(
    ctx: typer.Context,
    status_filter: Annotated[
        SagaStatus | None,
        typer.Option("--status", case_sensitive=False, help='filter: SagaStatus="..."'),
    ] = None,
    needs_human: Annotated[
        bool, typer.Option("--needs-human", help="only sagas with an unknown outcome")
    ] = False,
    limit: Annotated[int, typer.Option(min=1, help="at most this many, newest first")] = 50,
    as_json: JsonOpt = False,
) -> None:
    """List sagas (a Temporal visibility query), newest first."""
    settings = settings_of(ctx)

    async def main() -> list[SagaSummary]:
        client = await connect(settings)
        return await list_sagas(
            client, status=status_filter, needs_human=True if needs_human else None, limit=limit
        )

    found = run(main())
    if as_json:
        print_json([_summary_json(s) for s in found])
    elif not found:
        note("no sagas match")
    else:
        console.print(sagas_table(found))


@global_options
def pending(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option(min=1, help="at most this many sagas")] = 100,
    as_json: JsonOpt = False,
) -> None:
    """Every saga awaiting approval, with the tool, the exact payload and its hash: sagas
    (AgentSaga and the configured --workflow types) on the configured task queue."""
    from sagacity.worker.client._pending_list import SagaScope, pending_page

    settings = settings_of(ctx)

    async def main() -> Any:
        scope = SagaScope.of_settings(settings)
        return await pending_page(await connect(settings), scope, limit=limit)

    page = run(main())
    items = page.items
    if as_json:
        print_json(
            [
                {
                    "saga_id": i.summary.saga_id,
                    "pending": i.pending.model_dump(mode="json") if i.pending else None,
                    "error": i.error,
                }
                for i in items
            ]
        )
        if page.more:
            note(page.more_note())
    elif not items:
        note("no saga is awaiting approval")
    else:
        console.print(pending_list(items))
        if page.more:
            note(page.more_note())
        note(
            "decide with `sagacity approve SAGA_ID` or `sagacity reject SAGA_ID --reason ...`",
        )


@global_options
def cancel(
    ctx: typer.Context,
    saga_id: SagaId,
    reason: Annotated[
        str,
        typer.Option(
            help="why: sent with the request, in Temporal's history and the saga's journal",
            show_default=False,
        ),
    ],
    actor: Actor = None,
    wait: Annotated[bool, typer.Option("--wait", help="wait until it has compensated")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Cancel a running saga: it compensates its executed steps in reverse order.

    Who asks (--actor) and why (--reason) go with the request: Temporal's history keeps
    them, the saga journals them in its close entry ("saga cancelled (by ACTOR: REASON)"),
    and `sagacity status` shows them.
    """
    if not reason.strip():
        raise fail("cancel needs a non-empty --reason: it is journaled")
    if not actor or not actor.strip():
        raise fail("cancel needs --actor NAME (or $SAGACITY_ACTOR): who asked is journaled")
    settings = settings_of(ctx)
    sent = cancel_reason(actor, reason)

    async def main() -> SagaSummary | None:
        handle = saga_handle(await connect(settings), saga_id)
        await cancel_saga(handle, reason=sent)
        (note if as_json else say)(
            f"cancel requested for saga {saga_id} ({sent}); it compensates its executed "
            "steps (a step whose outcome is unknown then waits for a person: `sagacity dirty`)"
        )
        if not wait:
            return None
        watcher = asyncio.ensure_future(_announce_approval(handle))
        try:
            await _closed_view(handle)
        finally:
            watcher.cancel()
        return await describe_saga(handle)

    closed = run(main())
    if as_json:
        print_json(
            {
                "saga_id": saga_id,
                "cancel_requested": True,
                "actor": actor,
                "reason": reason,
                "sent": sent,
                "closed": _summary_json(closed) if closed is not None else None,
            }
        )
    elif closed is not None:
        say(f"saga {saga_id} closed: {closed.status or closed.execution_status}")
