"""Which run may make a sagacity activity act: the saga's own, as the journal records it.

Anyone who can run a worker in the namespace can schedule any activity, with any input,
on any task queue — including this worker's. So no activity here acts on its input's
word. Before it does anything, an activity establishes from Temporal's own record of who
scheduled it (the activity task names the workflow id and run id; a caller cannot choose
them) and from the journal that:

- it was scheduled by a workflow whose id is the saga id it names (a saga is its
  workflow: `saga_id` is `workflow.info().workflow_id`);
- the journal holds that saga's SAGA_OPENED, and the scheduling run belongs to the run
  chain that opened it: the opening run itself, or a run Temporal says continues it
  (continue-as-new, retry, reset share the chain's first run id). A new workflow started
  under the id of a saga whose run was terminated is another chain and is refused;
- for anything that acts, the saga is not closed, and it carries the worker identity it
  was pinned to.

A refusal writes nothing to the journal (an outsider must not grow or confuse a real
saga's chain); the worker logs it, and the activity fails, not retryable. Which run owns
a chain never changes, so a run found to own one is remembered (bounded).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from sagacity.activities._journal_io import store_call
from sagacity.approval._registry_file import RegistryFile
from sagacity.approval._registry_marks import MARK_FIELD, mark_in
from sagacity.approval._resolutions import DirtyKind
from sagacity.journal._bounds import MAX_TEXT_ECHO, cut
from sagacity.journal._entry import JournalEntry
from sagacity.journal._phases import LIFECYCLE_STEP, Phase
from sagacity.stores._base import JournalStore

__all__ = [
    "JOURNALED_BY_THE_SAGA",
    "NOT_THE_SAGAS_RUN",
    "Authority",
    "Lifecycle",
    "chain_of",
    "compensating",
    "lists_unknown",
    "refusal",
]

NOT_THE_SAGAS_RUN = "NotTheSagasRun"
"""Error type of an activity refused because the run that scheduled it is not the run
(chain) that owns the saga's journal, or the saga is closed or not open."""
JOURNALED_BY_THE_SAGA = frozenset(
    {
        Phase.SAGA_OPENED,
        Phase.AWAITING_APPROVAL,
        Phase.APPROVAL_REFUSED,
        Phase.APPROVED,
        Phase.REJECTED,
        Phase.COMPENSATING,
        Phase.COMPENSATION_FAILED,
        Phase.NEEDS_HUMAN,
        Phase.RESOLVED,
        Phase.RESOLUTION_REFUSED,
        Phase.SAGA_CLOSED,
    }
)
"""The phases a saga's workflow journals through journal_event. The others (INTENT,
EXECUTED, FAILED, CALL_REFUSED, COMPENSATED) are written only by the activities that
observe them: a forged EXECUTED would be a step the saga then "compensates"."""
OWNERS_REMEMBERED = 4_096
"""Runs remembered as owners of their saga's chain (each answer took a server call)."""


def chain_of(opened: JournalEntry) -> str | None:
    """The run chain that owns a saga: the first run id its SAGA_OPENED journaled."""
    recorded = opened.input if isinstance(opened.input, dict) else {}
    chain = recorded.get("chain")
    return chain if isinstance(chain, str) and chain else None


@dataclass(frozen=True)
class Lifecycle:
    """What the journal's lifecycle step says of a saga owned by the calling run."""

    opened: JournalEntry
    closed: JournalEntry | None
    compensating: JournalEntry | None
    needs_human: JournalEntry | None
    """The newest NEEDS_HUMAN: the dirty steps the saga waits for a person about."""


def lists_unknown(life: Lifecycle, step: int) -> bool:
    """Whether the saga's newest NEEDS_HUMAN lists `step` as a step of unknown outcome."""
    waiting = life.needs_human.input if life.needs_human is not None else None
    listed = waiting.get("dirty") if isinstance(waiting, dict) else None
    unknown = DirtyKind.UNKNOWN_OUTCOME.value
    return any(
        isinstance(d, dict) and d.get("step") == step and d.get("kind") == unknown
        for d in listed or ()
    )


def compensating(saga_id: str, life: Lifecycle) -> None:
    """A compensation (or its fence) acts only once the saga journaled that decision."""
    if life.compensating is None:
        raise refusal(saga_id, "the saga has not journaled a decision to compensate")


def refusal(saga_id: str, why: str) -> ApplicationError:
    """The refusal of an activity that is not the saga's own: logged, never journaled."""
    info = activity.info()
    message = (
        f"{info.activity_type} refused for saga {cut(saga_id, MAX_TEXT_ECHO)!r}: {why}; "
        "nothing ran and nothing was journaled. Only the saga's own workflow run may "
        "schedule sagacity activities for it"
    )
    activity.logger.warning(
        "refused %s scheduled by workflow %r run %r (type %r): %s",
        info.activity_type,
        cut(info.workflow_id or "", MAX_TEXT_ECHO),
        info.workflow_run_id,
        info.workflow_type,
        why,
    )
    return ApplicationError(message, type=NOT_THE_SAGAS_RUN, non_retryable=True)


