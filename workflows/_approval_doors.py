"""The approval gate's doors: the `approve`/`reject` signals and the `decide` update.

The `decide` update is accepted whatever it carries and refused by its handler after the
refusal is journaled: a validator's rejection leaves no history, so a refusal through a
raw update would leave no evidence. Only once the saga is closing does the validator
reject (nothing is journaled then, and late updates should not grow the history).

While a request waits for its decision, every decision is judged against it at once.
While the saga works (no request waiting), a decision naming a step it has not reached
yet waits for that step: after a worker is lost, the journal can already show a request
(AWAITING_APPROVAL was written) that the replaying workflow has not re-reached, and a
human who answers it must not be refused for being early. It is judged once a request
waits, or refused once the saga is past that step, continues as new or closes. At most
DEFERRED_LIMIT decisions wait at once; more are judged at once. Part of
workflows.approval_gate.ApprovalGate (a mixin over its state).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from sagacity.activities._models import EntryRef
    from sagacity.approval._judge import ApprovalRequest, Refusal
    from sagacity.workflows._models import DecisionResult

from sagacity.workflows._approval_evidence import field, message
from sagacity.workflows._approval_judging import Judging

DEFERRED_LIMIT = 32
"""Decisions about a step not reached yet that may wait for it at once (each waiting
decision is a coroutine the workflow keeps; junk naming future steps cannot pile up)."""


class Doors(Judging):
    """The doors of the approval gate (see the module docstring)."""

    _reached: Callable[[], int]
    _released: bool
    _deferred: int
    _judging: int
    _abandoned: dict[int, tuple[ApprovalRequest, str | None]]

    def _caught_up(self, step: int) -> bool:
        return (
            self._released
            or self._closed
            or self._reached() > step
            or step in self._decided_steps
            or self._pending is not None
        )

    @contextlib.asynccontextmanager
    async def _in_turn(self, raw: Any) -> AsyncIterator[None]:
        """Wait (bounded) until the saga has reached the step the decision names, then
        let the caller judge and journal it; `settled` stays False until it has."""
        step = field(raw, "step", int)
        self._judging += 1
        try:
            if step is None or self._caught_up(step) or self._deferred >= DEFERRED_LIMIT:
                yield
                return
            self._deferred += 1
            try:
                await workflow.wait_condition(lambda: self._caught_up(step))
            finally:
                self._deferred -= 1
            yield
        finally:
            self._judging -= 1

    async def on_signal(self, raw: Any, *, approve: bool) -> None:
        async with self._in_turn(raw):
            judged, ticket = await self._judged(raw, approve)
            if isinstance(judged, Refusal):
                await self._journal_refusal(raw, judged, ticket)
            else:
                self._accept(*judged)

    def validate(self, raw: Any) -> None:
        """Reject only once the saga is closing: every other refusal is journaled by the
        handler (a rejected update leaves no history, hence no evidence)."""
        if self._closed:
            judged = self._judge(raw, None)
            assert isinstance(judged, Refusal)  # nothing is pending once closed
            raise ApplicationError(message(judged), judged.reason.value, type="ApprovalRefused")

    async def on_update(self, raw: Any) -> DecisionResult:
        """Judge the decision and answer once it is journaled (or the saga stopped
        waiting): with its entry, and how far the step's quorum has come."""
        async with self._in_turn(raw):
            judged, ticket = await self._judged(raw, None)
            if isinstance(judged, Refusal):  # state changed since the validator ran
                await self._journal_refusal(raw, judged, ticket)
                raise ApplicationError(
                    message(judged), judged.reason.value, "journaled", type="ApprovalRefused"
                )
            decision, verdict, lookup = judged
            number = self._accept(decision, verdict, lookup)
        step = decision.step
        await workflow.wait_condition(
            lambda: number in self._vote_refs or step in self._abandoned or self._closed
        )
        ref: EntryRef | None = self._vote_refs.get(number)
        if ref is None:
            raise ApplicationError(
                "the saga stopped waiting for this approval (cancelled) before the decision "
                "took effect; nothing ran",
                "ABANDONED",
                type="ApprovalRefused",
            )
        return DecisionResult(
            accepted=True,
            step=step,
            approve=decision.approve,
            seq=ref.seq,
            hash=ref.hash,
            approver=verdict.approver,
            approvals=len(self._counted) if decision.approve else None,
            quorum=self._requirement.quorum,
            needs=None
            if step in self._decided_steps
            else self._requirement.needs(len(self._counted)),
        )
