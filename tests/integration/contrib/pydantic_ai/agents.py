"""The tests' own workflows: the example clerk's tools under Pydantic AI's own
ApprovalRequiredToolset, which asks a person for charges over 1000 — while the shop's
toolbox runs charge_card without an approval (it is compensable, not irreversible) — and
the example clerk on a budget of two model requests, which its run exceeds after two
steps."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic_ai import Agent
    from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow, TemporalDurability
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.tools import RunContext, ToolDefinition
    from pydantic_ai.usage import UsageLimits

    from sagacity.contrib.pydantic_ai import SagaToolset
    from sagacity.examples.pydantic_ai_order import (
        ClerkOrder,
        ClerkReport,
        clerk,
        clerk_model,
        serve_order,
        shop_tools,
    )


def large_charge(ctx: RunContext[Any], tool_def: ToolDefinition, args: dict[str, Any]) -> bool:
    return tool_def.name == "charge_card" and int(args["amount"]) > 1000


strict_clerk = Agent(
    FunctionModel(clerk_model),
    name="strict_clerk",
    toolsets=[SagaToolset(shop_tools.approval_required(large_charge))],
    capabilities=[TemporalDurability()],
)


@workflow.defn(name="ApprovalByAmount")
class ApprovalByAmount(PydanticAIWorkflow):
    __pydantic_ai_agents__ = [strict_clerk]

    @workflow.run
    async def run(self, order: ClerkOrder) -> ClerkReport:
        return await serve_order(strict_clerk, order)


@workflow.defn(name="ClerkOnABudget")
class ClerkOnABudget(PydanticAIWorkflow):
    __pydantic_ai_agents__ = [clerk]

    @workflow.run
    async def run(self, order: ClerkOrder) -> ClerkReport:
        return await serve_order(clerk, order, UsageLimits(request_limit=2))
