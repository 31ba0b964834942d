"""The compensate activity undoes only what the journal says was EXECUTED.

Run through temporalio's ActivityEnvironment (a real activity context, no server) over
an in-memory journal: what the request carries beside saga, step and tool is ignored,
a step with no EXECUTED entry (or one naming another tool) fails closed with a
non-retryable error and the compensation is never called, and every failure carries the
EXECUTED entry's input so COMPENSATION_FAILED can journal what really ran.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from sagacity.activities._compensation_runner import (
    EXECUTED_DETAIL,
    NOT_EXECUTED_IN_JOURNAL,
    TOOL_MISMATCH,
    CompensationRunner,
)
from sagacity.activities._models import CompensateInput
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import MemoryJournalStore
from sagacity.tools._decorators import (
    CompensationContext,
    ToolContext,
    compensable,
    compensation,
    tool,
)
from sagacity.tools._toolbox import Toolbox

SAGA = "saga-runner"


class Payments:
    """A compensable charge whose refund records every context it is called with."""

    def __init__(self) -> None:
        self.refunds: list[CompensationContext] = []
        self.refuse: Exception | None = None

    @compensable("refund")
    def charge(self, amount: int, ctx: ToolContext) -> dict[str, Any]:
        return {"charge": ctx.idempotency_key, "amount": amount}

    @compensation
    def refund(self, ctx: CompensationContext) -> None:
        self.refunds.append(ctx)
        if self.refuse is not None:
            raise self.refuse

    @tool
    def note(self, text: str) -> str:
        return text


def journal(*rows: tuple[Phase, int, str]) -> MemoryJournalStore:
    store = MemoryJournalStore()
    store.append(EntryDraft.new(SAGA, Phase.SAGA_OPENED))
    for phase, step, name in rows:
        result = {"charge": "real-charge", "amount": 1250} if phase is Phase.EXECUTED else None
        store.append(
            EntryDraft.new(SAGA, phase, step=step, tool=name, input={"amount": 1250}, result=result)
        )
    return store


async def compensate(store: MemoryJournalStore, shop: Payments, **fields: Any) -> Any:
    runner = CompensationRunner(store, Toolbox.build(shop))
    request = CompensateInput(saga_id=SAGA, **{"step": 1, "tool": "charge", **fields})
    return await ActivityEnvironment().run(runner.run, request)


async def test_the_context_comes_from_the_journal_not_from_the_request() -> None:
    shop = Payments()
    store = journal((Phase.INTENT, 1, "charge"), (Phase.EXECUTED, 1, "charge"))

    done = await compensate(
        store, shop, args={"amount": 999_999}, result={"charge": "someone-else"}
    )

    [ctx] = shop.refunds
    assert ctx.input == {"amount": 1250}
    assert ctx.result == {"charge": "real-charge", "amount": 1250}
    compensated = [e for e in store.entries(SAGA) if e.phase is Phase.COMPENSATED]
    assert [(e.step, e.seq) for e in compensated] == [(1, done.entry.seq)]


async def test_a_step_with_only_an_intent_fails_closed_and_nothing_is_undone() -> None:
    shop = Payments()
    store = journal((Phase.INTENT, 1, "charge"))

    with pytest.raises(ApplicationError) as raised:
        await compensate(store, shop, args={"amount": 1250}, result={"charge": "c-1"})

    error = raised.value
    assert error.type == NOT_EXECUTED_IN_JOURNAL and error.non_retryable
    for named in (SAGA, "step 1", "'charge'", "no EXECUTED entry", "INTENT (seq 2)", "human"):
        assert named in error.message
    assert shop.refunds == []  # the request's args and result were not used instead
    assert [e.phase for e in store.entries(SAGA)] == [Phase.SAGA_OPENED, Phase.INTENT]
    assert store.is_fenced(SAGA, 1)  # a late forward attempt still cannot apply


async def test_a_step_the_journal_never_heard_of_fails_closed() -> None:
    shop = Payments()
    with pytest.raises(ApplicationError) as raised:
        await compensate(journal(), shop, step=7)
    assert raised.value.type == NOT_EXECUTED_IN_JOURNAL and raised.value.non_retryable
    assert "holds nothing" in raised.value.message
    assert shop.refunds == []


async def test_an_executed_entry_of_another_tool_is_refused() -> None:
    shop = Payments()
    store = journal((Phase.INTENT, 1, "note"), (Phase.EXECUTED, 1, "note"))

    with pytest.raises(ApplicationError) as raised:
        await compensate(store, shop, tool="charge")

    assert raised.value.type == TOOL_MISMATCH and raised.value.non_retryable
    assert "'note'" in raised.value.message and "'charge'" in raised.value.message
    assert shop.refunds == []


async def test_a_compensated_entry_without_an_executed_one_is_not_trusted() -> None:
    shop = Payments()
    store = journal((Phase.INTENT, 1, "charge"), (Phase.COMPENSATED, 1, "charge"))
    with pytest.raises(ApplicationError) as raised:
        await compensate(store, shop)
    assert raised.value.type == NOT_EXECUTED_IN_JOURNAL


async def test_a_failing_compensation_is_retryable_and_carries_the_journal_input() -> None:
    shop = Payments()
    shop.refuse = RuntimeError("provider refused the refund")
    store = journal((Phase.INTENT, 1, "charge"), (Phase.EXECUTED, 1, "charge"))
    executed = next(e for e in store.entries(SAGA) if e.phase is Phase.EXECUTED)

    with pytest.raises(ApplicationError) as raised:
        await compensate(store, shop, args=None)

    error = raised.value
    assert (error.type, error.message, error.non_retryable) == (
        "RuntimeError",
        "provider refused the refund",
        False,
    )
    assert error.details == (
        {EXECUTED_DETAIL: {"seq": executed.seq, "hash": executed.hash, "input": {"amount": 1250}}},
    )


async def test_a_compensation_that_says_non_retryable_keeps_its_choice() -> None:
    shop = Payments()
    shop.refuse = ApplicationError("charge already disputed", "case-7", type="Disputed",
                                   non_retryable=True)  # fmt: skip
    store = journal((Phase.INTENT, 1, "charge"), (Phase.EXECUTED, 1, "charge"))

    with pytest.raises(ApplicationError) as raised:
        await compensate(store, shop)

    error = raised.value  # the journal's evidence first, then the compensation's own
    assert (error.type, error.non_retryable, error.details[1]) == ("Disputed", True, "case-7")
    assert error.details[0][EXECUTED_DETAIL]["input"] == {"amount": 1250}


async def test_a_plain_tool_has_no_compensation_and_says_so_with_its_input() -> None:
    shop = Payments()
    store = journal((Phase.INTENT, 1, "note"), (Phase.EXECUTED, 1, "note"))
    with pytest.raises(ApplicationError) as raised:
        await compensate(store, shop, tool="note")
    assert raised.value.type == "NoCompensation" and raised.value.non_retryable
    assert raised.value.details[0][EXECUTED_DETAIL]["input"] == {"amount": 1250}


async def test_heartbeats_carry_the_executed_entry_while_the_compensation_runs() -> None:
    """So a compensation that times out (no failure of ours to carry the input) still
    reports what ran, in the timeout's last heartbeat details."""
    seen = asyncio.Event()
    beats: list[tuple[Any, ...]] = []

    class Slow(Payments):
        @compensation
        async def refund(self, ctx: CompensationContext) -> None:
            await seen.wait()  # returns only once a heartbeat carried the evidence

    def on_heartbeat(*details: Any) -> None:
        beats.append(details)
        if details and isinstance(details[0], dict) and EXECUTED_DETAIL in details[0]:
            seen.set()

    store = journal((Phase.INTENT, 1, "charge"), (Phase.EXECUTED, 1, "charge"))
    executed = next(e for e in store.entries(SAGA) if e.phase is Phase.EXECUTED)
    env = ActivityEnvironment()
    env.on_heartbeat = on_heartbeat
    runner = CompensationRunner(store, Toolbox.build(Slow()))
    request = CompensateInput(saga_id=SAGA, step=1, tool="charge")
    await asyncio.wait_for(env.run(runner.run, request), 30)  # a guard against hanging

    expected = {EXECUTED_DETAIL: {"seq": executed.seq, "hash": executed.hash,
                                  "input": {"amount": 1250}}}  # fmt: skip
    assert (expected,) in beats
