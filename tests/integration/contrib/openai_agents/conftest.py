"""The OpenAI Agents adapter's rig: the example's agent workflow on the session's dev
server, a worker whose client has SagacityPlugin (journal on PostgreSQL, in a fresh
schema; the shop's toolbox) and SagaAgentsPlugin (the Agents SDK's model calls as
activities), and the SDK's chat-completions model pointed at the loopback server of the
model tests, which answers from a script and records every request.

The SDK's tracing is off: nothing may leave the machine.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"

import pytest
from agents import OpenAIProvider, set_tracing_disabled
from openai import AsyncOpenAI
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from sagacity.examples.openai_agents_order import (
    AgentOrder,
    AgentOrderReport,
    AgentOrderWorkflow,
    agent_plugins,
)
from sagacity.examples.orders import Shop
from sagacity.stores import JournalStore
from sagacity.tools._toolbox import Toolbox
from sagacity.worker.client._saga_client import SagaClient
from tests.integration.contrib.openai_agents.agent_workflows import AgentRunEnds
from tests.support.chat_server import ChatServer
from tests.support.pg_fixtures import pg_journal_url, pg_schema, pg_store, shop

__all__ = ["pg_journal_url", "pg_schema", "pg_store", "shop"]

set_tracing_disabled(True)


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


OrderHandle = WorkflowHandle[Any, AgentOrderReport]


@dataclass
class AgentRig:
    sagas: SagaClient
    temporal: Client
    store: JournalStore
    shop: Shop
    server: ChatServer
    task_queue: str

    async def start(
        self, request: str = "place the order"
    ) -> WorkflowHandle[Any, AgentOrderReport]:
        return await self.sagas.start_workflow(
            AgentOrderWorkflow.run,
            AgentOrder(request=request, model="test-model"),
            saga_id=f"agent-order-{uuid.uuid4().hex[:12]}",
        )


@pytest.fixture
async def rig(
    temporal_env: WorkflowEnvironment, pg_store: JournalStore, shop: Shop, chat_server: ChatServer
) -> AsyncIterator[AgentRig]:
    chat = AsyncOpenAI(base_url=chat_server.url, api_key="test", max_retries=0)
    provider = OpenAIProvider(openai_client=chat, use_responses=False)
    client = await Client.connect(
        temporal_env.client.service_client.config.target_host,
        namespace=temporal_env.client.namespace,
        plugins=agent_plugins(pg_store, Toolbox.build(shop), provider),
    )
    task_queue = f"agents-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=task_queue, workflows=[AgentOrderWorkflow, AgentRunEnds]):
        sagas = SagaClient(client, task_queue=task_queue, store=pg_store)
        yield AgentRig(sagas, client, pg_store, shop, chat_server, task_queue)
    await chat.close()
