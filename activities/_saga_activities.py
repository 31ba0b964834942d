"""The activities a saga worker registers (`SagaActivities`), and their pinned names.

Temporal activities of a saga. Dependencies (store, toolbox, models) are injected by
the worker; names are pinned so workflows and histories never depend on Python names."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from sagacity._errors import InvalidEntryError, JournalConflictError, SagacityError, SagaClosedError
from sagacity.activities._authority import (
    Authority,
    compensating,
    lists_unknown,
    refusal,
)
from sagacity.activities._checkpointing import DEFAULT_CHECKPOINT_EVERY, CheckpointedStore
from sagacity.activities._compensation_runner import CompensationRunner
from sagacity.activities._identity import worker_identity
from sagacity.activities._journal_io import entry_ref, store_call
from sagacity.activities._model_clients import ModelClient, ScriptedModel
from sagacity.activities._models import (
    CheckPlanInput,
    CompensateInput,
    CompensationOutcome,
    EntryRef,
    FenceInput,
    JournalEventInput,
    KeyLookupInput,
    ModelTurn,
    ModelTurnInput,
    PlanCheck,
    ResolveStepInput,
    ResolveStepOutcome,
    ResumeCheckInput,
    RunToolInput,
    ToolOutcome,
    WorkerBound,
)
from sagacity.activities._plan_check import check_plan
from sagacity.activities._resolution_recorder import ResolutionRecorder
from sagacity.activities._tool_runner import ToolRunner
from sagacity.activities._turn_bounds import bounded_turn
from sagacity.approval._registry_file import KeyLookup, RegistryFile
from sagacity.approval._registry_marks import top_mark
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase
from sagacity.stores._base import JournalStore
from sagacity.tlog._log import CheckpointConflictError, CheckpointLog
from sagacity.tools._toolbox import Toolbox

T = TypeVar("T")

RUN_TOOL = "sagacity.run_tool"
COMPENSATE = "sagacity.compensate"
JOURNAL_EVENT = "sagacity.journal_event"
NEXT_TURN = "sagacity.next_turn"
FENCE_STEP = "sagacity.fence_step"
WORKER_IDENTITY = "sagacity.worker_identity"
CHECK_PLAN = "sagacity.check_plan"
CHECK_RESUME = "sagacity.check_resume"
APPROVER_KEY = "sagacity.approver_key"
RESOLVE_STEP = "sagacity.resolve_step"
_RUN = (RUN_TOOL, COMPENSATE, JOURNAL_EVENT, NEXT_TURN, FENCE_STEP, WORKER_IDENTITY)
SAGA_ACTIVITY_TYPES = frozenset((*_RUN, CHECK_PLAN, CHECK_RESUME, APPROVER_KEY, RESOLVE_STEP))
"""Every activity type a saga runs: a run in whose history none ran is no saga's run
(the Temporal witness reads only saga runs, and only these activities' results)."""
WRONG_WORKER = "WrongWorker"
"""Error type of an activity that reached a worker with another toolbox or journal."""
_DETERMINISTIC = (InvalidEntryError, SagaClosedError, JournalConflictError)
"""Journal errors that no retry can fix: raised as non-retryable failures."""
_AFTER_CLOSE_IS_MOOT = {
    Phase.APPROVAL_REFUSED.value,
    Phase.RESOLUTION_REFUSED.value,
    Phase.SAGA_CLOSED.value,
}
"""Entries that a closed saga answers with its close entry instead of an error."""


def _entry_at(store: JournalStore, saga_id: str, seq: int) -> JournalEntry | None:
    return next(iter(store.entries(saga_id, after_seq=seq - 1)), None)


def _not_retryable(exc: Exception) -> ApplicationError:
    return ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True)


async def _for_good(work: Awaitable[T]) -> T:
    """Await an activity's work; a journal error that no retry can fix fails it for good."""
    try:
        return await work
    except _DETERMINISTIC as exc:
        raise _not_retryable(exc) from exc


