from __future__ import annotations

from sagacity.journal._chain import verify_chain
from sagacity.journal._phases import SagaStatus
from sagacity.workflows._models import SagaInput
from tests.support.workflows import CHARGE, RESERVE, SHIP


async def test_happy(saga) -> None:
    result = await saga.run(SagaInput(plan=[RESERVE, CHARGE, SHIP]))
    print(result)
    assert result.status is SagaStatus.COMPLETED
    entries = list(saga.store.entries(result.saga_id))
    for e in entries:
        print(e.seq, e.phase, e.step, e.tool)
    assert verify_chain(result.saga_id, entries).ok
