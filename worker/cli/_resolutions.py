"""`sagacity dirty`, `resolve`, `retry-compensation` and `close --accept`: a person at a
terminal cleaning up a saga that needs a human.

`dirty` lists every saga flagged as needing a human with its dirty steps (what is known,
since when, what can be done), and every saga whose workflow ended without closing its
journal (worker.cli_ended), and says what it searched. The other three send one action
through SagaClient (its `resolve` update), named by `--actor` or signed with `--key`
(required where the worker has an approver registry), after showing the step and asking
for confirmation.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from sagacity._errors import SagacityError
from sagacity.approval._signing import SigningKey
from sagacity.journal._canonical import canonical_bytes
from sagacity.worker.cli._common import (
    Actor,
    JsonOpt,
    KeyFile,
    SagaId,
    SagasLimit,
    Yes,
    global_options,
    located,
    run,
    settings_of,
)
from sagacity.worker.cli._ended import dirty_rows, ended_lines, searched_note
from sagacity.worker.cli._output import console, fail, note, print_json, say
from sagacity.worker.cli._render import dirty_table
from sagacity.worker.cli._search import WorkflowTypeOpt, search_of
from sagacity.worker.cli._signed import ask, who_acts
from sagacity.worker.client._client import connect
from sagacity.worker.client._progress_follow import readable_journal
from sagacity.worker.client._resolutions import NeedingHuman, needing_human
from sagacity.worker.client._saga_client import SagaClient
from sagacity.workflows._models import DirtyStep, ResolutionResult

Step = Annotated[int, typer.Argument(min=1, help="the dirty step", show_default=False)]
Reason = Annotated[str, typer.Option(help="why: journaled with the action")]


@global_options
def dirty(
    ctx: typer.Context,
    limit: SagasLimit = 100,
    workflow_type: WorkflowTypeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Every saga that needs a human, with each dirty step: what is known and what to do;
    and every saga whose workflow ended without closing its journal (terminated, timed
    out), with its live steps read from the journal and the command that compensates it.
    Sagas of any workflow type on any task queue of the namespace, unless --task-queue
    or --workflow-type narrows the search. Says what it searched: Temporal, and the
    journal (--journal) when it can be read."""
    settings = settings_of(ctx)
    search = search_of(ctx, workflow_type)

    async def main() -> NeedingHuman:
        store, why_not = readable_journal(settings)
        try:
            return await needing_human(
                await connect(settings),
                store,
                limit=limit,
                search=search,
                journal_name=located(store) if store is not None else None,
                why_no_journal=why_not,
            )
        finally:
            if store is not None:
                store.close()

    found = run(main())
    flagged = [i for i in found if i.dirty or i.error is not None or i.ended is None]
    ended = [i.ended for i in found if i.ended is not None]
    if as_json:
        print_json(dirty_rows(found))
    elif not found:
        note("no saga needs a human")
    else:
        if flagged:
            console.print(dirty_table(flagged))
            note(
                "resolve with `sagacity resolve SAGA STEP --happened|--did-not-happen`, "
                "`sagacity retry-compensation SAGA STEP` or `sagacity close SAGA --accept REASON`"
            )
        if ended:
            for line in ended_lines(ended):
                console.print(line, soft_wrap=True)
            note(
                "their executed steps are live; `sagacity compensate` resets each ended run "
                "and cancels it, so the saga undoes them and closes its journal"
            )
    note(searched_note(found))


def _signer(actor: str | None, key: Path | None) -> tuple[SigningKey | None, str]:
    return who_acts(key, actor, "--actor", "this")


Send = Callable[[SagaClient, list[DirtyStep]], Awaitable[ResolutionResult]]


def _act(
    ctx: typer.Context,
    saga_id: str,
    step: int | None,
    who: tuple[SigningKey | None, str],
    question: str,
    yes: bool,
    send: Send,
    as_json: bool = False,
) -> None:
    """Show the dirty step(s), ask, send, say what the saga did: in one connection. With
    `as_json`, what the saga did is printed as JSON (the rest goes to stderr anyway)."""
    settings = settings_of(ctx)
    signer, actor = who

    async def main() -> ResolutionResult:
        client = SagaClient(await connect(settings), task_queue=settings.task_queue, signer=signer)
        listed = await client.dirty(saga_id)
        for d in listed:
            if step is None or d.step == step:
                args = json.dumps(d.args, ensure_ascii=False)
                note(f"step {d.step} ({d.tool} {args}): {d.kind.value}: {d.known}")
        if step is not None and all(d.step != step for d in listed):
            note(f"step {step} is not listed as dirty; the saga will refuse (and journal) this")
        if not ask(f"{question}, as {actor}?", yes):
            raise fail("nothing was sent")
        return await send(client, listed)

    result = run(main())
    if as_json:
        print_json(result.model_dump(mode="json"))
    else:
        _done(result, saga_id)


