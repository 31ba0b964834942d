"""OpenAI Agents SDK agents, run durably by Temporal's openai_agents plugin, as sagas.

Install with the `openai-agents` extra (`pip install 'sagacity[openai-agents]'`). In the
workflow, open the saga and run the agent through it:

    async with Saga.open(SagaOptions(approvers=FINANCE)) as saga:
        result = await run_agent(saga, agent, prompt)

Each function tool call of the agent is a journaled saga step run by the worker's
toolbox (the tool's Python body never runs); `needs_approval` waits on the saga's
payload-bound approval gate; a failed step fails the saga whatever the model says next,
and leaving the block compensates in reverse order. On the worker, connect the client
with `plugins=[SagacityPlugin(...), SagaAgentsPlugin(...)]` and check the agent's tools
against the toolbox at start with `check_agent_tools(agent, toolbox)`.
"""

from sagacity.contrib.openai_agents._check import check_agent_tools
from sagacity.contrib.openai_agents._errors import AgentToolsError, PluginOrderError
from sagacity.contrib.openai_agents._plugin import SagaAgentsPayloadConverter, SagaAgentsPlugin
from sagacity.contrib.openai_agents._runner import AGENT_RUN_FAILED, run_agent

__all__ = [
    "AGENT_RUN_FAILED",
    "AgentToolsError",
    "PluginOrderError",
    "SagaAgentsPayloadConverter",
    "SagaAgentsPlugin",
    "check_agent_tools",
    "run_agent",
]
