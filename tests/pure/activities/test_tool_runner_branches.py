"""Every branch of the tool runner (the `sagacity.run_tool` activity's body), through
temporalio's ActivityEnvironment: a real activity context (attempt number, heartbeats),
an in-memory journal, no server. Each test reads the journal and the tool's own record
of its runs, so "it ran once" and "nothing ran" are facts, not outcomes taken on trust."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from sagacity.activities import NOT_THE_SAGAS_RUN
from sagacity.activities._models import OutcomeKind, RunToolInput, ToolCall, ToolOutcome
from sagacity.activities._tool_runner import TRUNCATION_MARKER, ToolRunner
from sagacity.approval._judge import approval_hash
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import MemoryJournalStore
from sagacity.tools._decorators import ToolContext, compensable, compensation, irreversible, tool
from sagacity.tools._toolbox import Toolbox
from tests.support.journal_approvals import approve, request_approval
from tests.support.saga_activity_env import tool_outcome

SAGA = "branches"


class Ledger:
    def __init__(self) -> None:
        self.runs: list[tuple[str, str]] = []
        self.received: list[dict[str, Any]] = []

    @compensable("undo")
    def book(self, amount: int, ctx: ToolContext) -> dict[str, Any]:
        self.runs.append(("book", ctx.idempotency_key))
        return {"booked": amount}

    @compensation
    def undo(self, ctx: Any) -> None:
        self.runs.append(("undo", ctx.idempotency_key))

    @tool
    def explode(self, ctx: ToolContext) -> None:
        self.runs.append(("explode", ctx.idempotency_key))
        raise RuntimeError("the provider said no")

    @tool
    def deep(self, ctx: ToolContext) -> Any:
        self.runs.append(("deep", ctx.idempotency_key))
        value: Any = "bottom"
        for _ in range(100):
            value = [value]
        return value

    @tool
    def big(self, size: int, ctx: ToolContext) -> str:
        self.runs.append(("big", ctx.idempotency_key))
        return "x" * size

    @irreversible
    def wire(self, iban: str, amount: int, ctx: ToolContext) -> dict[str, Any]:
        self.runs.append(("wire", ctx.idempotency_key))
        self.received.append({"iban": iban, "amount": amount})
        return {"sent": amount}


@pytest.fixture
def ledger() -> Ledger:
    return Ledger()


@pytest.fixture
def store() -> MemoryJournalStore:
    journal = MemoryJournalStore()
    journal.append(EntryDraft.new(SAGA, Phase.SAGA_OPENED))
    return journal


async def run(
    store: MemoryJournalStore,
    ledger: Ledger,
    tool_name: str,
    args: dict[str, Any],
    *,
    step: int = 1,
    attempt: int = 1,
    **fields: Any,
) -> ToolOutcome:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, attempt=attempt)
    runner = ToolRunner(store, Toolbox.build(ledger))
    request = RunToolInput(
        saga_id=SAGA, step=step, call=ToolCall(tool=tool_name, args=args), **fields
    )
    return await tool_outcome(env, runner.run, request, next(iter(store.entries(SAGA))))


def journal(store: MemoryJournalStore) -> list[tuple[str, int, int]]:
    return [(e.phase.value, e.step, e.attempt) for e in store.entries(SAGA)]


async def test_a_claimed_step_runs_once_between_intent_and_executed(
    store: MemoryJournalStore, ledger: Ledger
) -> None:
    outcome = await run(store, ledger, "book", {"amount": 5})

    assert outcome.kind is OutcomeKind.EXECUTED and outcome.result == {"booked": 5}
    assert ledger.runs == [("book", f"{SAGA}:1")]
    assert journal(store)[1:] == [("INTENT", 1, 1), ("EXECUTED", 1, 1)]
    assert outcome.intent is not None and outcome.outcome is not None
    assert (outcome.intent.seq, outcome.outcome.seq) == (2, 3)


async def test_a_retry_after_executed_returns_the_recorded_result_and_runs_nothing(
    store: MemoryJournalStore, ledger: Ledger
) -> None:
    await run(store, ledger, "book", {"amount": 5})
    again = await run(store, ledger, "book", {"amount": 5}, attempt=2)

    assert again.kind is OutcomeKind.EXECUTED and again.replayed
    assert again.result == {"booked": 5}
    assert ledger.runs == [("book", f"{SAGA}:1")]  # not run again
    assert journal(store)[1:] == [("INTENT", 1, 1), ("EXECUTED", 1, 1)]


async def test_a_retry_after_failed_returns_the_failure_and_runs_nothing(
    store: MemoryJournalStore, ledger: Ledger
) -> None:
    first = await run(store, ledger, "explode", {})
    again = await run(store, ledger, "explode", {}, attempt=2)

    assert first.kind is OutcomeKind.FAILED and "the provider said no" in (first.error or "")
    assert again.kind is OutcomeKind.FAILED and again.replayed
    assert ledger.runs == [("explode", f"{SAGA}:1")]
    assert journal(store)[1:] == [("INTENT", 1, 1), ("FAILED", 1, 1)]


async def test_an_intent_without_an_outcome_is_unknown_fenced_and_never_run(
    store: MemoryJournalStore, ledger: Ledger
) -> None:
    store.begin_step(
        EntryDraft.new(SAGA, Phase.INTENT, step=1, tool="book", input={"amount": 5})
    )  # attempt 1 claimed the step, then its worker died
    outcome = await run(store, ledger, "book", {"amount": 5}, attempt=2)

    assert outcome.kind is OutcomeKind.UNKNOWN and "not run again" in (outcome.error or "")
    assert ledger.runs == []
    assert store.is_fenced(SAGA, 1)  # a late first attempt cannot apply now


async def test_a_fenced_step_is_not_run(store: MemoryJournalStore, ledger: Ledger) -> None:
    store.fence(SAGA, 1)
    outcome = await run(store, ledger, "book", {"amount": 5})

    assert outcome.kind is OutcomeKind.FENCED
    assert ledger.runs == [] and journal(store)[1:] == []


async def test_an_unjournalable_result_is_executed_with_a_stand_in(
    store: MemoryJournalStore, ledger: Ledger
) -> None:
    outcome = await run(store, ledger, "deep", {})

    assert outcome.kind is OutcomeKind.EXECUTED and outcome.result_unjournalable
    assert "result not journaled" in (outcome.error or "")
    assert ledger.runs == [("deep", f"{SAGA}:1")]
    [executed] = [e for e in store.entries(SAGA) if e.phase is Phase.EXECUTED]
    assert outcome.payload is not None and outcome.payload.args == {}
    assert "bottom" not in str(executed.result)[:50]


async def test_a_long_result_is_cut_for_the_model_and_kept_whole(
    store: MemoryJournalStore, ledger: Ledger
) -> None:
    outcome = await run(store, ledger, "big", {"size": 500}, model_result_limit=100)

    assert outcome.result_truncated and outcome.result.endswith(TRUNCATION_MARKER)
    [executed] = [e for e in store.entries(SAGA) if e.phase is Phase.EXECUTED]
    assert executed.result == "x" * 500


async def test_an_irreversible_tool_without_approval_asks_and_runs_nothing(
    store: MemoryJournalStore, ledger: Ledger
) -> None:
    args = {"iban": "DE89370400440532013000", "amount": 70}
    outcome = await run(store, ledger, "wire", args)

    assert outcome.kind is OutcomeKind.NEEDS_APPROVAL
    assert outcome.payload is not None and outcome.payload.sha256 == approval_hash("wire", args)
    assert ledger.runs == [] and journal(store)[1:] == []


async def test_an_approval_of_another_payload_is_refused_and_runs_nothing(
    store: MemoryJournalStore, ledger: Ledger
) -> None:
    args = {"iban": "DE89370400440532013000", "amount": 70}
    other = approval_hash("wire", {**args, "amount": 7})
    outcome = await run(store, ledger, "wire", args, approved_sha256=other)

    assert outcome.kind is OutcomeKind.REFUSED and "does not match" in (outcome.error or "")
    assert ledger.runs == [] and journal(store)[1:] == []


async def test_an_approval_the_journal_does_not_hold_runs_nothing(
    store: MemoryJournalStore, ledger: Ledger
) -> None:
    """Anyone can compute a payload's hash: claiming it was approved is not enough."""
    args = {"iban": "DE89370400440532013000", "amount": 70}
    with pytest.raises(ApplicationError) as refused:
        await run(store, ledger, "wire", args, approved_sha256=approval_hash("wire", args))
    assert refused.value.type == NOT_THE_SAGAS_RUN and refused.value.non_retryable
    assert "no request for approval" in refused.value.message
    assert ledger.runs == [] and journal(store)[1:] == []