class SagaActivities:
    """The activities a saga worker registers, bound to one store and one toolbox."""

    def __init__(
        self,
        store: JournalStore,
        toolbox: Toolbox,
        models: Mapping[str, ModelClient] | None = None,
        registry: RegistryFile | None = None,
        checkpoints: CheckpointLog | None = None,
        checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
    ) -> None:
        self.checkpointed = (
            CheckpointedStore(store, checkpoints, checkpoint_every)
            if checkpoints is not None
            else None
        )
        """The journal with checkpoints (None when this worker holds no log key)."""
        if self.checkpointed is not None:
            store = self.checkpointed
        self.store = store
        self.toolbox = toolbox
        self.registry = registry
        self.models: dict[str, ModelClient] = {"scripted": ScriptedModel(), **(models or {})}
        self._compensations = CompensationRunner(store, toolbox)
        self._runner = ToolRunner(store, toolbox, registry)
        self.authority = Authority(store, registry)
        self._resolutions = ResolutionRecorder(store, toolbox)
        # In-memory journals share one URL; each is its own database.
        url = store.url if store.url != "memory://" else f"memory://{id(store):x}"
        self.identity = worker_identity(toolbox, url, signed=registry is not None)

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.run_tool,
            self.compensate,
            self.journal_event,
            self.next_turn,
            self.fence_step,
            self.worker_identity,
            self.check_plan,
            self.check_resume,
            self.approver_key,
            self.resolve_step,
        ]

    def _check_worker(self, req: WorkerBound) -> None:
        """Refuse an activity of a saga pinned to another worker identity (or to none): its
        tools or its journal are not this worker's (a misrouted call must never run or be
        journaled)."""
        if req.worker is None:  # every saga pins its worker: this is no saga's request
            raise refusal(str(getattr(req, "saga_id", "")), "it names no worker identity")
        if req.worker != self.identity:
            raise ApplicationError(
                f"this worker serves toolbox/journal {self.identity}, but the saga is pinned "
                f"to {req.worker}; run one toolbox and journal per task queue (or give each "
                "worker its own task queue)",
                type=WRONG_WORKER,
                non_retryable=True,
            )

    @activity.defn(name=WORKER_IDENTITY)
    async def worker_identity(self) -> str:
        """The identity a new saga pins (a local activity, so it is this worker's). Not a
        secret (it fingerprints public facts), but only a workflow may ask."""
        if activity.info().workflow_id is None:
            raise refusal("", "it was not scheduled by a workflow")
        return self.identity

    @activity.defn(name=CHECK_PLAN)
    async def check_plan(self, req: CheckPlanInput) -> PlanCheck:
        """Every step of a plan checked (tool exists and is allowed, arguments valid)
        before the first one runs: a typo in step 2 must not run step 1."""
        self._check_worker(req)
        self.authority.scheduled_by(req.saga_id)
        return check_plan(self.toolbox, req.plan, req.allowed_tools)

    @activity.defn(name=CHECK_RESUME)
    async def check_resume(self, req: ResumeCheckInput) -> None:
        """The state a run was handed is the saga's own: its journal is open, was opened
        by this worker identity, and ends at the head the state names. (A state copied
        from elsewhere, or written by hand, names another head: refused, nothing runs.)"""
        self._check_worker(req)
        self.authority.scheduled_by(req.saga_id)
        head = await store_call(self.store.head, req.saga_id)
        opening = await store_call(self.store.step_entries, req.saga_id, 0)
        if opening and opening[0].phase is Phase.SAGA_OPENED:
            await self.authority.lifecycle(req.saga_id, acting=False)
        named = None
        if req.head_seq is not None and head is not None and head.seq >= req.head_seq:
            named = await store_call(_entry_at, self.store, req.saga_id, req.head_seq)
        problem = None
        if head is None or not opening or opening[0].phase is not Phase.SAGA_OPENED:
            problem = "the journal has no open saga with this id"
        elif head.phase is Phase.SAGA_CLOSED:
            problem = "the saga's journal is already closed"
        elif named is None or named.hash != req.head_hash:
            # Entries after the named head are fine (an append that landed late); the
            # head itself must be in this saga's chain, with this hash.
            problem = f"the state's head (seq {req.head_seq}) is not in this saga's journal"
        if problem is not None:
            raise ApplicationError(
                f"saga state refused: {problem}; pass Saga.open only the state "
                "saga.handover() returned in the run before",
                type="SagaStateRefused",
                non_retryable=True,
            )

    @activity.defn(name=APPROVER_KEY)
    async def approver_key(self, req: KeyLookupInput) -> KeyLookup:
        """The registry's answer about one key, read when a decision arrives (a local
        activity: the answer is in history, so the judgement replays as it was made). The
        registry's public facts only, and only to a workflow (it is asked before the saga's
        journal is opened, to check the requester's claim)."""
        self._check_worker(req)
        if activity.info().workflow_id is None:
            raise refusal("", "it was not scheduled by a workflow")
        if self.registry is None:
            return KeyLookup(configured=False)
        try:
            lookup = self.registry.lookup(req.key_id)
        except Exception as exc:  # a registry that cannot answer must not stall a saga
            raise ApplicationError(
                f"approver registry unusable: {exc}", type="RegistryError", non_retryable=True
            ) from exc
        if self.registry.problem:
            activity.logger.error("approver registry: %s", self.registry.problem)
        # With the answer, the newest registry the journal records (an index read): the
        # saga refuses to judge with an older one, e.g. on a worker that started before
        # another worker journaled the newer file.
        journaled = top_mark(await store_call(self.store.registry_marks))
        return lookup.model_copy(update={"journaled": journaled})

    @activity.defn(name=RUN_TOOL)
    async def run_tool(self, req: RunToolInput) -> ToolOutcome:
        """Run one step. The saga's own run only, while it is open; an irreversible tool
        only once the journal holds its approval (see ToolRunner)."""
        self._check_worker(req)
        life = await self.authority.lifecycle(req.saga_id)
        return await _for_good(self._runner.run(req, life.opened))

    @activity.defn(name=COMPENSATE)
    async def compensate(self, req: CompensateInput) -> CompensationOutcome:
        """Undo one step: the saga's own run only, once it journaled its decision to
        compensate, while it is open (the runner then undoes only what EXECUTED says)."""
        self._check_worker(req)
        compensating(req.saga_id, await self.authority.lifecycle(req.saga_id))
        return await _for_good(self._compensations.run(req))

    @activity.defn(name=JOURNAL_EVENT)
    async def journal_event(self, req: JournalEventInput) -> EntryRef:
        """Journal a lifecycle or approval event. Bad entries and closed sagas are not
        retryable: retrying cannot make them succeed. Only the phases a saga journals
        itself, and only for the saga's own run (SAGA_OPENED: for the run that opens it)."""
        self._check_worker(req)
        await self.authority.journaling(req.saga_id, req.phase, req.step, req.input, req.result)
        try:
            draft = EntryDraft.new(
                req.saga_id,
                req.phase,
                step=req.step,
                attempt=req.attempt,
                tool=req.tool,
                input=req.input,
                result=req.result,
                error=req.error,
                actor=req.actor,
            )
            return await self._ref(await store_call(self.store.append, draft))
        except JournalConflictError as exc:
            if req.phase == Phase.SAGA_OPENED:
                raise ApplicationError(
                    f"saga id {req.saga_id!r} was used before: its journal is already open "
                    "(or closed) by another run. Saga ids are never reused; start the saga "
                    "with a new id.",
                    type="SagaIdReused",
                    non_retryable=True,
                ) from exc
            if req.phase in (Phase.AWAITING_APPROVAL, Phase.NEEDS_HUMAN):
                # A workflow task retried after its worker died asks again for the same
                # step and payload (or the same dirty steps), with a deadline from its own
                # clock: the first stands.
                same = await store_call(self.store.step_entries, req.saga_id, req.step)
                for entry in same:
                    if (
                        entry.phase is Phase.AWAITING_APPROVAL
                        and entry.attempt == req.attempt
                        and entry.input == req.input
                    ):
                        return entry_ref(entry)
            last = await store_call(self.store.head, req.saga_id)
            is_closed = last is not None and last.phase is Phase.SAGA_CLOSED
            if req.phase == Phase.SAGA_CLOSED and last is not None and is_closed:
                return await self._ref(last)  # the first close stands (see below)
            raise _not_retryable(exc) from exc
        except SagaClosedError as exc:
            closed = await store_call(self.store.head, req.saga_id)
            if closed is not None and req.phase in _AFTER_CLOSE_IS_MOOT:
                # A workflow task that journaled SAGA_CLOSED can still fail (a signal arrived
                # as it completed) and be run again with that late decision applied first.
                # The first close stands; the late refusal or repeated close changes nothing.
                activity.logger.warning("saga %s already closed; %s not journaled", req.saga_id,
                                        req.phase)  # fmt: skip
                return await self._ref(closed)
            raise _not_retryable(exc) from exc
        except InvalidEntryError as exc:
            raise _not_retryable(exc) from exc

    async def _ref(self, entry: JournalEntry) -> EntryRef:
        """Where `entry` landed; for a saga's close, with its signed checkpoint (written
        now, or the one written by an earlier attempt), which goes into the saga's result."""
        ref = entry_ref(entry)
        if entry.phase is Phase.SAGA_CLOSED and self.checkpointed is not None:
            try:
                logged = await store_call(self.checkpointed.close_checkpoint, entry)
            except CheckpointConflictError as exc:  # the journal changed under the log
                raise _not_retryable(exc) from exc
            ref = ref.model_copy(update={"checkpoint": logged.note})
        return ref

    @activity.defn(name=RESOLVE_STEP)
    async def resolve_step(self, req: ResolveStepInput) -> ResolveStepOutcome:
        """Record a person's word on a step whose outcome is unknown (see
        activities.resolution_recorder): the journal decides whether it still is. Only
        for the saga's own run, for a step its journaled NEEDS_HUMAN lists as unknown."""
        self._check_worker(req)
        life = await self.authority.lifecycle(req.saga_id)
        if not lists_unknown(life, req.step):
            raise refusal(
                req.saga_id, f"the journal does not list step {req.step} as waiting for a person"
            )
        return await _for_good(self._resolutions.record(req))

    @activity.defn(name=FENCE_STEP)
    async def fence_step(self, req: FenceInput) -> None:
        """Tombstone a step whose outcome is unknown, so a late attempt cannot apply (part
        of compensating: the saga's own run, once it journaled that decision)."""
        self._check_worker(req)
        compensating(req.saga_id, await self.authority.lifecycle(req.saga_id))
        await store_call(self.store.fence, req.saga_id, req.step)

    @activity.defn(name=NEXT_TURN)
    async def next_turn(self, req: ModelTurnInput) -> ModelTurn:
        """Ask the model (with this worker's credentials): for an open saga's own run."""
        self._check_worker(req)
        await self.authority.lifecycle(req.saga_id)
        client = self.models.get(req.settings.provider)
        if client is None:
            raise ApplicationError(
                f"no model provider {req.settings.provider!r} on this worker; "
                f"configured: {sorted(self.models)}",
                type="UnknownModelProvider",
                non_retryable=True,
            )
        toolbox = self.toolbox
        if req.allowed_tools is not None:
            try:
                toolbox = toolbox.restrict(req.allowed_tools)
            except SagacityError as exc:
                raise ApplicationError(
                    f"allowed_tools: {exc}", type="SagaConfigError", non_retryable=True
                ) from exc
        turn = bounded_turn(await client.next_turn(req, toolbox.schemas()))
        waiting = sorted(
            {
                call.tool
                for call in turn.tool_calls
                if call.tool in toolbox.names() and toolbox.get(call.tool).requires_approval
            }
        )
        return turn.model_copy(update={"waits_for_approval": waiting}) if waiting else turn
