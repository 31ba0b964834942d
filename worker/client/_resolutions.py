"""The client side of dirty state: list what needs a person, and resolve it.

A saga left dirty (an unknown outcome, a compensation that failed) waits in
NEEDS_HUMAN; `dirty_sagas` lists every saga flagged as needing a human (waiting, and
closed UNRESOLVED) with what is dirty, `needing_human` adds the sagas whose workflow
ended without closing their journal (terminated, timed out: worker.ended_sagas) and says
what it searched, and `resolve` sends one action through the
`resolve` update, which answers once the saga has applied and journaled it — or with a
refusal (ResolutionRefusedError, journaled by the saga as RESOLUTION_REFUSED), by the
one path of every signed action (worker.client_actions). With a signer the action is a
statement signed by the person's key (required where the worker has an approver
registry).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from temporalio.client import Client

from sagacity.approval._resolutions import ACTIONS, Action, Resolution
from sagacity.approval._signing import SigningKey
from sagacity.stores import JournalStore
from sagacity.worker.client._actions import build_action, made_by, send_action
from sagacity.worker.client._client import (
    SagaClientError,
    SagaHandle,
    SagaSummary,
    _query,
    list_sagas,
    saga_handle,
)
from sagacity.worker.client._discovery import EVERY_SAGA, SagaSearch, ask_each
from sagacity.worker.client._ended_sagas import EndedSaga, find_ended
from sagacity.worker.client._errors import ResolutionRefusedError
from sagacity.workflows._models import DirtyStep, ResolutionResult

__all__ = [
    "Action",
    "DirtyItem",
    "NeedingHuman",
    "ResolutionRefusedError",
    "dirty_sagas",
    "needing_human",
    "resolution_of",
    "resolve",
    "saga_dirty",
]


@dataclass(frozen=True)
class DirtyItem:
    summary: SagaSummary
    dirty: list[DirtyStep]
    error: str | None = None
    ended: EndedSaga | None = None
    """Set when the saga's workflow ended without closing its journal (terminated, timed
    out): its executed steps, how it ended and what resolves it."""


class NeedingHuman(list[DirtyItem]):
    """Every saga needing a human, and what was searched to find them: `searched` says
    each search and what it covered, `not_searched` what could not be searched and why.
    An empty list is "none found in what was searched", never more."""

    def __init__(
        self,
        items: Iterable[DirtyItem] = (),
        *,
        searched: Iterable[str] = (),
        not_searched: Iterable[str] = (),
    ) -> None:
        super().__init__(items)
        self.searched = list(searched)
        self.not_searched = list(not_searched)


async def saga_dirty(handle: SagaHandle) -> list[DirtyStep]:
    """The `dirty` query: steps that need a person (needs a worker)."""
    dirty: list[DirtyStep] = await _query(handle, "dirty", list[DirtyStep])
    return dirty


async def dirty_sagas(
    client: Client, *, limit: int | None = None, search: SagaSearch = EVERY_SAGA
) -> list[DirtyItem]:
    """Every saga `search` finds flagged as needing a human, in any workflow type on any
    task queue unless it narrows (worker.client._discovery), newest first, with what is
    dirty. A saga whose query fails or does not answer in time is kept with the reason:
    nothing needing a human is hidden."""
    listed = await list_sagas(client, needs_human=True, limit=limit, search=search)

    async def ask(summary: SagaSummary) -> list[DirtyStep]:
        return await saga_dirty(saga_handle(client, summary.saga_id))

    answers = await ask_each(listed, ask)
    return [
        DirtyItem(s, [], a) if isinstance(a, str) else DirtyItem(s, a)
        for s, a in zip(listed, answers, strict=True)
    ]


async def needing_human(
    client: Client,
    store: JournalStore | None,
    *,
    limit: int | None = None,
    search: SagaSearch = EVERY_SAGA,
    journal_name: str | None = None,
    why_no_journal: str = "no journal was given",
) -> NeedingHuman:
    """The sagas flagged as needing a human (`dirty_sagas`) and those whose workflow ended
    without closing their journal (worker.ended_sagas), one item per saga, with what was
    searched. A flagged saga that also ended carries both."""
    flagged = await dirty_sagas(client, limit=limit, search=search)
    search_ended = await find_ended(
        client,
        store,
        journal_name=journal_name,
        why_no_journal=why_no_journal,
        limit=limit,
        within=search,
    )
    ended = {e.saga_id: e for e in search_ended.found}
    items = [replace(i, ended=ended.pop(i.summary.saga_id, None)) for i in flagged]
    items += [DirtyItem(e.summary, [], ended=e) for e in ended.values()]
    flags = f"{search.describe(client.namespace, 'flagged SagaNeedsHuman')} ({len(flagged)})"
    return NeedingHuman(
        items, searched=[flags, *search_ended.searched], not_searched=search_ended.not_searched
    )


def resolution_of(
    saga_id: str,
    action: Action,
    *,
    actor: str | None,
    step: int | None = None,
    steps: list[int] | None = None,
    result: Any = None,
    reason: str = "",
    signer: SigningKey | None = None,
) -> Resolution:
    """One action, signed by `signer` when given (its owner is the actor), else unsigned
    under `actor` (SagaClientError when malformed: an unknown action, no actor)."""
    if action not in ACTIONS:
        raise SagaClientError(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}")
    made = build_action(
        Resolution, saga_id=saga_id, action=action, step=step, steps=steps, result=result,
        reason=reason, actor=actor,
    )  # fmt: skip
    return made_by(made, signer)


async def resolve(handle: SagaHandle, action: Resolution) -> ResolutionResult:
    """Send one action and return what the saga did (journaled RESOLVED and its effect)."""
    return await send_action(handle, action)
