"""The pending list against a flood (attack_flood): workflows of another type, or on a
task queue no worker polls, started with SagaStatus=AWAITING_APPROVAL, newer than the real
approvals, do not push a real pending saga off the list (the list covers every saga of the
namespace; the rows whose query answered come first, the fakes after them as unreadable);
a list cut at its limit says so; a row whose query does not answer is shown as unreadable
without holding the page. Real dev server, worker, inbox."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
import requests
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

from sagacity.worker.client import _client as api
from sagacity.worker.client._discovery import EVERY_SAGA, SagaSearch
from sagacity.worker.client._pending_list import pending_page
from sagacity.worker.inbox._server import InboxOptions, start_inbox
from sagacity.worker.inbox._source import SagaSource
from sagacity.workflows._models import SagaInput, ToolCall
from tests.support.inbox import InboxStack, free_port
from tests.support.workflows import eventually

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(240)]

WAITING = TypedSearchAttributes(
    [SearchAttributePair(SearchAttributeKey.for_keyword("SagaStatus"), "AWAITING_APPROVAL")]
)


async def real_wire(stack: InboxStack, name: str) -> str:
    saga_id = f"flood-{name}-{uuid.uuid4().hex[:6]}"
    call = ToolCall(
        tool="wire_transfer",
        args={"iban": "DE89370400440532013000", "amount": 1, "currency": "EUR", "payee": "A"},
    )
    await stack.starter.start(SagaInput(plan=[call]), saga_id=saga_id)
    await stack.client.wait_pending(saga_id, timeout=30)
    return saga_id


async def fakes(stack: InboxStack, count: int, *, kind: str, task_queue: str) -> list[str]:
    """Workflows nobody runs as a saga, started with SagaStatus=AWAITING_APPROVAL."""
    ids = [f"fake-{kind}-{uuid.uuid4().hex[:8]}" for _ in range(count)]
    temporal = stack.client.temporal
    await asyncio.gather(
        *(
            temporal.start_workflow(kind, id=i, task_queue=task_queue, search_attributes=WAITING)
            for i in ids
        )
    )
    return ids


async def terminate(stack: InboxStack, ids: list[str]) -> None:
    temporal = stack.client.temporal
    await asyncio.gather(*(temporal.get_workflow_handle(i).terminate() for i in ids))


async def test_fake_workflows_do_not_push_a_real_pending_saga_off_the_list(
    stack: InboxStack,
) -> None:
    first = await real_wire(stack, "first")
    second = await real_wire(stack, "second")
    flood = await fakes(stack, 4, kind="NotASaga", task_queue=stack.client.task_queue)
    flood += await fakes(stack, 4, kind="AgentSaga", task_queue=f"nobody-{uuid.uuid4().hex[:6]}")
    try:
        temporal = stack.client.temporal

        async def visible() -> bool:
            listed = await api.list_sagas(temporal, status="AWAITING_APPROVAL", limit=1000)
            return set(flood) | {first, second} <= {s.saga_id for s in listed}

        await eventually(visible, timeout=30)
        # The attack: a list on SagaStatus alone, cut at 8, holds the fakes only.
        by_status = await api.list_sagas(temporal, status="AWAITING_APPROVAL", limit=8)
        assert {s.saga_id for s in by_status} <= set(flood)

        page = await pending_page(temporal, EVERY_SAGA, limit=8)
        listed = [item.summary.saga_id for item in page.items]
        assert {first, second} <= set(listed) and page.more
        answered = [i for i in page.items if i.pending is not None]
        assert [i.summary.saga_id for i in answered][:2] == [second, first]
        assert page.items[: len(answered)] == answered  # the fakes come after every real one
        for item in page.items[len(answered) :]:
            assert item.summary.saga_id in flood and item.error is not None

        # The inbox's own page lists them first, the fakes after them as unreadable.
        text = await asyncio.to_thread(
            lambda: (
                requests.get(
                    f"http://127.0.0.1:{stack.inbox.url.rsplit(':', 1)[1]}/",
                    headers={"host": stack.inbox.url.removeprefix("http://")},
                    timeout=60,
                ).text
            )
        )
        shown = [text.find(fake) for fake in flood if fake in text]
        assert first in text and second in text
        assert all(text.index(first) < at and text.index(second) < at for at in shown)

        # Cut at 1: the newest is shown, and the page says more wait.
        cut = await pending_page(temporal, EVERY_SAGA, limit=1)
        assert [i.summary.saga_id for i in cut.items] == [second] and cut.more
        assert "more sagas await approval than the 1 shown" in cut.more_note()
        source = SagaSource(stack.client, limit=1)
        port = free_port()
        async with start_inbox(InboxOptions(port=port), source=source):
            small = await asyncio.to_thread(
                lambda: (
                    requests.get(
                        f"http://127.0.0.1:{port}/",
                        headers={"host": f"localhost:{port}"},
                        timeout=60,
                    ).text
                )
            )
        assert 'id="pending-more"' in small and "than the 1 shown" in small
        assert second in small and first not in small
    finally:
        await terminate(stack, flood)


async def test_a_row_whose_query_does_not_answer_is_shown_unreadable_in_time(
    stack: InboxStack,
) -> None:
    """A saga-typed workflow on a queue no worker polls: its query would wait the RPC
    deadline; the row's own timeout shows it as unreadable first."""
    dead_queue = f"nobody-{uuid.uuid4().hex[:6]}"
    ids = await fakes(stack, 3, kind="AgentSaga", task_queue=dead_queue)
    try:
        temporal = stack.client.temporal
        search = SagaSearch(task_queue=dead_queue)

        async def visible() -> bool:
            return len((await pending_page(temporal, search, row_timeout=0.01)).items) == 3

        await eventually(visible, timeout=30)
        started = time.monotonic()
        page = await pending_page(temporal, search, row_timeout=1.0)
        took = time.monotonic() - started
        assert {i.summary.saga_id for i in page.items} == set(ids)
        for item in page.items:
            assert item.pending is None and item.error is not None
            assert "did not answer within 1s" in item.error
        assert took < api.QUERY_TIMEOUT.total_seconds()
    finally:
        await terminate(stack, ids)
