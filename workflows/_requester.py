"""The saga's start checks its requester claim with the worker's registry answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sagacity.approval._registry_file import KeyLookup
    from sagacity.approval._requester import judge_requester


async def check_requester(
    saga_id: str,
    claim: Any,
    lookup: Callable[[str | None], Awaitable[KeyLookup]],
    now: datetime,
) -> tuple[str | None, dict[str, Any] | None]:
    key_id = getattr(claim, "key_id", None)
    answer = await lookup(key_id if isinstance(key_id, str) and len(key_id) <= 64 else None)
    return judge_requester(saga_id, claim, answer, now)
