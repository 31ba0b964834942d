"""An order clerk written with Pydantic AI, run through its Temporal integration, whose
every tool call is a step of a sagacity saga.

The agent keeps its Pydantic AI declarations (what the model sees: names, docstrings,
parameters, and `requires_approval=True` on the wire); the shop's sagacity toolbox
(examples/orders.py) runs the calls, journals them, gates the wire on the approval of its
exact payload and undoes the reservation and the charge when a step fails — even though
the clerk, told of the failure, reports that the order went through.

    python -m sagacity.examples.pydantic_ai_order worker           # Temporal at localhost:7233
    python -m sagacity.examples.pydantic_ai_order start clerk-1    # ships: COMPLETED
    python -m sagacity.examples.pydantic_ai_order start clerk-2 --address nowhere   # COMPENSATED
    python -m sagacity.examples.pydantic_ai_order start clerk-3 --wire DE89370400440532013000

The clerk's model is a script (a Pydantic AI FunctionModel) so the example runs offline;
give the agent any Pydantic AI model instead. `sagacity journal clerk-2` shows the steps.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel
    from pydantic_ai import Agent, FunctionToolset
    from pydantic_ai.durable_exec.temporal import (
        PydanticAIPlugin,
        PydanticAIWorkflow,
        TemporalDurability,
    )
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import UsageLimits

    from sagacity.contrib.pydantic_ai import SagaToolset, through_saga
    from sagacity.worker import Saga, SagaFailedError, SagaOptions

ELSEWHERE = "implemented by the shop's toolbox (examples/orders.py): it runs as a saga step"

shop_tools: FunctionToolset[None] = FunctionToolset(id="shop")
"""The clerk's tools as Pydantic AI declares them. Their bodies never run: SagaToolset
sends each call to the saga, and the worker's toolbox runs it."""


@shop_tools.tool_plain
def reserve_inventory(sku: str, qty: int) -> dict[str, Any]:
    """Reserve `qty` units of `sku` for this order."""
    raise NotImplementedError(ELSEWHERE)


@shop_tools.tool_plain
def charge_card(amount: int, currency: str = "EUR", card: str = "tok_visa") -> dict[str, Any]:
    """Charge `amount` (minor units) to the customer's card."""
    raise NotImplementedError(ELSEWHERE)


@shop_tools.tool_plain
def ship_order(address: str, fail: bool = False) -> dict[str, Any]:
    """Hand the order to the carrier."""
    raise NotImplementedError(ELSEWHERE)


@shop_tools.tool_plain(requires_approval=True)
def send_wire_transfer(iban: str, amount: int, currency: str = "EUR") -> dict[str, Any]:
    """Pay the supplier by bank wire (a person approves it first)."""
    raise NotImplementedError(ELSEWHERE)


class ClerkOrder(BaseModel):
    sku: str = "widget"
    qty: int = 2
    amount: int = 1250
    """In minor units (cents)."""
    address: str = "Main St 1"
    supplier_iban: str | None = None
    """Pay the supplier this order's amount by wire (waits for an approval)."""


def clerk_plan(order: ClerkOrder) -> list[ToolCallPart]:
    plan = [
        ToolCallPart("reserve_inventory", {"sku": order.sku, "qty": order.qty}),
        ToolCallPart("charge_card", {"amount": order.amount}),
        ToolCallPart("ship_order", {"address": order.address}),
    ]
    if order.supplier_iban is not None:
        wire = {"iban": order.supplier_iban, "amount": order.amount}
        plan.append(ToolCallPart("send_wire_transfer", wire))
    return plan


def clerk_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The scripted clerk: the order's tool calls one per turn, then "done" — whatever the
    tools answered, as a model that glosses over a failed call would."""
    first = messages[0]
    assert isinstance(first, ModelRequest)
    [prompt] = [p.content for p in first.parts if isinstance(p, UserPromptPart)]
    order = ClerkOrder.model_validate_json(str(prompt))
    made = sum(isinstance(m, ModelResponse) for m in messages)
    plan = clerk_plan(order)
    if made < len(plan):
        return ModelResponse(parts=[plan[made]])
    return ModelResponse(parts=[TextPart(f"Order placed: {order.qty} x {order.sku}. All done!")])


clerk = Agent(
    FunctionModel(clerk_model),
    name="order_clerk",
    toolsets=[SagaToolset(shop_tools)],
    capabilities=[TemporalDurability()],
)

FINANCE = ["alice@example.com", "bob@example.com"]
"""Who may approve the supplier wire: fixed in code, not by whoever submits an order."""


class ClerkReport(BaseModel):
    status: str
    """The saga's status: COMPLETED, or how it ended (COMPENSATED...)."""
    agent_said: str | None = None
    failure: str | None = None
    told: list[str] = []
    """The failed tool calls the agent was told of (and carried on after)."""


