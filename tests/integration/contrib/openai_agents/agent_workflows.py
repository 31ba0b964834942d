"""A test workflow for the ways an agent's run can end other than with an answer: a
tool whose failure the SDK raises instead of telling the model (failure_error_function
None), and a run the SDK gives up on (max_turns)."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agents import Agent, RunConfig, function_tool
    from pydantic import BaseModel

    from sagacity.contrib.openai_agents import run_agent
    from sagacity.examples.openai_agents_order import AgentOrderReport, order_agent
    from sagacity.workflows._saga import Saga, SagaFailedError, SagaOptions


@function_tool(failure_error_function=None)
def reserve_inventory(sku: str, qty: int) -> dict[str, Any]:
    """Reserve stock."""
    raise NotImplementedError


@function_tool(failure_error_function=None)
def ship_order(address: str) -> dict[str, Any]:
    """Ship."""
    raise NotImplementedError


class RunEnds(BaseModel):
    strict_tools: bool = False
    max_turns: int = 10


@workflow.defn(name="AgentRunEnds")
class AgentRunEnds:
    @workflow.run
    async def run(self, inp: RunEnds) -> AgentOrderReport:
        if inp.strict_tools:
            agent = Agent(
                name="strict clerk", model="test-model", tools=[reserve_inventory, ship_order]
            )
        else:
            agent = order_agent("test-model")
        try:
            async with Saga.open(SagaOptions()) as saga:
                await run_agent(
                    saga,
                    agent,
                    "go",
                    max_turns=inp.max_turns,
                    run_config=RunConfig(tracing_disabled=True),
                )
        except SagaFailedError as failed:
            return AgentOrderReport(
                status=failed.result.status.value, failure=failed.result.first_failure
            )
        return AgentOrderReport(status="COMPLETED")
