"""Tool calls of an agent run, carried to the saga's own task and run there one by one.

The SDK runs every function tool call in an asyncio task of its own, several at once
when the model asks for several. The saga takes steps only from the task that opened it,
one at a time (sagacity.workflows._saga): its steps are ordered, an approval binds one
step, compensation undoes them in reverse, and an error must leave the saga's block to
be compensated. So the agent runs in a task of its own, and its tool calls wait in a
queue that the saga's task serves in the order they were asked for; the agent's run ends
inside the block, and whatever it raises is raised there.

A call whose tool the agent marks `needs_approval` is checked against the worker's
toolbox first (the plan check, a local activity on the saga's pinned worker): the
toolbox decides what waits for approval, and a tool it would run straight away fails
the saga, with nothing run, instead of running without the human the agent asked for.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sagacity.activities import CHECK_PLAN
    from sagacity.activities._models import CheckPlanInput, PlanCheck, ToolCall

from sagacity.contrib._replies import answer
from sagacity.workflows._saga import Saga, StepError

T = TypeVar("T")
Check = Callable[[ToolCall], Awaitable[PlanCheck]]
"""Asks the saga's toolbox about one call without running it."""


@dataclass
class _Call:
    tool: str
    args: dict[str, Any]
    gated: bool | Callable[[], Awaitable[bool]]
    """Whether it waits for approval, or the SDK's per-call policy to ask (in order)."""
    answer: asyncio.Future[Any]


async def _asked(policy: Callable[[], Awaitable[bool]]) -> bool:
    """The agent's per-call approval policy; one that fails asks for approval (the
    toolbox then decides, and a tool it would not gate is refused)."""
    try:
        return await policy()
    except Exception:
        return True


def ungated(tool: str, check: PlanCheck) -> str | None:
    """Why a call the agent wants approved must not run: the toolbox would run it without
    waiting for anyone. None when the toolbox waits for approval, or refuses the call
    itself (then the saga's step is refused, with the toolbox's reason)."""
    if tool in check.waits_for_approval or check.problems:
        return None
    return (
        f"the agent asks for approval of {tool!r} (needs_approval), but the worker's "
        "toolbox would run it without waiting for anyone; nothing ran. Declare it "
        "@irreversible in the toolbox, or drop needs_approval from the agent's tool"
    )


class StepRouter:
    """Serves the tool calls of one agent run as steps of `saga`, in its own task."""

    def __init__(self, saga: Saga, check: Check | None = None) -> None:
        self._saga = saga
        self._check = check or self._plan_check
        self._calls: deque[_Call] = deque()
        self._wake = asyncio.Event()
        self._gated: set[str] = set()
        """Tools the toolbox was seen to gate: asked once per tool and run."""
        self._closed = False
        """Serving has ended: a call now would wait for ever, so it is cancelled."""

    async def submit(
        self, tool: str, args: dict[str, Any], gated: bool | Callable[[], Awaitable[bool]]
    ) -> Any:
        """From a tool's task: queue the call and wait for its step's result (or its
        StepError). A call cancelled while it waits is dropped: it never runs."""
        if self._closed:
            raise asyncio.CancelledError(f"the agent's run is being stopped; {tool!r} was not run")
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._calls.append(_Call(tool, args, gated, answer))
        self._wake.set()
        return await answer

    async def serve(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` (the agent's run) in a task of its own and serve its calls here until
        it ends; return its result or raise its error. If serving fails (a cancellation,
        a misuse of the saga), the run is cancelled and the failure raised here."""
        run = asyncio.ensure_future(work)
        run.add_done_callback(lambda _: self._wake.set())
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._calls:
                    call = self._calls.popleft()
                    if not call.answer.done():
                        await self._serve(call)
                if run.done():
                    return run.result()
        finally:
            self._closed = True
            for call in self._calls:
                call.answer.cancel()
            if not run.done():
                run.cancel()
                await asyncio.wait({run})

    async def _serve(self, call: _Call) -> None:
        # A step that did not complete fails the agent's tool with its StepError as is.
        await answer(call.answer, self._step(call), lambda exc: exc)

    async def _step(self, call: _Call) -> Any:
        saga = self._saga
        gated = call.gated if isinstance(call.gated, bool) else await _asked(call.gated)
        if gated and call.tool not in self._gated and saga.failure is None:
            check = await self._check(ToolCall(tool=call.tool, args=call.args))
            refusal = ungated(call.tool, check)
            if refusal is not None:
                saga.fail(refusal)
                raise StepError(refusal, outcome=None, error_type="StepRefused")
            if call.tool in check.waits_for_approval:
                self._gated.add(call.tool)
                saga.expect_approval([call.tool])  # its first activity is an approval check
        return await saga.call(call.tool, **call.args)

    async def _plan_check(self, call: ToolCall) -> PlanCheck:
        saga = self._saga
        check: PlanCheck = await saga.pinned.run_local(
            CHECK_PLAN,
            CheckPlanInput(
                saga_id=saga.saga_id,
                plan=[call],
                allowed_tools=saga.options.allowed_tools,
                worker=saga.pinned.worker,
            ),
            PlanCheck,
        )
        return check


__all__ = ["StepRouter", "ungated"]
