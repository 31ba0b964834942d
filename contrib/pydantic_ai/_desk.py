"""The desk between a Pydantic AI run and the saga: tool calls in, saga steps out.

Pydantic AI runs every tool call in an asyncio task of its own, and the saga takes its
steps only from the workflow's run code (the task that opened it), one at a time, so that
an error cannot escape through a task that would fail the workflow without compensating.
`through_saga` therefore runs the agent in a task and serves its tool calls from the
calling task: each call waits at the desk, the desk runs it as `saga.call` and hands back
the result, or a ToolFailed that tells the model the step did not complete. The saga is
failed from then on, whatever the model does next: leaving the saga block compensates.

Everything here is workflow code, deterministic: the order in which calls reach the desk
is the order of Temporal's event loop.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic_ai.exceptions import ToolFailed
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sagacity.activities import CHECK_PLAN
    from sagacity.activities._models import CheckPlanInput, PlanCheck, ToolCall

from sagacity.contrib._replies import answer
from sagacity.workflows._saga import Saga, SagaUsageError, StepError

T = TypeVar("T")

_DESK: ContextVar[ToolDesk | None] = ContextVar("sagacity_pydantic_ai_desk", default=None)

APPROVAL_NOT_GATED = "ApprovalNotGated"
"""StepError type of a call Pydantic AI declares approval-required whose toolbox tool
would run without an approval: refused before it ran."""


def failed_call(exc: StepError) -> ToolFailed:
    """What the model is told when a step did not complete."""
    return ToolFailed(
        f"{exc.message}. The saga has failed: no further tool will run, and the steps "
        "already done are undone when this run ends."
    )


def not_gated(tool: str) -> str:
    return (
        f"{tool!r} was not run: Pydantic AI declares it approval-required, but the worker's "
        "toolbox would run it without an approval. Declare it @irreversible in the toolbox "
        "(it then waits for a person to approve its exact payload), or drop the approval "
        "from its Pydantic AI declaration"
    )


@dataclass
class ToolRequest:
    """One tool call waiting at the desk."""

    tool: str
    args: dict[str, Any]
    approval: bool
    reply: asyncio.Future[Any]


@dataclass
class ToolDesk:
    """Serves the tool calls of one agent run as steps of one saga."""

    saga: Saga
    waiting: deque[ToolRequest] = field(default_factory=deque)
    gated: set[str] = field(default_factory=set)
    """Tools the pinned worker's toolbox is known to gate on approval (asked once each)."""

    async def ask(self, tool: str, args: dict[str, Any], *, approval: bool) -> Any:
        """From the tool call's own task: wait for the saga to run the call."""
        reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiting.append(ToolRequest(tool, args, approval, reply))
        return await reply

    async def serve(self, request: ToolRequest) -> None:
        """From the saga's task: run the call as a step and answer the tool call."""
        if request.reply.done():  # the tool call was cancelled while it waited
            return
        await answer(request.reply, self._step(request), failed_call)

    async def _step(self, request: ToolRequest) -> Any:
        ask = request.approval and self.saga.failure is None and request.tool not in self.gated
        if ask and await self._toolbox_gates(request) is False:
            reason = not_gated(request.tool)
            self.saga.fail(f"call refused before it ran: {reason}", refused=True)
            raise StepError(reason, outcome=None, error_type=APPROVAL_NOT_GATED)
        return await self.saga.call(request.tool, **request.args)

    async def _toolbox_gates(self, request: ToolRequest) -> bool | None:
        """Whether the saga's toolbox waits for an approval before it runs this call
        (None: the call has a problem of its own, which `saga.call` refuses it for). Asked
        of the pinned worker by the same local activity that checks an AgentSaga plan."""
        saga = self.saga
        check: PlanCheck = await saga.pinned.run_local(
            CHECK_PLAN,
            CheckPlanInput(
                saga_id=saga.saga_id,
                plan=[ToolCall(tool=request.tool, args=request.args)],
                allowed_tools=saga.options.allowed_tools,
                worker=saga.pinned.worker,
            ),
            PlanCheck,
        )
        if check.problems:
            return None
        saga.expect_approval(check.waits_for_approval)
        self.gated.update(check.waits_for_approval)
        return request.tool in check.waits_for_approval


@contextmanager
def at_desk(desk: ToolDesk) -> Iterator[ToolDesk]:
    """Tool calls of tasks started inside the block go to `desk` (a task keeps the desk
    of the context it was created in)."""
    token = _DESK.set(desk)
    try:
        yield desk
    finally:
        _DESK.reset(token)


def current_desk(tool: str) -> ToolDesk:
    """The desk of the agent run this tool call belongs to."""
    desk = _DESK.get()
    if desk is None:
        raise SagaUsageError(
            f"a SagaToolset tool ({tool!r}) was called outside through_saga; it was not run. "
            "Run the agent inside the saga block: "
            "`await through_saga(saga, agent.run(...))`"
        )
    return desk


async def through_saga(saga: Saga, run: Coroutine[Any, Any, T]) -> T:
    """Run `run` (an agent's run, e.g. `agent.run(prompt)`) with every SagaToolset tool
    call it makes as a step of `saga`, and return what it returns. Call it from the
    workflow's run code, inside the saga block. A failure of the run itself (a model error,
    a usage limit) comes out of here and fails the saga when it leaves the block."""
    if not isinstance(run, Coroutine):
        raise SagaUsageError(
            "through_saga takes the agent run's coroutine, e.g. through_saga(saga, "
            f"agent.run(prompt)), not {type(run).__name__}: its tool calls must start inside"
        )
    with at_desk(ToolDesk(saga)) as desk:
        agent_run = asyncio.create_task(run)
    try:
        while True:
            await workflow.wait_condition(lambda: bool(desk.waiting) or agent_run.done())
            while desk.waiting:
                await desk.serve(desk.waiting.popleft())
            if agent_run.done():
                return agent_run.result()
    except BaseException:
        if not agent_run.done():
            agent_run.cancel()
            with suppress(BaseException):  # its own end (cancelled) is not the news: ours is
                await agent_run
        raise


__all__ = [
    "APPROVAL_NOT_GATED",
    "ToolDesk",
    "ToolRequest",
    "at_desk",
    "current_desk",
    "through_saga",
]
