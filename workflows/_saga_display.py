"""What a saga tells people: its status, its views, its search attributes and the current
details the Temporal UI shows. A mixin of workflows.saga_engine.SagaCore (over its state);
pure bookkeeping, safe in workflow code."""

from __future__ import annotations

from collections.abc import Reversible
from itertools import islice

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sagacity.approval._resolutions import DirtyKind
    from sagacity.journal._phases import SagaStatus, StepStatus
    from sagacity.text._saga_details import MAX_STEPS, saga_details
    from sagacity.workflows._models import SagaView, StepReport

from sagacity.workflows._approval_gate import ApprovalGate
from sagacity.workflows._human_wait import HumanWait
from sagacity.workflows._inspection import SAGA_NEEDS_HUMAN, SAGA_STATUS


def _newest(reports: Reversible[StepReport]) -> list[StepReport]:
    """The newest MAX_STEPS reports, oldest first, without copying every report: publish
    runs on every step of sagas hundreds of steps long."""
    return list(islice(reversed(reports), MAX_STEPS))[::-1]


class SagaDisplay(HumanWait):
    status: SagaStatus
    stranded: bool
    failure: str | None
    gate: ApprovalGate
    _published: tuple[str, bool] | None

    def set_status(self, status: SagaStatus) -> None:
        self.status = status
        self.publish()

    def unknown_steps(self) -> list[int]:
        """Steps whose outcome is unknown (INTENT journaled, no outcome), including those a
        person accepted as unknown (accepting does not make an outcome known)."""
        accepted = {d.step for d in self.accepted_dirty if d.kind is DirtyKind.UNKNOWN_OUTCOME}
        return sorted(
            s for s, r in self.steps.items() if r.status == StepStatus.UNKNOWN or s in accepted
        )

    def needs_human(self) -> bool:
        """The one definition: an unknown outcome, or a compensation that failed, that no
        person has resolved or accepted."""
        return self.stranded or bool(self.dirty())

    def view(self) -> SagaView:
        return SagaView(
            saga_id=self.saga_id,
            status=self.status,
            needs_human=self.needs_human(),
            steps=len(self.steps),
            first_failure=self.failure,
            pending_approval=self.gate.pending_view(),
            dirty=self.dirty_steps(),
            human_deadline=self.desk.deadline if self.desk.waiting_since else None,
        )

    def publish(self) -> None:
        """Search attributes and current details, as the Temporal UI shows them.

        Search attributes are upserted only when they change: each upsert is a command
        and an event in history, and a saga of hundreds of steps should not pay for one
        per step."""
        attributes = (self.status.value, self.needs_human())
        if attributes != self._published:
            self._published = attributes
            workflow.upsert_search_attributes(
                [SAGA_STATUS.value_set(attributes[0]), SAGA_NEEDS_HUMAN.value_set(attributes[1])]
            )
        dirty = self.dirty_steps() if self.status is SagaStatus.NEEDS_HUMAN else []
        pending = self.gate.pending_view()
        workflow.set_current_details(
            saga_details(
                saga_id=self.saga_id,
                status=self.status.value,
                steps=[r.model_dump(mode="json") for r in _newest(self.steps.values())],
                step_count=len(self.steps),
                failure=self.failure,
                pending=None if pending is None else pending.model_dump(mode="json"),
                dirty=[d.model_dump(mode="json") for d in dirty],
            )
        )
