"""Where the inbox reads what it shows and sends what a person decides.

Nothing on a page comes from anywhere but the saga's own workflow (its queries, through
the SagaClient the CLI uses) and the journal store (its entries, its chain verified
here). `InboxSource` is that boundary: the web layer takes any object with these
methods, and `SagaSource` is the real one, over a connected SagaClient and the journal.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import quote

from pydantic import BaseModel

from sagacity.approval._signed_action import SignedAction
from sagacity.journal._chain import VerifyReport
from sagacity.journal._entry import JournalEntry
from sagacity.worker.client._client import SagaSummary
from sagacity.worker.client._discovery import EVERY_SAGA, SagaSearch
from sagacity.worker.client._pending_list import PendingPage, pending_page
from sagacity.worker.client._resolutions import DirtyItem
from sagacity.worker.client._saga_client import Review, SagaClient

__all__ = ["PENDING_LIMIT", "Approval", "InboxSource", "SagaSource", "temporal_ui_link"]

PENDING_LIMIT = 200
"""Rows on the inbox's list; the page says when more wait."""


@dataclass(frozen=True)
class Approval:
    """One pending approval as the page shows it: the request (its hash recomputed
    here), what Temporal knows of the saga, its journal so far and the chain check."""

    review: Review
    summary: SagaSummary
    journal: list[JournalEntry]
    verified: VerifyReport


class InboxSource(Protocol):
    """What the web layer reads and sends; every method raises sagacity's typed errors."""

    namespace: str
    temporal_ui: str | None

    async def pending(self) -> PendingPage: ...

    async def approval(self, saga_id: str) -> Approval: ...

    async def journal(self, saga_id: str) -> tuple[list[JournalEntry], VerifyReport]: ...

    async def dirty(self) -> list[DirtyItem]: ...

    async def send(self, saga_id: str, action: SignedAction) -> BaseModel: ...


def temporal_ui_link(base: str | None, namespace: str, summary: SagaSummary) -> str | None:
    """The saga's page in the Temporal UI (None when no UI address is configured)."""
    if not base:
        return None
    url = f"{base.rstrip('/')}/namespaces/{quote(namespace, safe='')}/workflows/"
    url += quote(summary.saga_id, safe="")
    return url + (f"/{quote(summary.run_id, safe='')}" if summary.run_id else "")


class SagaSource:
    """The real source: the SagaClient the CLI uses (its store set) and its journal."""

    def __init__(
        self,
        client: SagaClient,
        *,
        temporal_ui: str | None = None,
        search: SagaSearch = EVERY_SAGA,
        limit: int = PENDING_LIMIT,
    ) -> None:
        self.client = client
        self.namespace = client.temporal.namespace
        self.temporal_ui = temporal_ui
        self.search = search
        """The sagas listed (pending, needing a human): every saga of the namespace, in
        any workflow type on any task queue, unless it narrows (worker.client._discovery),
        as `sagacity pending` and `dirty` list them."""
        self.limit = limit
        self.temporal_address = client.temporal.service_client.config.target_host
        """Never shown on a page (worker.inbox.app.plain_message cuts it out)."""

    async def pending(self) -> PendingPage:
        """The same list as `sagacity pending` (worker.pending_list.pending_page)."""
        return await pending_page(self.client.temporal, self.search, limit=self.limit)

    async def approval(self, saga_id: str) -> Approval:
        review = await self.client.review(saga_id, verb="decide on")
        summary = await self.client.describe(saga_id)
        entries, report = await self.journal(saga_id)
        return Approval(review, summary, entries, report)

    async def journal(self, saga_id: str) -> tuple[list[JournalEntry], VerifyReport]:
        """The saga's entries and its chain verified from the store (off the event loop:
        a store call blocks)."""

        def read() -> tuple[list[JournalEntry], VerifyReport]:
            return self.client.journal(saga_id), self.client.verify(saga_id)

        return await asyncio.to_thread(read)

    async def dirty(self) -> list[DirtyItem]:
        return await self.client.needing_human(
            task_queue=self.search.task_queue,
            workflow_type=self.search.workflow_type,
            limit=self.limit,
        )

    async def send(self, saga_id: str, action: SignedAction) -> BaseModel:
        """A person's action (a decision, a resolution), through its kind's update
        (SagaClient.send): the saga's answer, or the kind's RefusedError."""
        return await self.client.send(saga_id, action)
