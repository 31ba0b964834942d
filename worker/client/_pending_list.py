"""The list of approvals waiting for a person, as `sagacity pending`, the inbox and
SagaClient.pending show it.

Sagas are found by the search attributes every saga sets, in any workflow type on any
task queue of the namespace (worker.client._discovery); a task queue or a workflow type
narrows the list only when asked for. The SagaStatus search attribute alone proves
nothing, though: any Temporal caller can start a workflow with
SagaStatus=AWAITING_APPROVAL set that no saga code runs. So each row is confirmed by the
saga's own `pending_approval` query, bounded in time: a row that does not answer is shown
as unreadable (it may be a real saga whose worker is down), and the rows that answered
come first. Visibility is read past the limit shown (SCAN rows per row shown), so a flood
of such workflows, newer than the real approvals, does not push those off the list; the
list says when its limit cut it, and an empty list says what was searched.
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio.client import Client

from sagacity.journal._phases import SagaStatus
from sagacity.worker.client._client import (
    PendingItem,
    SagaSummary,
    list_sagas,
    pending_approval,
    saga_handle,
)
from sagacity.worker.client._discovery import EVERY_SAGA, ROW_TIMEOUT, SagaSearch, ask_each
from sagacity.workflows._models import PendingApproval

__all__ = ["SCAN", "PendingPage", "pending_page"]

SCAN = 10
"""Visibility rows read per row shown: room for the real approvals behind a flood of
workflows that only claim to await one (they are asked, do not answer, and go last)."""


@dataclass(frozen=True)
class PendingPage:
    """The approvals listed (those that answered first, each part newest first), whether
    the limit left more out, and what was searched."""

    items: list[PendingItem]
    more: bool
    limit: int
    search: SagaSearch
    searched: str
    """What visibility was asked (namespace and filters): said with an empty list."""

    def more_note(self) -> str:
        """What to say when the limit cut the list, or ''."""
        if not self.more:
            return ""
        return (
            f"more sagas await approval than the {self.limit} shown (those that answered "
            f"first, newest first; {self.search.filters()}): narrow with --task-queue or "
            "--workflow-type, decide the oldest first, or raise the limit"
        )

    def empty_note(self) -> str:
        """What an empty list says: none found in what was searched, never more."""
        return f"no saga is awaiting approval: {self.searched}"


async def pending_page(
    client: Client,
    search: SagaSearch = EVERY_SAGA,
    *,
    limit: int = 200,
    row_timeout: float = ROW_TIMEOUT,
) -> PendingPage:
    """Every saga `search` finds listed as AWAITING_APPROVAL, with what it waits for: at
    most `limit`, those whose query answered first, saying whether more were left out.
    Visibility lags, so a saga decided a moment ago is left out (its query answers None);
    a saga whose query fails or takes longer than `row_timeout` is kept with the reason,
    so nothing awaiting a person is silently hidden."""
    scan = limit * SCAN
    waiting = SagaStatus.AWAITING_APPROVAL
    listed = await list_sagas(client, status=waiting, search=search, limit=scan + 1)

    async def ask(summary: SagaSummary) -> PendingApproval | None:
        return await pending_approval(saga_handle(client, summary.saga_id))

    answers = await ask_each(listed[:scan], ask, row_timeout)
    items = [
        PendingItem(s, None, f"unreadable: {a}") if isinstance(a, str) else PendingItem(s, a)
        for s, a in zip(listed, answers, strict=False)
    ]
    answered = [i for i in items if i.pending is not None]
    unreadable = [i for i in items if i.error is not None]
    kept = answered + unreadable
    more = len(listed) > scan or len(kept) > limit
    searched = search.describe(client.namespace, f"with SagaStatus {waiting.value}")
    return PendingPage(kept[:limit], more, limit, search, searched)
