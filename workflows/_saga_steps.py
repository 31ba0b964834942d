"""One tool call of a saga, and what the saga records of its steps: a mixin of
workflows.saga_engine.SagaCore (over its state), in workflow code.

A step runs as the `sagacity.run_tool` activity; an irreversible one comes back
NEEDS_APPROVAL with the call's Payload, waits on the approval gate for a decision bound to
that payload's hash, and runs again with the hash approved. Each outcome becomes the
step's report (workflows.reporting), and each journal entry it names the saga's head.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import is_cancelled_exception as is_cancelled

with workflow.unsafe.imports_passed_through():
    from sagacity.activities import JOURNAL_EVENT, RUN_TOOL
    from sagacity.activities._models import (
        EntryRef,
        JournalEventInput,
        OutcomeKind,
        RunToolInput,
        ToolCall,
        ToolOutcome,
    )
    from sagacity.journal._phases import Phase, SagaStatus, StepStatus
    from sagacity.tools._decorators import ToolKind
    from sagacity.workflows._models import CompensationReport, SagaOptions, StepReport

from sagacity.workflows._approval_gate import ApprovalGate
from sagacity.workflows._compensator import failure_cause, tool_options
from sagacity.workflows._inspection import call_summary
from sagacity.workflows._pinned import PinnedActivities
from sagacity.workflows._reporting import step_report
from sagacity.workflows._saga_display import SagaDisplay
from sagacity.workflows._saga_errors import tool_failure


class SagaSteps(SagaDisplay):
    options: SagaOptions
    saga_id: str
    pinned: PinnedActivities
    gate: ApprovalGate
    steps: dict[int, StepReport]
    compensations: list[CompensationReport]
    next_step: int
    refused: bool
    approval_tools: set[str]
    _head: EntryRef | None

    def fail(self, reason: str, *, refused: bool = False) -> None:
        """Fail the saga (the first failure is the one reported). `refused`: nothing was
        attempted because the work was refused up front (closes as REFUSED)."""
        if self.failure is None:
            self.failure = reason
            self.refused = refused

    async def _step(self, call: ToolCall) -> ToolOutcome:
        self.next_step += 1
        step = self.next_step
        outcome = await self._run_tool(step, call, None)
        if outcome.kind is OutcomeKind.NEEDS_APPROVAL:
            assert outcome.payload is not None  # ToolOutcome refuses one without it
            self._record(outcome, status=StepStatus.AWAITING_APPROVAL)
            self.set_status(SagaStatus.AWAITING_APPROVAL)
            timeout = timedelta(seconds=self.options.approval_timeout_seconds)
            decision = await self.gate.wait(outcome, workflow.now(), timeout)
            if not decision.approve:
                self._record(
                    outcome,
                    status=StepStatus.REJECTED,
                    approver=decision.actor,
                    error=decision.reason,
                )
                self.fail(f"step {step} ({outcome.tool}) rejected: {decision.reason}")
                return outcome
            if self.failure is not None:  # failed while this step waited: it never runs
                self._record(
                    outcome,
                    status=StepStatus.REJECTED,
                    approver=decision.actor,
                    error="approved, but the saga failed before the step could run; nothing ran",
                )
                return outcome
            self.set_status(SagaStatus.RUNNING)
            outcome = await self._run_tool(step, call, outcome.payload.sha256)
            self._record(outcome, approver=decision.actor, call=call)
            if outcome.kind is OutcomeKind.REFUSED:
                self.fail(f"step {step} ({outcome.tool}) refused after approval: {outcome.error}")
        else:
            self._record(outcome, call=call)
        if outcome.result_unjournalable:
            self.fail(f"step {step} ({outcome.tool}) ran, but {outcome.error}")
        if outcome.kind in (OutcomeKind.FAILED, OutcomeKind.UNKNOWN, OutcomeKind.FENCED):
            self.fail(f"step {step} ({outcome.tool}) {outcome.kind.value.lower()}: {outcome.error}")
        return outcome

    def expect_approval(self, tools: Iterable[str]) -> None:
        self.approval_tools.update(tools)

    def _activity_summary(self, call: ToolCall, approved: str | None) -> str:
        """What the Temporal UI names the step's activity: a call that will wait for
        approval is checked first (nothing runs), the approved one runs."""
        summary = call_summary(call.tool, call.args)
        if approved is not None:
            return "run approved " + summary
        if call.tool in self.approval_tools:
            return "approval check " + summary
        return summary

    async def _run_tool(self, step: int, call: ToolCall, approved: str | None) -> ToolOutcome:
        opts = self.options
        try:
            outcome: ToolOutcome = await self.pinned.run(
                RUN_TOOL,
                RunToolInput(
                    saga_id=self.saga_id,
                    step=step,
                    call=call,
                    allowed_tools=opts.allowed_tools,
                    approved_sha256=approved,
                    model_result_limit=opts.model_result_limit,
                    worker=self.pinned.worker,
                ),
                result_type=ToolOutcome,
                **tool_options(opts, opts.tool_attempts, longest_wait_seconds=30),
                summary=self._activity_summary(call, approved),
            )
            if outcome.tool_kind is ToolKind.IRREVERSIBLE:
                self.approval_tools.add(outcome.tool)
            return outcome
        except ActivityError as exc:
            failed = tool_failure(exc)
            if failed is not None:  # the tool failed, journaled FAILED: its outcome
                return failed
            unknown = ToolOutcome(kind=OutcomeKind.UNKNOWN, tool=call.tool, step=step)
            if is_cancelled(exc):
                # Interrupted mid-call: the tool may or may not have applied its effect.
                cancelled = unknown.model_copy(update={"error": "cancelled during the call"})
                self._record(cancelled, call=call)
                raise
            # No outcome came back: whatever the tool did is unknown.
            cause = failure_cause(exc)[:2_000]
            retryable = not (isinstance(exc.cause, ApplicationError) and exc.cause.non_retryable)
            how = f"after {opts.tool_attempts} attempts" if retryable else "(not retryable)"
            return unknown.model_copy(update={"error": f"no outcome {how}: {cause}"})

    def _on_compensated(self, report: CompensationReport) -> None:
        self.compensations.append(report)
        if report.seq is not None and report.hash is not None:
            phase = Phase.COMPENSATED if report.ok else Phase.COMPENSATION_FAILED
            self._saw(EntryRef(seq=report.seq, hash=report.hash, phase=phase))
        status = StepStatus.COMPENSATED if report.ok else StepStatus.COMPENSATION_FAILED
        update: dict[str, object] = {"status": status, "seq": report.seq, "hash": report.hash}
        if not report.ok:
            update["dirty_since"] = workflow.now()
        self.steps[report.step] = self.steps[report.step].model_copy(update=update)
        self.publish()

    def _mark_not_compensable(self) -> None:
        """Steps that ran and that nothing can undo stay live after compensation: say so."""
        for step, report in list(self.steps.items()):
            if (
                report.status is StepStatus.EXECUTED
                and report.tool_kind is not ToolKind.COMPENSABLE
            ):
                self.steps[step] = report.model_copy(update={"status": StepStatus.NOT_COMPENSABLE})

    # ---- bookkeeping -----------------------------------------------------------------------

    async def journal(self, event: JournalEventInput) -> EntryRef:
        """Journal through a local activity on this worker (the pinned worker's queue if
        this worker has another toolbox or journal: never into another journal)."""
        if self.pinned.worker is not None:
            event = event.model_copy(update={"worker": self.pinned.worker})
        ref: EntryRef = await self.pinned.run_local(JOURNAL_EVENT, event, EntryRef)
        self._saw(ref)
        return ref

    def _saw(self, ref: EntryRef | None) -> None:
        """Keep the newest journal entry this saga knows of (its head, handed over on
        continue-as-new and checked against the journal there)."""
        if ref is not None and (self._head is None or ref.seq > self._head.seq):
            self._head = ref

    def _record(
        self,
        outcome: ToolOutcome,
        *,
        status: StepStatus | None = None,
        approver: str | None = None,
        error: str | None = None,
        call: ToolCall | None = None,
    ) -> None:
        """Report the step of `outcome`. An UNKNOWN one that no attempt came back from has
        no payload: the report keeps the `call`'s own arguments, what a person needs to
        see to find out whether it took effect."""
        self._saw(outcome.intent)
        self._saw(outcome.outcome)
        previous = self.steps.get(outcome.step)
        lost = outcome.kind is OutcomeKind.UNKNOWN and outcome.payload is None
        report = step_report(
            outcome,
            status=status,
            approver=approver or (previous.approver if previous else None),
            error=error,
            asked=call.args if lost and call is not None else None,
        )
        if report.status is StepStatus.UNKNOWN:
            report = report.model_copy(update={"dirty_since": workflow.now()})
        self.steps[outcome.step] = report
        self.publish()
