"""Sagas whose workflow ended without closing their journal, at a terminal: how `sagacity
dirty` shows them, and `sagacity compensate`.

A saga terminated, timed out or killed with its parent has executed steps that stay
live and a journal with no SAGA_CLOSED (worker.ended_sagas finds them). `dirty` lists
each with those steps, read from the journal, and the commands that resolve it, and
says what it searched: an empty list is never a silent one. `compensate` resets the
ended run and cancels it, so the saga's own cancellation path undoes the steps and
closes the journal (worker.saga_reset).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Annotated, Any

import typer
from rich.text import Text

from sagacity.journal._phases import Phase
from sagacity.stores import JournalStore
from sagacity.text._terminal_safe import printable
from sagacity.worker.cli._common import (
    Actor,
    JsonOpt,
    SagaId,
    Yes,
    global_options,
    located,
    open_journal,
    run,
    settings_of,
)
from sagacity.worker.cli._output import fail, note, print_json, say
from sagacity.worker.client._client import connect, describe_saga
from sagacity.worker.client._ended_sagas import EndedSaga, ended_json, ended_saga, live_lines
from sagacity.worker.client._resolutions import NeedingHuman
from sagacity.worker.client._saga_client import SagaClient
from sagacity.worker.client._saga_reset import CompensationStarted
from sagacity.worker.client._task_queues import task_queue_pollers

__all__ = ["compensate", "dirty_rows", "ended_lines", "searched_note"]


def _t(value: object, style: str = "") -> Text:
    return Text("" if value is None else printable(str(value)), style=style)


def ended_lines(items: Iterable[EndedSaga]) -> list[Text]:
    """Each saga whose workflow ended without SAGA_CLOSED, as lines: how it ended, each
    live step read from the journal, and the commands that resolve it (one a line, to
    paste). Plain lines, not a table: a command folded across cells cannot be pasted."""
    lines = [Text("ended without closing their journal (no SAGA_CLOSED):", style="bold")]
    for e in items:
        closed = e.summary.closed
        at = f" at {closed.strftime('%Y-%m-%d %H:%M:%S')} UTC" if closed else ""
        parent = f", a child of {e.parent_id}" if e.parent_id else ""
        said = f"; its saga said {e.summary.status}" if e.summary.status else ""
        head = Text()
        head.append(printable(e.saga_id), style="bold")
        head.append(printable(f"  {e.how}{at}{parent}{said}"), style="red")
        lines.append(head)
        lines += [_t(f"    {line}") for line in live_lines(e)]
        lines += [_t(f"    {e.note}", "yellow")] if e.note else []
        lines += [_t(f"    $ {command}", "cyan") for command in e.commands]
    return lines


def searched_note(found: NeedingHuman) -> str:
    """What was searched (and not), for the line under the list or in place of it."""
    said = "searched: " + "; ".join(found.searched)
    if found.not_searched:
        said += ". NOT searched: " + "; ".join(found.not_searched)
    return said


def _started_line(done: CompensationStarted) -> str:
    undo = ", ".join(str(s.step) for s in sorted(done.executed, key=lambda s: -s.seq))
    what = (
        f"it undoes its executed steps ({undo}) newest first, those whose tool can be undone"
        if undo
        else "nothing executed to undo"
    )
    return (
        f"saga {done.saga_id}: reset its run {done.ended.summary.run_id} (ended "
        f"{done.ended.summary.execution_status}) to event {done.reset_to_event} as run "
        f"{done.run_id}, and asked it to cancel ({done.reason}): {what}, and closes its "
        f"journal; follow with `sagacity journal {done.saga_id}`"
    )


async def _until_settled(
    client: SagaClient, store: JournalStore, done: CompensationStarted
) -> tuple[str, str]:
    """Wait until the saga closes its journal, waits for a person, or its run ends again
    without closing; return the status it settled in and that, in words."""
    handle = client.handle(done.saga_id)
    while True:
        head = await asyncio.to_thread(store.head, done.saga_id)
        if head is not None and head.phase is Phase.SAGA_CLOSED:
            closing = head.result if isinstance(head.result, dict) else {}
            status = str(closing.get("status", "?"))
            return status, f"closed {status} (SAGA_CLOSED at seq {head.seq})"
        if head is not None and head.phase is Phase.NEEDS_HUMAN:
            return "NEEDS_HUMAN", "waits for a person (NEEDS_HUMAN): see `sagacity dirty`"
        if not (await describe_saga(handle)).running:
            return "ENDED", "its run ended again without closing: run `sagacity compensate` again"
        await asyncio.sleep(0.25)


@global_options
def compensate(
    ctx: typer.Context,
    saga_id: SagaId,
    reason: Annotated[
        str,
        typer.Option(help="why: sent with the cancel, journaled in the saga's close entry"),
    ],
    actor: Actor = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="wait until it has compensated and closed")
    ] = False,
    yes: Yes = False,
    as_json: JsonOpt = False,
) -> None:
    """Compensate a saga whose workflow ended without closing its journal (terminated,
    timed out, killed with its parent): its run is reset to its last workflow task and
    cancelled at once, so the saga undoes its executed steps newest first and closes its
    journal. Needs the journal its worker writes (--journal) and a worker on its queue."""
    if not reason.strip():
        raise fail("compensate needs a non-empty --reason: it is journaled")
    if not actor or not actor.strip():
        raise fail("compensate needs --actor NAME (or $SAGACITY_ACTOR): who asked is journaled")
    settings = settings_of(ctx)

    async def main() -> tuple[CompensationStarted, tuple[str, str] | None]:
        store = open_journal(settings)
        try:
            client = SagaClient(await connect(settings), store=store)
            entries = await asyncio.to_thread(lambda: list(store.entries(saga_id)))
            ended = await ended_saga(client.temporal, store, saga_id, entries=entries)
            if ended is not None:
                note(f"saga {saga_id} ended {ended.how} (journal {located(store)}); live:")
                for line in live_lines(ended):
                    note(f"  {line}")
                _confirm(f"reset and cancel saga {saga_id} so it compensates, as {actor}?", yes)
                queue = ended.summary.task_queue
                if queue and not await task_queue_pollers(client.temporal, queue):
                    note(f"warning: no worker polls {queue}; the saga compensates once one does")
            done = await client.compensate(saga_id, reason=reason, actor=actor)
            settled = await _until_settled(client, store, done) if wait else None
            return done, settled
        finally:
            store.close()

    done, settled = run(main())
    if as_json:
        print_json(
            {
                "saga_id": saga_id,
                "run_id": done.run_id,
                "reset_to_event": done.reset_to_event,
                "reason": done.reason,
                "ended": ended_json(done.ended),
                "settled": settled[0] if settled else None,
            }
        )
    else:
        say(_started_line(done))
        if settled is not None:
            say(f"saga {saga_id} {settled[1]}")
    if settled is not None and settled[0] != "COMPENSATED":
        raise typer.Exit(1)


def _confirm(question: str, yes: bool) -> None:
    if yes:
        return
    try:
        confirmed = typer.confirm(question, default=False, err=True)
    except typer.Abort:
        confirmed = False
    if not confirmed:
        raise fail("nothing was done")


def dirty_rows(found: NeedingHuman) -> list[dict[str, Any]]:
    """`sagacity dirty --json`: one object per saga."""
    return [
        {
            "saga_id": i.summary.saga_id,
            "status": i.summary.status,
            "waiting": i.summary.running,
            "dirty": [d.model_dump(mode="json") for d in i.dirty],
            "error": i.error,
            "ended": ended_json(i.ended) if i.ended is not None else None,
        }
        for i in found
    ]
