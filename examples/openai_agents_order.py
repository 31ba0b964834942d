"""An OpenAI Agents SDK agent that places an order, run as a saga.

The agent is an ordinary Agents SDK agent with function tools; Temporal's OpenAI Agents
plugin runs its model calls as activities, and `run_agent` runs each of its tool calls as
a step of the workflow's saga: journaled, executed by the shop's toolbox on the worker
(examples.orders), the wire (`needs_approval=True`) waiting for a person to approve its
exact payload. If a step fails — the carrier refuses, the wire is rejected — the saga is
failed whatever the agent says next, and the charge and the reservation are undone,
newest first, when the run ends.

Run it against any chat-completions server (OpenAI, or Ollama and the like through
OPENAI_BASE_URL) with sagacity's embedded dev server and the default journal:

    pip install 'sagacity[openai-agents]'
    OPENAI_API_KEY=... python -m sagacity.examples.openai_agents_order \\
        "Reserve 2 widgets, charge 2500 cents, ship to 1 Main St, then wire 2500 \\
        to DE89370400440532013000"
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.client import Client, Plugin
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from agents import Agent, ModelProvider, OpenAIProvider, RunConfig, function_tool
    from pydantic import BaseModel
    from temporalio.openai_agents import ModelActivityParameters

    from sagacity import Toolbox, default_journal_url
    from sagacity.contrib.openai_agents import SagaAgentsPlugin, check_agent_tools, run_agent
    from sagacity.examples.orders import toolbox
    from sagacity.stores import JournalStore, open_store
    from sagacity.worker import (
        NothingPendingError,
        Saga,
        SagacityPlugin,
        SagaClient,
        SagaFailedError,
        SagaOptions,
    )
    from sagacity.worker._devserver import start_dev_server

FINANCE = ["alice@example.com", "bob@example.com"]
"""Who may approve the wire: fixed in code, never taken from the order."""

INSTRUCTIONS = (
    "You place orders for the shop. Reserve the stock, charge the card, ship the order, "
    "and pay the supplier by wire when asked. Amounts are in cents. Say 'done' at the end."
)


# The agent's tools. Their bodies never run: run_agent sends each call to the worker's
# toolbox, whose tool of the same name (examples.orders.Shop) runs as a journaled step
# and is undone by its compensation. check_agent_tools keeps the two in step.
@function_tool
def reserve_inventory(sku: str, qty: int) -> dict[str, Any]:
    """Reserve `qty` units of `sku` for this order."""
    raise NotImplementedError("runs on the worker, as a saga step")


@function_tool
def charge_card(amount: int) -> dict[str, Any]:
    """Charge `amount` (in cents) to the customer's card."""
    raise NotImplementedError("runs on the worker, as a saga step")


@function_tool
def ship_order(address: str) -> dict[str, Any]:
    """Hand the order to the carrier for delivery to `address`."""
    raise NotImplementedError("runs on the worker, as a saga step")


@function_tool(needs_approval=True)
def send_wire_transfer(iban: str, amount: int) -> dict[str, Any]:
    """Pay the supplier `amount` (in cents) by bank wire to `iban`. Cannot be undone."""
    raise NotImplementedError("runs on the worker, as a saga step, once approved")


def order_agent(model: str) -> Agent[Any]:
    return Agent(
        name="order clerk",
        instructions=INSTRUCTIONS,
        model=model,
        tools=[reserve_inventory, charge_card, ship_order, send_wire_transfer],
    )


class AgentOrder(BaseModel):
    request: str
    """What the customer asked for, in words: the agent's input."""
    model: str = "gpt-4o-mini"


class AgentOrderReport(BaseModel):
    status: str
    """The saga's status: COMPLETED, or how it ended (COMPENSATED...)."""
    agent_said: str | None = None
    """The agent's final output, whatever the saga's status."""
    failure: str | None = None


@workflow.defn(name="OpenAIAgentsOrder")
class AgentOrderWorkflow:
    @workflow.run
    async def run(self, order: AgentOrder) -> AgentOrderReport:
        said: str | None = None
        try:
            async with Saga.open(SagaOptions(approvers=FINANCE)) as saga:
                result = await run_agent(
                    saga,
                    order_agent(order.model),
                    order.request,
                    run_config=RunConfig(tracing_disabled=True),
                )
                said = str(result.final_output)
        except SagaFailedError as failed:
            # Compensated: the report says so, next to what the agent claimed.
            return AgentOrderReport(
                status=failed.result.status.value,
                agent_said=said,
                failure=failed.result.first_failure,
            )
        return AgentOrderReport(status="COMPLETED", agent_said=said)


def agent_plugins(
    store: JournalStore, toolbox: Toolbox, provider: ModelProvider | None = None
) -> list[Plugin]:
    """The client's plugins, in this order: sagacity's (journal, toolbox), then the
    agents plugin (model calls as activities, its converter shared with sagacity). The
    agent's tools are checked against the toolbox first: a mismatch stops the worker."""
    check_agent_tools(order_agent("any"), toolbox)
    model_params = ModelActivityParameters(start_to_close_timeout=timedelta(seconds=120))
    return [
        SagacityPlugin(store=store, toolbox=toolbox),
        SagaAgentsPlugin(model_params=model_params, model_provider=provider),
    ]


async def main(request: str) -> None:  # pragma: no cover - needs a model server
    env = await start_dev_server(banner=False, log_level="error")
    store = open_store(default_journal_url())
    try:
        target = env.client.service_client.config.target_host
        chat = OpenAIProvider(use_responses=False)  # OPENAI_BASE_URL, OPENAI_API_KEY
        client = await Client.connect(target, plugins=agent_plugins(store, toolbox(), chat))
        saga_id = f"agent-order-{uuid.uuid4().hex[:8]}"
        async with Worker(client, task_queue="agent-orders", workflows=[AgentOrderWorkflow]):
            sagas = SagaClient(client, task_queue="agent-orders", store=store)
            handle = await sagas.start_workflow(
                AgentOrderWorkflow.run, AgentOrder(request=request), saga_id=saga_id
            )
            try:
                review = await sagas.wait_pending(saga_id, timeout=600)
            except NothingPendingError:
                pass  # the agent finished without a wire
            else:
                print(f"{review.pending.tool} {review.pending.payload}")
                print(f"sha256 {review.local_sha256}")
                if input("approve as alice@example.com? [y/N] ").strip().lower() == "y":
                    await sagas.approve(saga_id, approver="alice@example.com")
                else:
                    await sagas.reject(saga_id, reason="not approved at the prompt")
            print((await handle.result()).model_dump_json(indent=2))
            print("journal verifies:", sagas.verify(saga_id).ok)
    finally:
        store.close()
        await env.shutdown()


if __name__ == "__main__":  # pragma: no cover
    asyncio.run(main(" ".join(sys.argv[1:]) or "Reserve 2 widgets and charge 2500 cents"))