async def test_the_approved_payload_runs(store: MemoryJournalStore, ledger: Ledger) -> None:
    args = {"iban": "DE89370400440532013000", "amount": 70}
    request_approval(store, SAGA, 1, "wire", args)
    approve(store, SAGA, 1, "wire", args, "alice")
    outcome = await run(store, ledger, "wire", args, approved_sha256=approval_hash("wire", args))

    assert outcome.kind is OutcomeKind.EXECUTED and outcome.result == {"sent": 70}
    assert ledger.runs == [("wire", f"{SAGA}:1")]
    [intent] = [e for e in store.entries(SAGA) if e.phase is Phase.INTENT]
    assert intent.input == args  # what was approved is what was journaled and ran


async def test_what_is_approved_hashed_journaled_and_received_is_one_value(
    store: MemoryJournalStore, ledger: Ledger
) -> None:
    """The caller's "70" becomes the payload's 70: the approver is shown that payload, the
    approval carries its hash, INTENT journals its canonical bytes and the tool receives
    what those bytes parse to, never the caller's own value."""
    asked = {"iban": "DE89370400440532013000", "amount": "70"}
    waiting = await run(store, ledger, "wire", asked)
    payload = waiting.payload
    assert waiting.kind is OutcomeKind.NEEDS_APPROVAL and payload is not None
    assert payload.args == {"iban": "DE89370400440532013000", "amount": 70}
    request = request_approval(store, SAGA, 1, "wire", payload.args)  # what the human sees
    assert request.result["payload_sha256"] == payload.sha256
    approve(store, SAGA, 1, "wire", payload.args, "alice")

    ran = await run(store, ledger, "wire", asked, approved_sha256=payload.sha256)

    assert ran.kind is OutcomeKind.EXECUTED and ran.payload == payload
    [intent] = [e for e in store.entries(SAGA) if e.phase is Phase.INTENT]
    assert intent.input_json.encode() == payload.canonical
    assert payload.sha256 == approval_hash("wire", intent.input)
    assert ledger.received == [{"iban": "DE89370400440532013000", "amount": 70}]


async def test_an_invalid_call_is_refused_and_journaled(
    store: MemoryJournalStore, ledger: Ledger
) -> None:
    outcome = await run(store, ledger, "book", {"amount": "five"})
    unknown = await run(store, ledger, "nope", {}, step=2)

    assert outcome.kind is OutcomeKind.REFUSED and unknown.kind is OutcomeKind.REFUSED
    assert ledger.runs == []
    assert [p for p, _, _ in journal(store)[1:]] == ["CALL_REFUSED", "CALL_REFUSED"]


async def test_a_tool_outside_the_allowed_list_is_refused(
    store: MemoryJournalStore, ledger: Ledger
) -> None:
    outcome = await run(store, ledger, "book", {"amount": 5}, allowed_tools=["wire"])

    assert outcome.kind is OutcomeKind.REFUSED and ledger.runs == []
