"""Pydantic AI agents as sagas: an agent run through Pydantic AI's Temporal integration
has each call of its function tools run as a step of the saga its workflow opened.

    agent = Agent(model, name="shop", toolsets=[SagaToolset(shop_tools)],
                  capabilities=[TemporalDurability()])

    @workflow.defn
    class OrderAgent(PydanticAIWorkflow):
        __pydantic_ai_agents__ = [agent]

        @workflow.run
        async def run(self, prompt: str) -> str:
            async with Saga.open(SagaOptions(approvers=["alice@example.com"])) as saga:
                result = await through_saga(saga, agent.run(prompt))
            return result.output

The model requests stay Pydantic AI's activities; each tool call is `saga.call` in the
workflow, run by the worker's sagacity toolbox (journaled, gated, compensated). Check the
agent against that toolbox at worker start with `check_agent`. Needs the `pydantic-ai`
extra (`pip install 'sagacity[pydantic-ai]'`).
"""

try:
    import pydantic_ai  # noqa: F401
except ImportError as missing:  # pragma: no cover - exercised in a subprocess
    raise ImportError(
        "sagacity.contrib.pydantic_ai needs Pydantic AI with its Temporal support: "
        "pip install 'sagacity[pydantic-ai]'"
    ) from missing

from sagacity.contrib.pydantic_ai._check import AgentCheck, AgentToolboxMismatch, check_agent
from sagacity.contrib.pydantic_ai._desk import APPROVAL_NOT_GATED, through_saga
from sagacity.contrib.pydantic_ai._toolset import SagaToolset, SagaToolsetError

__all__ = [
    "APPROVAL_NOT_GATED",
    "AgentCheck",
    "AgentToolboxMismatch",
    "SagaToolset",
    "SagaToolsetError",
    "check_agent",
    "through_saga",
]