def failed_calls(messages: list[ModelMessage]) -> list[str]:
    return [
        f"{part.tool_name}: {part.content}"
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart) and part.outcome == "failed"
    ]


async def serve_order(
    agent: Agent[None, str], order: ClerkOrder, limits: UsageLimits | None = None
) -> ClerkReport:
    """Workflow code: the agent's run inside the saga; what it said beside how it ended."""
    said, told = None, []
    try:
        async with Saga.open(SagaOptions(approvers=FINANCE)) as saga:
            run = agent.run(order.model_dump_json(), usage_limits=limits)
            result = await through_saga(saga, run)
            said, told = result.output, failed_calls(result.all_messages())
    except SagaFailedError as failed:
        # Compensated: what the clerk said is kept beside what really happened.
        ended = failed.result
        return ClerkReport(
            status=ended.status.value, agent_said=said, failure=ended.first_failure, told=told
        )
    return ClerkReport(status="COMPLETED", agent_said=said, told=told)


@workflow.defn(name="OrderClerk")
class OrderClerk(PydanticAIWorkflow):
    __pydantic_ai_agents__ = [clerk]

    @workflow.run
    async def run(self, order: ClerkOrder) -> ClerkReport:
        return await serve_order(clerk, order)


# ---- the worker and the starter ----------------------------------------------------------


async def run_worker(task_queue: str = "clerk") -> None:
    from temporalio.client import Client
    from temporalio.envconfig import ClientConfig
    from temporalio.worker import Worker

    from sagacity import default_journal_url, open_store
    from sagacity.contrib.pydantic_ai import check_agent
    from sagacity.examples.orders import toolbox
    from sagacity.worker import SagacityPlugin

    shop = toolbox()  # the shop at $SAGACITY_SHOP_PATH (default: in sagacity's data home)
    check_agent(clerk, shop)  # a tool the toolbox lacks or would not gate fails here
    store = open_store(default_journal_url())  # where `sagacity journal ID` looks
    try:
        plugin = SagacityPlugin(store=store, toolbox=shop)
        config = ClientConfig.load_client_connect_config()  # TEMPORAL_ADDRESS, profiles, TLS
        config.setdefault("target_host", "localhost:7233")
        client = await Client.connect(**config, plugins=[plugin, PydanticAIPlugin()])
        worker = Worker(client, task_queue=task_queue, workflows=[OrderClerk])
        print("worker ready", flush=True)
        await worker.run()
    finally:
        store.close()


async def place_order(
    saga_id: str, order: ClerkOrder, *, task_queue: str = "clerk", approver: str = FINANCE[0]
) -> ClerkReport:
    from sagacity.worker import SagaClient

    client = await SagaClient.connect(task_queue=task_queue)
    handle = await client.start_workflow(OrderClerk.run, order, saga_id=saga_id)
    if order.supplier_iban is not None:
        review = await client.wait_pending(saga_id)
        print(f"approving {review.pending.tool} {review.pending.payload}")
        print(f"  sha256 {review.local_sha256}")
        await client.approve(saga_id, approver=approver)
    report = await handle.result()
    print(f"{report.status}: the clerk said {report.agent_said!r}")
    if report.failure:
        print(f"  what happened: {report.failure}")
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sagacity.examples.pydantic_ai_order")
    parser.add_argument("--task-queue", default="clerk")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("worker")
    start = commands.add_parser("start")
    start.add_argument("saga_id")
    start.add_argument("--address", default="Main St 1", help="'nowhere' makes shipping fail")
    start.add_argument("--wire", metavar="IBAN", help="also pay the supplier by wire")
    args = parser.parse_args(argv)
    if args.command == "worker":
        asyncio.run(run_worker(args.task_queue))
    else:
        order = ClerkOrder(address=args.address, supplier_iban=args.wire)
        asyncio.run(place_order(args.saga_id, order, task_queue=args.task_queue))


if __name__ == "__main__":
    main()