def _done(result: ResolutionResult, saga_id: str) -> None:
    what = f"step {result.step}" if result.step is not None else f"steps {result.steps}"
    left = f"; still dirty: {result.dirty}" if result.dirty else ""
    status = f"; saga {result.status.value}" if result.status is not None else ""
    say(
        f"{result.action} {what} of saga {saga_id} as {result.actor}: {result.outcome} "
        f"(journaled RESOLVED at seq {result.seq}){left}{status}"
    )


@global_options
def resolve(
    ctx: typer.Context,
    saga_id: SagaId,
    step: Step,
    happened: Annotated[
        bool | None,
        typer.Option(
            "--happened/--did-not-happen",
            help="the step's effect took place (it is then undone like any executed step, "
            "if it can be), or it did not (nothing to undo)",
            show_default=False,
        ),
    ] = None,
    result: Annotated[
        str | None,
        typer.Option(
            "--result",
            help="with --happened: the step's result as JSON (e.g. the "
            "payment id you found), what its compensation receives",
        ),
    ] = None,
    reason: Reason = "",
    actor: Actor = None,
    key: KeyFile = None,
    yes: Yes = False,
    as_json: JsonOpt = False,
) -> None:
    """Say what became of a step whose outcome is unknown."""
    if happened is None:
        raise fail("say what happened: --happened or --did-not-happen")
    parsed: Any = None
    if result is not None:
        if not happened:
            raise fail("--result goes with --happened (a step that did not happen has none)")
        try:
            parsed = json.loads(result)
            canonical_bytes(parsed, what="--result")  # signed and journaled as one value
        except json.JSONDecodeError as exc:
            raise fail(f"--result is not JSON: {exc}") from None
        except SagacityError as exc:
            raise fail(f"{exc}; write such numbers as strings") from None
    who = _signer(actor, key)
    verb = "happened" if happened else "did not happen"
    _act(
        ctx, saga_id, step, who, f"record that step {step} of saga {saga_id} {verb}", yes,
        lambda client, _: client.resolve(
            saga_id, step, happened=happened, result=parsed, reason=reason, actor=who[1]
        ),
        as_json,
    )  # fmt: skip


@global_options
def retry_compensation(
    ctx: typer.Context,
    saga_id: SagaId,
    step: Step,
    reason: Reason = "",
    actor: Actor = None,
    key: KeyFile = None,
    yes: Yes = False,
    as_json: JsonOpt = False,
) -> None:
    """Run a step's failed compensation again (same idempotency key)."""
    who = _signer(actor, key)
    _act(
        ctx, saga_id, step, who, f"retry the compensation of step {step} of saga {saga_id}", yes,
        lambda client, _: client.retry_compensation(saga_id, step, reason=reason, actor=who[1]),
        as_json,
    )  # fmt: skip


@global_options
def close(
    ctx: typer.Context,
    saga_id: SagaId,
    accept: Annotated[
        str,
        typer.Option(
            "--accept",
            help="why the remaining dirty steps are accepted as they are (journaled)",
            show_default=False,
        ),
    ],
    actor: Actor = None,
    key: KeyFile = None,
    yes: Yes = False,
    as_json: JsonOpt = False,
) -> None:
    """Close a saga that needs a human, accepting its remaining dirty steps as they are."""
    if not accept.strip():
        raise fail("--accept needs a reason: it is journaled with the acceptance")
    who = _signer(actor, key)
    _act(
        ctx, saga_id, None, who, f"close saga {saga_id} accepting its dirty steps as they are",
        yes,
        lambda client, listed: client.accept(
            saga_id, reason=accept, steps=[d.step for d in listed], actor=who[1]
        ),
        as_json,
    )  # fmt: skip