class Authority:
    """Checks, for one worker's journal, that an activity's caller owns its saga."""

    def __init__(self, store: JournalStore, registry: RegistryFile | None = None) -> None:
        self.store = store
        self.registry = registry
        self._owners: OrderedDict[tuple[str, str], str] = OrderedDict()

    def scheduled_by(self, saga_id: str) -> None:
        """The activity was scheduled by the workflow whose id is `saga_id`."""
        workflow_id = activity.info().workflow_id
        if workflow_id is None or workflow_id != saga_id:
            shown = "no workflow" if workflow_id is None else repr(cut(workflow_id, MAX_TEXT_ECHO))
            raise refusal(saga_id, f"it was scheduled by {shown}, not by the saga's workflow")

    async def lifecycle(self, saga_id: str, *, acting: bool = True) -> Lifecycle:
        """The saga's lifecycle entries, once the calling run is shown to own the saga.
        `acting`: the activity changes something, so a closed saga refuses it."""
        self.scheduled_by(saga_id)
        entries = await store_call(self.store.step_entries, saga_id, LIFECYCLE_STEP)
        opened = next((e for e in entries if e.phase is Phase.SAGA_OPENED), None)
        if opened is None:
            raise refusal(saga_id, "the journal holds no SAGA_OPENED for this saga")
        await self._owns(saga_id, opened)
        closed = next((e for e in entries if e.phase is Phase.SAGA_CLOSED), None)
        if acting and closed is not None:
            raise refusal(saga_id, f"the saga is closed (SAGA_CLOSED, seq {closed.seq})")
        compensating = next((e for e in entries if e.phase is Phase.COMPENSATING), None)
        waiting = [e for e in entries if e.phase is Phase.NEEDS_HUMAN]
        return Lifecycle(opened, closed, compensating, waiting[-1] if waiting else None)

    async def journaling(
        self, saga_id: str, phase: Phase, step: int, recorded: Any, result: Any = None
    ) -> None:
        """journal_event's check: only a phase a saga journals itself; SAGA_OPENED for
        the run that opens the saga, naming that run and its chain; anything else for
        the saga's own run, a decision only for a request the journal holds, a
        resolution only while the saga waits for a person."""
        if phase not in JOURNALED_BY_THE_SAGA:
            raise refusal(saga_id, f"a saga never journals {phase.value} itself")
        if phase is Phase.SAGA_OPENED:
            await self._opening(saga_id, recorded)
            await self._own_registry(saga_id, phase, recorded, result)
            return
        life = await self.lifecycle(saga_id, acting=False)
        if phase in (Phase.APPROVED, Phase.REJECTED):
            entries = await store_call(self.store.step_entries, saga_id, step)
            if not any(e.phase is Phase.AWAITING_APPROVAL for e in entries):
                raise refusal(saga_id, f"the journal holds no request at step {step}")
        elif phase is Phase.RESOLVED and life.needs_human is None:
            raise refusal(saga_id, "the saga is not waiting for a person")
        await self._own_registry(saga_id, phase, recorded, result)

    async def _own_registry(self, saga_id: str, phase: Phase, recorded: Any, result: Any) -> None:
        """A registry an entry says it was judged with raises the journal's high-water
        mark, which every worker of the journal then holds its registry to: it must be one
        this worker put in force (or one the journal already records), never a number the
        caller made up (a made-up version 2**53-1 would lock every signed saga out)."""
        mark = mark_in(phase, result if MARK_FIELD.get(phase) == "result" else recorded)
        if mark is None:
            return
        named = (mark.version, mark.sha256)
        if self.registry is not None and named in self.registry.served:
            return
        marks = await store_call(self.store.registry_marks)
        if any((m.version, m.sha256) == named for m in marks):
            return
        raise refusal(saga_id, f"it names a registry this worker never judged with ({named[0]})")

    async def _opening(self, saga_id: str, recorded: Any) -> None:
        """SAGA_OPENED names the run that opens the saga and its run chain (the chain's
        first run id), which from then on owns the saga: both must be the caller's own."""
        self.scheduled_by(saga_id)
        opened = recorded if isinstance(recorded, dict) else {}
        run, chain = activity.info().workflow_run_id, opened.get("chain")
        if not run or opened.get("run_id") != run or not isinstance(chain, str):
            raise refusal(saga_id, "its SAGA_OPENED does not name the calling run")
        if chain != run and await self.first_run(saga_id, run) != chain:
            raise refusal(saga_id, "its SAGA_OPENED names another run chain")

    async def _owns(self, saga_id: str, opened: JournalEntry) -> None:
        chain = chain_of(opened)
        run = activity.info().workflow_run_id
        if chain is None or not run:
            raise refusal(saga_id, "the saga's opening names no run chain")
        if run == chain or self._owners.get((saga_id, run)) == chain:
            return
        first = await self.first_run(saga_id, run)
        if first != chain:
            raise refusal(
                saga_id, f"run {run} belongs to another run chain than the one that opened it"
            )
        self._owners[(saga_id, run)] = chain
        while len(self._owners) > OWNERS_REMEMBERED:
            self._owners.popitem(last=False)

    async def first_run(self, saga_id: str, run: str) -> str | None:
        """Temporal's answer: the first run of the chain `run` belongs to."""
        try:
            handle = activity.client().get_workflow_handle(saga_id, run_id=run)
            described = await handle.describe()
        except Exception as exc:  # no client, or the server cannot say: refuse, retryable
            raise ApplicationError(
                f"cannot ask Temporal which run chain run {run} belongs to: {exc}",
                type="RunChainUnknown",
            ) from exc
        first = described.raw_description.workflow_execution_info.first_run_id
        return first or None
