"""Saga commands: status, list, pending, cancel (`start`: worker.cli._start; approvals:
worker.cli._approvals).

They talk to Temporal only, through worker.client; what needs no worker (visibility,
describe, the result of a closed saga) is read without one.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError

from sagacity._errors import SagacityError
from sagacity.journal._phases import SagaStatus
from sagacity.worker.cli._common import (
    Actor,
    JsonOpt,
    SagaId,
    SagasLimit,
    global_options,
    run,
    settings_of,
)
from sagacity.worker.cli._output import console, fail, note, print_json, say
from sagacity.worker.cli._render import pending_list, saga_overview, sagas_table, steps_table
from sagacity.worker.cli._search import WorkflowTypeOpt, search_of
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
)
from sagacity.worker.client._saga_runs import cancel_request, saga_run
from sagacity.workflows._models import (
    SagaResult,
    SagaView,
    StepReport,
)

RUNNING = WorkflowExecutionStatus.RUNNING.name
COMPLETED = WorkflowExecutionStatus.COMPLETED.name
FAILED = WorkflowExecutionStatus.FAILED.name


def _summary_json(summary: SagaSummary) -> dict[str, Any]:
    data = asdict(summary)
    for key in ("started", "closed"):
        data[key] = data[key].isoformat() if data[key] else None
    return data


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
    limit: SagasLimit = 100,
    workflow_type: WorkflowTypeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Every saga awaiting approval, with the tool, the exact payload and its hash: sagas
    of any workflow type (AgentSaga and your own) on any task queue of the namespace,
    unless --task-queue or --workflow-type narrows the list. Says what it searched."""
    from sagacity.worker.client._pending_list import pending_page

    settings = settings_of(ctx)
    search = search_of(ctx, workflow_type)

    async def main() -> Any:
        return await pending_page(await connect(settings), search, limit=limit)

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
            note(page.empty_note())
    elif not items:
        note(page.empty_note())
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
