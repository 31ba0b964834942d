"""An in-memory InboxSource for the I/O-free tests of the web layer (no Temporal, no
journal): it answers with the PendingApproval a test gives and records what the pages
send. The browser tests use the real SagaSource."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from sagacity.approval._judge import approval_hash
from sagacity.approval._models import ApprovalDecision
from sagacity.approval._resolutions import Resolution
from sagacity.approval._signed_action import SignedAction
from sagacity.journal._canonical import canonical_text
from sagacity.journal._chain import VerifyReport
from sagacity.journal._entry import JournalEntry
from sagacity.worker.client._client import PendingItem, SagaNotFoundError, SagaSummary
from sagacity.worker.client._discovery import EVERY_SAGA
from sagacity.worker.client._pending_list import PendingPage
from sagacity.worker.client._resolutions import DirtyItem
from sagacity.worker.client._saga_client import Review
from sagacity.worker.inbox._source import Approval
from sagacity.workflows._models import DecisionResult, PendingApproval, ResolutionResult


def pending_of(saga_id: str, tool: str, payload: dict[str, Any]) -> PendingApproval:
    return PendingApproval(
        saga_id=saga_id,
        step=2,
        tool=tool,
        payload=payload,
        canonical_payload=canonical_text({"args": payload, "tool": tool}),
        payload_sha256=approval_hash(tool, payload),
        requested_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    )


def summary_of(saga_id: str, status: str = "AWAITING_APPROVAL") -> SagaSummary:
    started = datetime(2026, 1, 2, 3, 4, 0, tzinfo=UTC)
    return SagaSummary(saga_id, "run-1", status, "RUNNING", False, started, None, "tq")


@dataclass
class FakeSource:
    pendings: dict[str, PendingApproval] = field(default_factory=dict)
    dirty_items: list[DirtyItem] = field(default_factory=list)
    sent: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    fail_with: BaseException | None = None
    namespace: str = "default"
    temporal_ui: str | None = "http://127.0.0.1:8233"

    def _check(self) -> None:
        if self.fail_with is not None:
            raise self.fail_with

    async def pending(self) -> PendingPage:
        self._check()
        items = [PendingItem(summary_of(s), p) for s, p in self.pendings.items()]
        return PendingPage(items, False, 200, EVERY_SAGA, "the fake source was asked")

    async def approval(self, saga_id: str) -> Approval:
        self._check()
        if saga_id not in self.pendings:
            raise SagaNotFoundError(f"no saga {saga_id!r} in namespace 'default'")
        pending = self.pendings[saga_id]
        report = VerifyReport(saga_id, True, 2, "ab" * 32, False)
        return Approval(Review(pending, pending.payload_sha256), summary_of(saga_id), [], report)

    async def journal(self, saga_id: str) -> tuple[list[JournalEntry], VerifyReport]:
        return [], VerifyReport(saga_id, True, 0, "", False)

    async def dirty(self) -> list[DirtyItem]:
        self._check()
        return self.dirty_items

    async def send(self, saga_id: str, action: SignedAction) -> BaseModel:
        self.sent.append((saga_id, action.body()))
        if isinstance(action, ApprovalDecision):
            return DecisionResult(accepted=True, step=action.step, approve=action.approve)
        assert isinstance(action, Resolution)
        return ResolutionResult(
            action=action.action, step=action.step, actor=action.actor, outcome="done"
        )
