"""`sagacity.check_resume`: a state handed to a continued run must name a head that is in
this saga's open chain (ActivityEnvironment, an in-memory journal, no server)."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError

from sagacity.activities import SagaActivities
from sagacity.activities._models import ResumeCheckInput
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import MemoryJournalStore
from sagacity.tools._decorators import tool
from sagacity.tools._toolbox import Toolbox
from tests.support.saga_activity_env import opening, saga_env

SAGA = "resume"


class Tools:
    @tool
    def noop(self) -> None:
        return None


def opened() -> tuple[MemoryJournalStore, SagaActivities]:
    store = MemoryJournalStore()
    store.append(opening(SAGA))
    store.append(EntryDraft.new(SAGA, Phase.INTENT, step=1, tool="noop"))
    store.append(EntryDraft.new(SAGA, Phase.EXECUTED, step=1, tool="noop"))
    return store, SagaActivities(store, Toolbox.build(Tools()))


async def check(activities: SagaActivities, seq: int | None, digest: str | None) -> None:
    request = ResumeCheckInput(
        saga_id=SAGA, head_seq=seq, head_hash=digest, worker=activities.identity
    )
    await saga_env(SAGA).run(activities.check_resume, request)


async def test_the_head_of_the_chain_or_an_earlier_entry_of_it_is_taken() -> None:
    store, activities = opened()
    entries = list(store.entries(SAGA))
    await check(activities, entries[-1].seq, entries[-1].hash)
    await check(activities, entries[1].seq, entries[1].hash)  # an append landed later


@pytest.mark.parametrize(
    ("seq", "digest", "why"),
    [(3, "0" * 64, "not in this saga's journal"), (9, "0" * 64, "not in"), (None, None, "not in")],
)
async def test_a_head_not_in_the_chain_is_refused(
    seq: int | None, digest: str | None, why: str
) -> None:
    _, activities = opened()
    with pytest.raises(ApplicationError, match=why) as refused:
        await check(activities, seq, digest)
    assert refused.value.type == "SagaStateRefused" and refused.value.non_retryable


async def test_a_closed_or_unknown_saga_is_refused() -> None:
    store, activities = opened()
    head = list(store.entries(SAGA))[-1]
    store.append(EntryDraft.new(SAGA, Phase.SAGA_CLOSED))
    with pytest.raises(ApplicationError, match="already closed"):
        await check(activities, head.seq, head.hash)
    empty = SagaActivities(MemoryJournalStore(), Toolbox.build(Tools()))
    with pytest.raises(ApplicationError, match="no open saga"):
        await check(empty, 1, "0" * 64)


async def test_a_retried_request_for_approval_gets_the_first_entry_back() -> None:
    """A workflow task retried after its worker died journals AWAITING_APPROVAL again with
    a deadline from its own clock: the first entry stands; another payload is refused."""
    from sagacity.activities._models import JournalEventInput

    store, activities = opened()
    payload = {"tool": "noop", "args": {}}

    def ask(deadline: str, args: dict[str, object]) -> JournalEventInput:
        return JournalEventInput(
            saga_id=SAGA, phase=Phase.AWAITING_APPROVAL, step=2, tool="noop",
            input={**payload, "args": args}, result={"deadline": deadline},
            worker=activities.identity,
        )  # fmt: skip

    env = saga_env(SAGA)
    first = await env.run(activities.journal_event, ask("2026-12-10T00:00:00+00:00", {}))
    again = await env.run(activities.journal_event, ask("2026-12-10T00:00:07+00:00", {}))
    assert again == first and len(store.step_entries(SAGA, 2)) == 1
    with pytest.raises(ApplicationError, match="different content"):
        await env.run(activities.journal_event, ask("2026-12-10T00:00:09+00:00", {"x": 1}))
