"""Operators find sagas by status with a visibility query.

Visibility is eventually consistent, so each query is polled until it shows the saga
(bounded); the negative checks are made on the same answer that shows the positive one.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from temporalio.client import Client

from sagacity.journal._phases import SagaStatus
from sagacity.worker.client._client import saga_result
from sagacity.workflows._inspection import SAGA_NEEDS_HUMAN, SAGA_STATUS
from sagacity.workflows._models import SagaInput, SagaView, ToolCall
from tests.support.workflows import accept_when_dirty, eventually, refund_refused

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(60)]

VISIBILITY_DEADLINE_S = 20.0


async def _ids(client: Client, query: str) -> set[str]:
    return {wf.id async for wf in client.list_workflows(query)}


async def _poll_until_listed(client: Client, query: str, saga_id: str) -> set[str]:
    deadline = time.monotonic() + VISIBILITY_DEADLINE_S
    while True:
        ids = await _ids(client, query)
        if saga_id in ids:
            return ids
        if time.monotonic() > deadline:
            pytest.fail(f"{saga_id} not listed by {query!r} within {VISIBILITY_DEADLINE_S}s")
        await asyncio.sleep(0.1)


async def test_sagas_are_found_by_status(saga) -> None:  # type: ignore[no-untyped-def]
    waiting = await saga.start(
        SagaInput(
            plan=[
                ToolCall(tool="reserve_inventory", args={"sku": "widget", "qty": 1}),
                ToolCall(
                    tool="send_wire_transfer",
                    args={"iban": "DE89370400440532013000", "amount": 100},
                ),
            ]
        )
    )
    try:
        completed = await saga.run(
            SagaInput(plan=[ToolCall(tool="charge_card", args={"amount": 5})])
        )
        assert completed.status is SagaStatus.COMPLETED

        deadline = time.monotonic() + VISIBILITY_DEADLINE_S
        while (await waiting.query("status", result_type=SagaView)).status is not (
            SagaStatus.AWAITING_APPROVAL
        ):
            assert time.monotonic() < deadline, "saga never reached AWAITING_APPROVAL"
            await asyncio.sleep(0.05)

        awaiting_ids = await _poll_until_listed(
            saga.client, 'SagaStatus="AWAITING_APPROVAL"', waiting.id
        )
        assert completed.saga_id not in awaiting_ids

        completed_ids = await _poll_until_listed(
            saga.client, 'SagaStatus="COMPLETED"', completed.saga_id
        )
        assert waiting.id not in completed_ids

        # The attributes a UI column shows, on each saga.
        described = await waiting.describe()
        assert described.typed_search_attributes.get(SAGA_STATUS) == "AWAITING_APPROVAL"
        assert described.typed_search_attributes.get(SAGA_NEEDS_HUMAN) is False
        finished = await saga.client.get_workflow_handle(completed.saga_id).describe()
        assert finished.typed_search_attributes.get(SAGA_STATUS) == "COMPLETED"
    finally:
        await waiting.terminate("visibility test over")


async def test_a_saga_whose_compensation_failed_is_found_as_needing_a_human(saga) -> None:  # type: ignore[no-untyped-def]
    """The result says a human is needed when a compensation failed; the search attribute
    an operator filters on, and the status query, must say the same."""
    # The last step fails, and the refund of step 2 fails on every attempt.
    handle = await saga.start(refund_refused(saga.shop, compensation_attempts=1))

    # While it waits for a person: the status, the search attributes an operator filters
    # on and the listing say so, before any result exists.
    async def waiting() -> SagaView | None:
        view = await handle.query("status", result_type=SagaView)
        return view if view.status is SagaStatus.NEEDS_HUMAN else None

    view = await eventually(waiting, 30)
    described = await handle.describe()
    assert described.typed_search_attributes.get(SAGA_STATUS) == "NEEDS_HUMAN"
    assert (described.typed_search_attributes.get(SAGA_NEEDS_HUMAN), view.needs_human) == (
        True,
        True,
    ), "the saga waits for a human but SagaNeedsHuman / the status query say False"
    await _poll_until_listed(saga.client, 'SagaStatus="NEEDS_HUMAN"', handle.id)
    await _poll_until_listed(saga.client, "SagaNeedsHuman=true", handle.id)
    await accept_when_dirty(handle, reason="refunded by hand")
    result = await asyncio.wait_for(saga_result(handle), 30)
    assert result.status is SagaStatus.ACCEPTED and not result.needs_human
    described = await handle.describe()
    assert described.typed_search_attributes.get(SAGA_NEEDS_HUMAN) is False
    assert described.typed_search_attributes.get(SAGA_STATUS) == "ACCEPTED"
    await _poll_until_listed(saga.client, "SagaNeedsHuman=false", result.saga_id)
