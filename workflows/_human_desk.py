"""The desk where people resolve a saga's dirty state: the `resolve` doors and the judge.

A resolution arrives as the `resolve` update (answered once applied and journaled) or
the `resolve` signal (what the Temporal UI can send). Either way it is judged by
sagacity.approval._resolutions against what is dirty now; a refusal is journaled
(RESOLUTION_REFUSED, bounded like refused decisions) and, through the update, returned
to the sender. An accepted action is queued; the saga's own code (never a handler)
applies the queue in order — journaling RESOLVED, recording the outcome, running the
compensation — so two people acting at once are applied one after the other, and the
second is judged against what the first left.

A signed resolution asks the pinned worker about its key (a local activity, recorded,
so the judgement replays as made); an unsigned one is judged with the registry answer
the saga took when it began waiting. Its refusal number is taken before the key is
asked for, in arrival order, as for decisions. A resolution signed with a passkey (its
WebAuthn assertion over the statement, checked as a decision's is) counts too, and its
assertion is journaled with it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from sagacity._errors import SagacityError
    from sagacity.activities._models import EntryRef, JournalEventInput
    from sagacity.approval._judge import Refusal, RefusalReason
    from sagacity.approval._registry import EnrolledKey
    from sagacity.approval._registry_file import KeyLookup
    from sagacity.approval._resolutions import (
        DeskView,
        DirtyKind,
        Resolution,
        ResolutionContext,
        ResolutionPolicy,
        judge_resolution,
        parse_resolution,
    )
    from sagacity.approval._signed_action import journaled_signer, journaled_statement
    from sagacity.journal._phases import Phase
    from sagacity.workflows._models import ResolutionResult

from sagacity.workflows._approval_evidence import field, journal_refused, message

RESOLVE = "resolve"
"""Name of the update and of the signal that carry a resolution."""
MAX_ACTIONS = 200
"""Accepted actions a saga takes (retries included); beyond them only an acceptance is
taken, so the result that lists every action, and the history, stay bounded."""
REFUSALS_PER_STEP = 50
REFUSALS_ELSEWHERE = 20
ELSEWHERE = 0

Journal = Callable[[JournalEventInput], Awaitable[EntryRef]]
Lookup = Callable[[str | None], Awaitable[KeyLookup]]
Ticket = tuple[int, int, int]


@dataclass(frozen=True)
class Queued:
    """An accepted action, waiting for the saga to apply it."""

    number: int
    action: Resolution
    actor: str
    """The identity it is recorded under (the key's owner when signed)."""
    key: EnrolledKey | None
    raw: Any
    registry: dict[str, object] | None = None
    """The registry version the action was judged with (None: no registry)."""

    def evidence(self) -> dict[str, Any]:
        """What an offline auditor needs beside the statement: the registry version, and
        the key it was checked with (as decisions journal theirs)."""
        return {"registry": self.registry, **journaled_signer(self.action, self.key)}

    def signed_input(self) -> dict[str, Any]:
        """The RESOLVED entry's input: the statement and its signature (or assertion)."""
        return journaled_statement(self.action)

    @property
    def step(self) -> int | None:
        return self.action.step


class HumanDesk:
    def __init__(
        self,
        saga_id: str,
        journal: Journal,
        lookup: Lookup,
        *,
        policy: ResolutionPolicy,
        dirty: Callable[[], dict[int, DirtyKind]],
        status: Callable[[], str],
        requester: Callable[[], str | None],
        rolled_back: Callable[[KeyLookup | None], Refusal | None],
    ) -> None:
        self._saga_id = saga_id
        self._journal = journal
        self._lookup = lookup
        self.policy = policy
        self._dirty = dirty
        self._status = status
        self._requester = requester
        self.rolled_back = rolled_back
        """The gate's registry high-water check, shared: one mark per saga."""
        self.waiting_since: datetime | None = None
        self.deadline: datetime | None = None
        self.registry: KeyLookup | None = None
        self.queue: list[Queued] = []
        self.applying: int | None = None
        self.done: dict[int, ResolutionResult | Refusal] = {}
        self.resolved: dict[int, str] = {}
        self.accepted = False
        self.expired = False
        self.closed = False
        self._refusals: dict[int, int] = {}
        self._attempts: dict[int, int] = {}
        self._count = 0
        self._signatures: set[str] = set()
        """Signatures of statements already accepted: a signed statement acts once."""

    @property
    def refusals(self) -> dict[int, int]:
        """Refusals counted per bucket: carried across continue-as-new, so the next run
        numbers its refusals after the earlier runs' (each number is journaled once)."""
        return self._refusals

    def restore(self, refusals: dict[int, int]) -> None:
        self._refusals = dict(refusals)

    def next_attempt(self, step: int) -> int:
        """The attempt number of the next RESOLVED entry for `step` (0: the saga)."""
        self._attempts[step] = self._attempts.get(step, 0) + 1
        return self._attempts[step]

    def open(self, now: datetime, deadline: datetime, registry: KeyLookup) -> None:
        self.waiting_since, self.deadline, self.registry = now, deadline, registry

    def stop_waiting(self) -> list[Queued]:
        """The saga stops waiting (all resolved, accepted, or the deadline): returns the
        actions still queued, which the saga refuses."""
        self.waiting_since = None
        left, self.queue = self.queue, []
        return left

    def view(self) -> DeskView:
        busy = {q.step for q in self.queue if q.step is not None}
        if self.applying is not None:
            busy.add(self.applying)
        if any(q.action.action == "accept" for q in self.queue):
            busy.update(self._dirty())  # an acceptance waiting covers every dirty step
        return DeskView(
            saga_id=self._saga_id,
            waiting_since=self.waiting_since,
            dirty=self._dirty(),
            resolved=dict(self.resolved),
            in_progress=frozenset(busy),
            status=self._status(),
        )

    # ---- doors -------------------------------------------------------------------------------

    def validate(self, raw: Any) -> None:
        """Reject only once the saga is closing (nothing is journaled then); every other
        refusal is journaled by the handler."""
        if self.closed:
            raise ApplicationError(
                f"saga {self._saga_id!r} has closed; nothing more can be resolved",
                RefusalReason.NOT_WAITING.value,
                type="ResolutionRefused",
            )

    async def on_signal(self, raw: Any) -> None:
        judged, ticket = await self._judged(raw)
        if isinstance(judged, Refusal):
            await self.journal_refusal(raw, judged, ticket)
        else:
            self.queue.append(judged)

    async def on_update(self, raw: Any) -> ResolutionResult:
        judged, ticket = await self._judged(raw)
        if isinstance(judged, Refusal):
            await self.journal_refusal(raw, judged, ticket)
            raise _refused(judged, journaled=not self.closed)
        self.queue.append(judged)
        number = judged.number
        await workflow.wait_condition(lambda: number in self.done or self.closed)
        answer = self.done.get(number)
        if answer is None:
            answer = Refusal(reason=RefusalReason.NOT_WAITING, detail="the saga closed first")
        if isinstance(answer, Refusal):
            raise _refused(answer, journaled=True)
        return answer

    async def _judged(self, raw: Any) -> tuple[Queued | Refusal, Ticket | None]:
        lookup, ticket = self.registry, None
        if isinstance(raw, dict) and (
            field(raw, "key_id", str) is not None
            or field(raw, "signature", str) is not None
            or "passkey" in raw
        ):
            ticket = self._ticket(raw)
            key_id = field(raw, "key_id", str)
            try:
                lookup = await self._lookup(key_id if key_id and len(key_id) <= 64 else None)
            except (ActivityError, ApplicationError) as exc:  # never fail the saga's task
                unusable = f"the worker could not answer about key {key_id}: {exc}"[:1_000]
                return Refusal(reason=RefusalReason.UNKNOWN_KEY, detail=unusable), ticket
            rolled_back = self.rolled_back(lookup)
            if rolled_back is not None:
                return rolled_back, ticket
        parsed = parse_resolution(raw)
        if isinstance(parsed, Refusal):
            return parsed, ticket
        context = ResolutionContext(
            now=workflow.now(),
            policy=self.policy,
            lookup=lookup or KeyLookup(configured=False),
            requester=self._requester(),
        )
        try:
            verdict = judge_resolution(self.view(), parsed, context)
        except SagacityError as exc:  # never a failed workflow task over a sender's value
            return Refusal(reason=RefusalReason.MALFORMED, detail=str(exc)[:1_000]), ticket
        if not verdict.accepted:
            assert verdict.refusal is not None
            return verdict.refusal, ticket
        if self._count >= MAX_ACTIONS and parsed.action != "accept":
            limit = (
                f"this saga has taken {MAX_ACTIONS} actions; accept what is left "
                "(close --accept) or let its deadline close it"
            )
            return Refusal(reason=RefusalReason.TOO_MANY_ACTIONS, detail=limit), ticket
        once = parsed.acts_once_as()
        if once is not None:
            if once in self._signatures:
                replayed = "this signed statement was already acted on; sign a new one"
                return Refusal(reason=RefusalReason.STALE_STATEMENT, detail=replayed), ticket
            self._signatures.add(once)
        self._count += 1
        actor = verdict.approver or parsed.actor
        registry = lookup.registry_ref if lookup is not None else None
        return Queued(self._count, parsed, actor, verdict.key, raw, registry), ticket

    def _ticket(self, raw: Any) -> Ticket:
        claimed = field(raw, "step", int)
        if claimed is not None and claimed in self._dirty():
            step, cap = claimed, REFUSALS_PER_STEP
        else:
            step, cap = ELSEWHERE, REFUSALS_ELSEWHERE
        self._refusals[step] = count = self._refusals.get(step, 0) + 1
        return step, count, cap

    async def journal_refusal(
        self, raw: Any, refusal: Refusal, ticket: Ticket | None = None
    ) -> None:
        if self.closed:
            workflow.logger.warning("resolution after close refused, not journaled: %s", refusal)
            return
        await journal_refused(
            self._journal,
            "resolution",
            raw,
            refusal,
            saga_id=self._saga_id,
            phase=Phase.RESOLUTION_REFUSED,
            ticket=ticket or self._ticket(raw),
            bucket="step",
        )


def _refused(refusal: Refusal, *, journaled: bool) -> ApplicationError:
    return ApplicationError(
        message(refusal),
        refusal.reason.value,
        "journaled" if journaled else "not journaled",
        type="ResolutionRefused",
    )
