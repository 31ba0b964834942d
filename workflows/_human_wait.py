"""A dirty saga waits for a person: the wait, and how each accepted action is applied.

After compensating what it knows, a saga left with dirty steps (an unknown outcome, a
compensation that failed after its retries) journals NEEDS_HUMAN — what is dirty, the
policy, the deadline — and waits durably (a Temporal timer: no thread is held). The
actions people send through the desk (workflows.human_desk) are applied here, in the
saga's own code and in order:

- `happened`: RESOLVED and the EXECUTED the person vouches for are journaled (by the
  `sagacity.resolve_step` activity, which takes the journal's word if an outcome landed
  meanwhile); a compensable step is then compensated like any executed step, anything
  else is recorded as done (it stays live: NOT_COMPENSABLE);
- `did_not_happen`: RESOLVED and a FAILED in the person's name; nothing to undo;
- `retry_compensation`: RESOLVED, then the compensation again (same idempotency key,
  the step's own retry policy); a failure is journaled COMPENSATION_FAILED once more,
  under the next attempt number, and the step stays dirty;
- `accept`: RESOLVED for the saga, naming the steps accepted; the wait ends.

The wait ends when nothing is dirty (the saga closes COMPENSATED), on an acceptance
(ACCEPTED) or at the deadline (UNRESOLVED, still flagged). A cancel does not end it: a
cancellation has no author to record, and leaving dirt unresolved is a decision a person
signs for (`close --accept`) or the deadline takes.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sagacity.activities import RESOLVE_STEP
    from sagacity.activities._models import (
        EntryRef,
        JournalEventInput,
        ResolveStepInput,
        ResolveStepOutcome,
    )
    from sagacity.approval._judge import Refusal, RefusalReason
    from sagacity.approval._registry_file import KeyLookup
    from sagacity.approval._resolutions import APPLIES, DirtyKind
    from sagacity.journal._bounds import cut
    from sagacity.journal._phases import Phase, SagaStatus, StepStatus
    from sagacity.tools._compensation import ExecutedStep
    from sagacity.tools._decorators import ToolKind
    from sagacity.workflows._models import (
        CompensationReport,
        DirtyStep,
        ResolutionReport,
        ResolutionResult,
        SagaOptions,
        StepReport,
    )

from sagacity.workflows._compensator import LOCAL_FAILURES, compensate_step, failure_cause
from sagacity.workflows._human_desk import HumanDesk, Queued
from sagacity.workflows._pinned import PinnedActivities

DIRTY_STATUS = {
    StepStatus.UNKNOWN: DirtyKind.UNKNOWN_OUTCOME,
    StepStatus.COMPENSATION_FAILED: DirtyKind.COMPENSATION_FAILED,
}


class HumanWait:
    """The waiting half of a saga (a mixin of workflows.saga_engine.SagaCore)."""

    saga_id: str
    options: SagaOptions
    steps: dict[int, StepReport]
    compensations: list[CompensationReport]
    pinned: PinnedActivities
    desk: HumanDesk
    resolutions: list[ResolutionReport]
    accepted_dirty: list[DirtyStep]

    async def journal(self, event: JournalEventInput) -> EntryRef:
        raise NotImplementedError

    async def _lookup_key(self, key_id: str | None) -> KeyLookup:
        raise NotImplementedError

    def _on_compensated(self, report: CompensationReport) -> None:
        raise NotImplementedError

    def _saw(self, ref: EntryRef | None) -> None:
        raise NotImplementedError

    def set_status(self, status: SagaStatus) -> None:
        raise NotImplementedError

    def publish(self) -> None:
        raise NotImplementedError

    # ---- what is dirty -----------------------------------------------------------------------

    def dirty(self) -> dict[int, DirtyKind]:
        return {
            s: DIRTY_STATUS[r.status] for s, r in self.steps.items() if r.status in DIRTY_STATUS
        }

    def dirty_steps(self) -> list[DirtyStep]:
        return [self._dirty_step(self.steps[s], kind) for s, kind in sorted(self.dirty().items())]

    def _dirty_step(self, report: StepReport, kind: DirtyKind) -> DirtyStep:
        if kind is DirtyKind.UNKNOWN_OUTCOME and report.intent_seq is None:
            known = (
                "no attempt reported back, so the saga holds no INTENT for it (check the "
                f"journal: without an INTENT the tool never started): {report.error}"
            )
        elif kind is DirtyKind.UNKNOWN_OUTCOME:
            known = f"INTENT journaled (seq {report.intent_seq}) and no outcome: {report.error}"
        else:
            failed = [c for c in self.compensations if c.step == report.step and not c.ok]
            error = failed[-1].error if failed else "(no error recorded)"
            rounds = f" ({len(failed)} rounds)" if len(failed) > 1 else ""
            known = f"it ran, and its compensation failed{rounds} (seq {report.seq}): {error}"
        return DirtyStep(
            step=report.step,
            tool=report.tool,
            args=report.args,
            kind=kind,
            known=known[:2_000],
            since=report.dirty_since,
            intent_seq=report.intent_seq,
            seq=report.seq if kind is DirtyKind.COMPENSATION_FAILED else None,
            actions=list(APPLIES[kind]),
        )

    # ---- the wait ----------------------------------------------------------------------------

    async def await_human(self) -> None:
        desk = self.desk
        try:
            registry = await self._lookup_key(None)
        except LOCAL_FAILURES as exc:  # the worker cannot say: fail closed, never fail the saga
            workflow.logger.error("approver registry unusable while waiting: %s", exc)
            registry = KeyLookup(configured=True)
        refusal = desk.rolled_back(registry)
        if refusal is not None:  # an older registry than this saga saw: sign nothing with it
            registry = KeyLookup(configured=True, version=registry.version)
        now = workflow.now()
        deadline = now + timedelta(seconds=desk.policy.deadline_seconds)
        listed = [
            {"step": d.step, "tool": d.tool, "kind": d.kind.value, "known": d.known}
            for d in self.dirty_steps()
        ]
        await self.journal(
            JournalEventInput(
                saga_id=self.saga_id,
                phase=Phase.NEEDS_HUMAN,
                input={
                    "dirty": listed,
                    "resolution": desk.policy.model_dump(mode="json"),
                    "registry": registry.registry_ref,
                },
                result={"deadline": deadline.isoformat()},
            )
        )
        desk.open(now, deadline, registry)
        self.set_status(SagaStatus.NEEDS_HUMAN)
        while self.dirty() and not desk.accepted:
            left = deadline - workflow.now()
            try:
                if left <= timedelta(0):
                    raise TimeoutError
                await workflow.wait_condition(lambda: bool(desk.queue), timeout=left)
            except TimeoutError:
                desk.expired = True
                break
            queued = desk.queue.pop(0)
            desk.applying = queued.step
            try:
                desk.done[queued.number] = await self._apply(queued)
            except LOCAL_FAILURES as exc:
                # A journal write no retry can make (a conflict, a closed chain): the action
                # is refused, the saga keeps waiting; never a failed workflow.
                workflow.logger.error("resolution %d not applied: %s", queued.number, exc)
                desk.done[queued.number] = Refusal(
                    reason=RefusalReason.JOURNAL_DISAGREES,
                    detail=f"the journal refused the action ({failure_cause(exc)[:500]}); "
                    "nothing was applied",
                )
            finally:
                desk.applying = None
            self.publish()
        why = "accepted" if desk.accepted else "past its deadline" if desk.expired else "clean"
        for late in desk.stop_waiting():
            refusal = Refusal(
                reason=RefusalReason.NOT_WAITING,
                detail=f"the saga stopped waiting for a person before this was applied ({why})",
            )
            await desk.journal_refusal(late.raw, refusal)
            desk.done[late.number] = refusal

    async def _apply(self, queued: Queued) -> ResolutionResult | Refusal:
        action = queued.action
        if action.action == "accept":
            return await self._accept(queued)
        step = action.step
        assert step is not None
        report = self.steps[step]
        if action.action == "retry_compensation":
            ref = await self._journal_resolved(queued, step, report.tool)
            outcome = await self._compensate_again(report)
            return self._answer(queued, ref, outcome)
        return await self._record_outcome(queued, report)

    async def _record_outcome(
        self, queued: Queued, report: StepReport
    ) -> ResolutionResult | Refusal:
        action, step = queued.action, report.step
        happened = action.action == "happened"
        recorded: ResolveStepOutcome = await self.pinned.run_local(
            RESOLVE_STEP,
            ResolveStepInput(
                saga_id=self.saga_id,
                step=step,
                tool=report.tool,
                happened=happened,
                attempt=self.desk.next_attempt(step),
                actor=queued.actor,
                statement=action.statement(),
                signature=action.signature,
                passkey=queued.signed_input().get("passkey"),
                result=action.result,
                reason=action.reason,
                evidence=queued.evidence(),
                worker=self.pinned.worker,
            ),
            ResolveStepOutcome,
        )
        out = recorded.outcome
        self._saw(recorded.resolved)
        self._saw(out)
        if recorded.disagrees is not None or recorded.resolved is None:
            refusal = Refusal(
                reason=RefusalReason.JOURNAL_DISAGREES,
                detail=f"{recorded.disagrees}; the saga takes the journal's word, and the "
                "resolution is not applied",
            )
            await self.desk.journal_refusal(queued.raw, refusal)
            if out is not None:
                await self._take_journal_outcome(report, out)
            return refusal
        status = StepStatus.EXECUTED if happened else StepStatus.DID_NOT_HAPPEN
        self.steps[step] = report.model_copy(
            update={
                "status": status,
                "seq": out.seq if out is not None else report.seq,
                "hash": out.hash if out is not None else report.hash,
                "resolved_by": queued.actor,
                "result": action.result if happened else None,
            }
        )
        self.desk.resolved[step] = f"{action.action} by {queued.actor}, seq {recorded.resolved.seq}"
        if not happened:
            return self._answer(queued, recorded.resolved, "nothing to undo")
        compensable = (
            recorded.compensable
            if recorded.compensable is not None
            else report.tool_kind is ToolKind.COMPENSABLE
        )
        if not compensable:
            return self._answer(
                queued, recorded.resolved, f"recorded as done; nothing undoes {report.tool}"
            )
        if report.tool_kind is not ToolKind.COMPENSABLE:  # the step's kind was never reported
            self.steps[step] = self.steps[step].model_copy(
                update={"tool_kind": ToolKind.COMPENSABLE}
            )
        outcome = await self._compensate_again(self.steps[step])
        return self._answer(queued, recorded.resolved, outcome)

    async def _take_journal_outcome(self, report: StepReport, out: EntryRef) -> None:
        """The journal held an outcome the saga did not know of: take it (an EXECUTED
        effect is compensated like any other; a FAILED one settles the step)."""
        status = StepStatus.EXECUTED if out.phase is Phase.EXECUTED else StepStatus.FAILED
        self.steps[report.step] = report.model_copy(
            update={"status": status, "seq": out.seq, "hash": out.hash, "error": None}
        )
        if status is StepStatus.EXECUTED and report.tool_kind is ToolKind.COMPENSABLE:
            await self._compensate_again(self.steps[report.step])

    async def _compensate_again(self, report: StepReport) -> str:
        rounds = sum(1 for c in self.compensations if c.step == report.step and not c.ok)
        done = await compensate_step(
            self.saga_id,
            self.options,
            ExecutedStep(report.step, report.tool, report.seq or 0, None, None),
            report,
            self.journal,
            self.pinned.worker,
            self.pinned.queue(),
            attempt=rounds + 1,
        )
        self._on_compensated(done)
        if done.ok:
            return "compensated"
        return f"its compensation failed: {cut(done.error or '', 500)}"

    async def _accept(self, queued: Queued) -> ResolutionResult:
        dirty = self.dirty_steps()
        ref = await self._journal_resolved(queued, 0, "", steps=[d.step for d in dirty])
        for d in dirty:
            self.steps[d.step] = self.steps[d.step].model_copy(
                update={"status": StepStatus.ACCEPTED, "resolved_by": queued.actor}
            )
        self.accepted_dirty = dirty
        self.desk.accepted = True
        return self._answer(queued, ref, f"accepted as is: steps {[d.step for d in dirty]}")

    async def _journal_resolved(
        self, queued: Queued, step: int, tool: str, *, steps: list[int] | None = None
    ) -> EntryRef:
        action = queued.action
        result: dict[str, Any] = {
            "action": action.action,
            "reason": action.reason,
            **queued.evidence(),
        }
        if steps is not None:
            result["steps"] = steps
        return await self.journal(
            JournalEventInput(
                saga_id=self.saga_id,
                phase=Phase.RESOLVED,
                step=step,
                attempt=self.desk.next_attempt(step),
                tool=tool,
                actor=queued.actor,
                input=queued.signed_input(),
                result=result,
            )
        )

    def _answer(self, queued: Queued, ref: EntryRef, outcome: str) -> ResolutionResult:
        action = queued.action
        at: datetime = workflow.now()
        report = ResolutionReport(
            action=action.action,
            step=action.step,
            steps=list(action.steps or []),
            actor=queued.actor,
            reason=action.reason,
            outcome=outcome,
            seq=ref.seq,
            hash=ref.hash,
            at=at,
        )
        self.resolutions.append(report)
        return ResolutionResult(
            **report.model_dump(),
            dirty=sorted(self.dirty()),
            status=(
                SagaStatus.ACCEPTED
                if self.desk.accepted
                else SagaStatus.NEEDS_HUMAN
                if self.dirty()
                else SagaStatus.COMPENSATED
            ),
        )
