"""A child saga's options are refused before anything starts when they would end it
without compensation: checked outside a workflow, since nothing reaches Temporal first."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.workflow import ParentClosePolicy

from sagacity.workflows._child_saga import execute_child_saga, start_child_saga
from sagacity.workflows._saga_errors import SagaUsageError


@pytest.mark.parametrize("door", [start_child_saga, execute_child_saga])
async def test_an_option_that_ends_a_saga_uncompensated_is_refused(door: Any) -> None:
    with pytest.raises(SagaUsageError, match="takes no execution_timeout, retry_policy"):
        await door("OrderWorkflow", id="o-1", retry_policy=object(), execution_timeout=1)
    with pytest.raises(SagaUsageError, match="TERMINATE would end the child saga"):
        await door("OrderWorkflow", id="o-1", parent_close_policy=ParentClosePolicy.TERMINATE)
    with pytest.raises(SagaUsageError, match="needs an id of its own"):
        await door("OrderWorkflow", id="")
