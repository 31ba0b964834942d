"""The Temporal witness's decisions without a server: which saga workflows `--all`
compares, what runs that hold none of a saga's entries mean, and runs under a saga's id
that are no saga."""

from __future__ import annotations

from sagacity.audit._evidence import Problem
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import MemoryJournalStore
from sagacity.worker.client._witness import Witnessed, compare, scope


def test_every_task_queue_a_journal_saga_ran_on_is_in_scope() -> None:
    listed = {
        "a-1": {"tq-a"},
        "b-1": {"tq-b"},  # deleted from the journal: found through b-2's queue
        "b-2": {"tq-b"},
        "x-1": {"tq-other"},  # another journal's saga, or one of ours on a queue we lost
    }
    seen = scope(["a-1", "b-2", "only-in-journal"], listed, "tq-a")
    assert seen.ids == ["a-1", "b-1", "b-2", "only-in-journal"]
    assert seen.queues == ["tq-a", "tq-b"]
    assert seen.others == 1


def test_the_configured_queue_is_in_scope_with_an_empty_journal() -> None:
    seen = scope([], {"gone": {"tq"}, "else": {"tq-2"}}, "tq")
    assert (seen.ids, seen.queues, seen.others) == (["gone"], ["tq"], 1)


def _journal() -> MemoryJournalStore:
    store = MemoryJournalStore()
    store.append(EntryDraft.new("s", Phase.SAGA_OPENED))
    store.append(EntryDraft.new("s", Phase.SAGA_CLOSED, result={}))
    return store


def test_runs_that_hold_none_of_the_sagas_entries_vouch_for_nothing() -> None:
    store = _journal()
    found = compare(store, Witnessed("s", runs=1, types={"AgentSaga"}, starts={"r1"}), "s")
    assert [f.problem for f in found] == [Problem.WITNESS]
    assert "1 run(s) under this id (AgentSaga), but their history holds no entry" in (
        found[0].detail
    )
    assert compare(MemoryJournalStore(), Witnessed("s", runs=1), "s") == []


def test_a_reused_id_is_named_where_its_runs_disagree() -> None:
    store = _journal()
    heads = {e.seq: e.hash for e in store.entries("s")}
    agreeing = Witnessed("s", runs=2, refs=dict(heads), starts={"r1", "r2"}, closed_at=2)
    assert compare(store, agreeing, "s") == []  # a second start that wrote nothing hides nothing
    torn = Witnessed(
        "s", runs=2, refs=dict(heads), starts={"r1", "r2"},
        conflicts=["history names two hashes for entry 1"],
    )  # fmt: skip
    (finding,) = compare(store, torn, "s")
    assert "a saga was started 2 times under the id" in finding.detail


def test_an_id_with_runs_of_other_workflows_only_has_no_witness() -> None:
    store = _journal()
    only_foreign = Witnessed("s", foreign={"Forger": 1})
    (finding,) = compare(store, only_foreign, "s")
    assert finding.problem is Problem.WITNESS
    assert "no saga run under this id, only run(s) of another workflow type (1 of Forger)" in (
        finding.detail
    )
    assert compare(MemoryJournalStore(), only_foreign, "s") == []  # no saga to vouch for
    heads = {e.seq: e.hash for e in store.entries("s")}
    beside = Witnessed("s", runs=1, refs=heads, starts={"r1"}, closed_at=2, foreign={"F": 2})
    assert compare(store, beside, "s") == []  # the saga's own run vouches; the rest is named
