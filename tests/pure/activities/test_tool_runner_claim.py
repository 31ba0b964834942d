"""The step claim meets a journal that drops the connection after committing INTENT.

Run through temporalio's ActivityEnvironment (a real activity context, no server). The
write's fate cannot be told from the error ("it may or may not have been written"): if
the attempt gave up, Temporal's next attempt would find this attempt's INTENT with no
outcome and call the step unknown although the tool never ran. So the claim is retried
in place, where the same attempt finds its own INTENT and keeps its claim.
"""

from __future__ import annotations

from typing import Any

from temporalio.testing import ActivityEnvironment

from sagacity._errors import JournalWriteError
from sagacity.activities._models import OutcomeKind, RunToolInput, ToolCall
from sagacity.activities._tool_runner import ToolRunner
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import MemoryJournalStore
from sagacity.stores._base import StepClaim
from sagacity.tools._decorators import ToolContext, tool
from sagacity.tools._toolbox import Toolbox

SAGA = "claim-saga"


class CommitsThenDrops(MemoryJournalStore):
    """begin_step commits, then reports the connection lost (once)."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped = 0

    def begin_step(self, draft: EntryDraft) -> StepClaim:
        claim = super().begin_step(draft)
        if self.dropped == 0:
            self.dropped += 1
            raise JournalWriteError("connection lost mid-transaction; it may have been written")
        return claim


class Courier:
    def __init__(self) -> None:
        self.booked: list[str] = []

    @tool
    def book(self, ctx: ToolContext) -> dict[str, Any]:
        self.booked.append(ctx.idempotency_key)
        return {"booked": True}


async def test_an_ambiguous_intent_write_is_retried_in_place_and_the_tool_runs_once() -> None:
    store, courier = CommitsThenDrops(), Courier()
    store.append(EntryDraft.new(SAGA, Phase.SAGA_OPENED))
    runner = ToolRunner(store, Toolbox.build(courier))
    request = RunToolInput(saga_id=SAGA, step=1, call=ToolCall(tool="book", args={}))

    opened = next(iter(store.entries(SAGA)))
    outcome = await ActivityEnvironment().run(runner.run, request, opened)

    assert store.dropped == 1  # the fault really happened, after the commit
    assert outcome.kind is OutcomeKind.EXECUTED, outcome
    assert courier.booked == [f"{SAGA}:1"]
    phases = [(e.phase, e.attempt) for e in store.entries(SAGA)]
    assert phases == [(Phase.SAGA_OPENED, 1), (Phase.INTENT, 1), (Phase.EXECUTED, 1)]
