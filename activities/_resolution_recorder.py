"""Recording a person's resolution of a step whose outcome is unknown.

The journal, not the workflow's copy, decides whether the step is still unknown: if an
outcome landed since (an EXECUTED append the dead worker's database session committed
late), the journal is right, nothing is written and the workflow is told what it holds.
Otherwise two entries are appended: RESOLVED, with the person's statement (signed where
the worker has an approver registry), then the outcome they vouch for, with them as its
actor — EXECUTED with the step's arguments (from its INTENT) and the result they report,
or FAILED when the effect did not take place. From there every reader of the journal
(compensation, `plan_compensation`, auditors) sees an ordinary settled step, and whose
word settled it.

The outcome carries the INTENT's attempt number, so an EXECUTED of the lost attempt
arriving even later collides with it (one logical entry per attempt) instead of forking
the step's story; that collision is reported as a disagreement too.
"""

from __future__ import annotations

from typing import Any

from sagacity._errors import JournalConflictError, SagacityError
from sagacity.activities._journal_io import entry_ref, store_call
from sagacity.activities._models import ResolveStepInput, ResolveStepOutcome
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase
from sagacity.stores._base import JournalStore
from sagacity.tools._toolbox import Toolbox

OUTCOMES = (Phase.EXECUTED, Phase.FAILED)


def _outcome(entries: list[JournalEntry]) -> JournalEntry | None:
    return next((e for e in entries if e.phase in OUTCOMES and e.actor is None), None) or next(
        (e for e in entries if e.phase in OUTCOMES), None
    )


class ResolutionRecorder:
    def __init__(self, store: JournalStore, toolbox: Toolbox) -> None:
        self.store = store
        self.toolbox = toolbox

    def _compensable(self, tool: str) -> bool:
        """Whether the step's tool can be undone (the workflow may not know: a step whose
        every attempt was lost reports no kind)."""
        try:
            return self.toolbox.get(tool).compensation is not None
        except SagacityError:  # a tool this toolbox does not know cannot be undone here
            return False

    async def record(self, req: ResolveStepInput) -> ResolveStepOutcome:
        prior = await store_call(self.store.step_entries, req.saga_id, req.step)
        resolved = next(
            (e for e in prior if e.phase is Phase.RESOLVED and e.attempt == req.attempt), None
        )
        found = _outcome(prior)
        if found is not None and (resolved is None or found.actor != req.actor):
            return _disagrees(found)
        intent = next((e for e in prior if e.phase is Phase.INTENT), None)
        if intent is None:
            # Every attempt was lost before it could journal INTENT (the journal was down):
            # the tool never started. "Did not happen" is then the journal's word too.
            if not req.happened:
                return await self._nothing_started(req)
            return ResolveStepOutcome(
                disagrees="the journal holds no INTENT for this step: no attempt ever "
                "started the tool, so it cannot have happened (resolve it as did not happen)"
            )
        action = "happened" if req.happened else "did_not_happen"
        record: dict[str, Any] = {"action": action, "reason": req.reason, **req.evidence}
        try:
            resolved_entry = await store_call(
                self.store.append, _resolved(req, intent.tool, record)
            )
            outcome = await store_call(self.store.append, self._outcome_draft(req, intent))
        except JournalConflictError:
            again = _outcome(await store_call(self.store.step_entries, req.saga_id, req.step))
            if again is not None and again.actor != req.actor:
                return _disagrees(again)
            raise
        return ResolveStepOutcome(
            resolved=entry_ref(resolved_entry),
            outcome=entry_ref(outcome),
            compensable=self._compensable(intent.tool),
        )

    async def _nothing_started(self, req: ResolveStepInput) -> ResolveStepOutcome:
        """RESOLVED alone: with no INTENT there is no attempt whose outcome to record."""
        record = {"action": "did_not_happen", "reason": req.reason, **req.evidence}
        entry = await store_call(self.store.append, _resolved(req, req.tool, record))
        return ResolveStepOutcome(resolved=entry_ref(entry), compensable=False)

    def _outcome_draft(self, req: ResolveStepInput, intent: JournalEntry) -> EntryDraft:
        common: dict[str, Any] = {
            "step": req.step,
            "attempt": intent.attempt,
            "tool": intent.tool,
            "input": intent.input,
            "actor": req.actor,
        }
        if req.happened:
            return EntryDraft.new(req.saga_id, Phase.EXECUTED, result=req.result, **common)
        why = f": {req.reason}" if req.reason else ""
        return EntryDraft.new(
            req.saga_id,
            Phase.FAILED,
            error=f"did not take place, as {req.actor} established{why}"[:10_000],
            **common,
        )


def _resolved(req: ResolveStepInput, tool: str, record: dict[str, Any]) -> EntryDraft:
    """The RESOLVED entry: the person's statement and signature (or passkey assertion),
    what they said."""
    signed: dict[str, Any] = {"statement": req.statement, "signature": req.signature}
    if req.passkey is not None:
        signed["passkey"] = req.passkey
    return EntryDraft.new(
        req.saga_id,
        Phase.RESOLVED,
        step=req.step,
        attempt=req.attempt,
        tool=tool,
        input=signed,
        result=record,
        actor=req.actor,
    )


def _disagrees(found: JournalEntry) -> ResolveStepOutcome:
    return ResolveStepOutcome(
        outcome=entry_ref(found),
        disagrees=f"the journal already holds {found.phase.value} for this step (seq "
        f"{found.seq}{', by ' + found.actor if found.actor else ', from its worker'})",
    )
