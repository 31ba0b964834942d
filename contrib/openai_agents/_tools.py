"""An Agents SDK agent whose function tools run as saga steps.

`saga_agent(agent, submit)` copies an agent (and the agents it hands off to) with each
function tool's body replaced: the SDK still parses the model's call, runs the tool's
guardrails and hooks and formats a failure for the model with the tool's own
`failure_error_function`, but what runs is `submit(tool_name, args, gated)`, which the
router turns into `saga.call(tool_name, **args)` in the saga's own task. The tool's Python
body never runs: the worker's toolbox holds the real tool under the same name, with its
compensation.

The SDK's `needs_approval` becomes `gated`: instead of interrupting the run for
`RunState.approve`, the step waits on the saga's gate for a human decision bound to the
SHA-256 of its exact payload (the router checks that the toolbox will ask for one).
Tools the saga cannot run as steps (hosted tools, agents as tools, MCP servers, a tool
timeout that would abandon a step waiting for its approval) are refused up front.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Awaitable, Callable
from typing import Any

from agents import Agent, FunctionTool, Handoff, RunContextWrapper
from agents.tool import with_function_tool_failure_error_handler
from agents.tool_context import ToolContext

from sagacity.activities._models import INVALID_ARGUMENTS_KEY
from sagacity.activities._openai_model import parse_arguments
from sagacity.contrib.openai_agents._errors import AgentToolsError

Gate = bool | Callable[[], Awaitable[bool]]
"""Whether a call waits for approval, or how to ask (the SDK's per-call policy): asked
when the call's turn comes, so a policy that awaits cannot reorder the calls."""
Submit = Callable[[str, dict[str, Any], Gate], Awaitable[Any]]
"""Runs one tool call as the saga's next step: (tool name, arguments, gate) -> result."""
ApprovalPolicy = bool | Callable[[RunContextWrapper[Any], dict[str, Any], str], Awaitable[bool]]
"""The SDK's `needs_approval`: always, never, or decided per call."""


def tool_problems(agent: Agent[Any]) -> list[str]:
    """Why some of `agent`'s tools cannot run as saga steps (empty when all can)."""
    problems: list[str] = []
    for tool in agent.tools:
        name = getattr(tool, "name", type(tool).__name__)
        if not isinstance(tool, FunctionTool):
            problems.append(
                f"{name!r} is a {type(tool).__name__}, which the SDK or OpenAI runs itself, "
                "outside the saga: give the agent function tools only"
            )
        elif tool._is_agent_tool or tool._is_codex_tool:
            problems.append(
                f"{name!r} runs another agent, whose tools would run outside this saga: "
                "hand off to that agent instead (handoffs are converted too)"
            )
        elif tool.timeout_seconds is not None:
            problems.append(
                f"{name!r} sets timeout_seconds, which would abandon a step still running or "
                "waiting for its approval: the saga's own timeouts govern steps "
                "(SagaOptions.tool_timeout_seconds, approval_timeout_seconds); remove it"
            )
    if agent.mcp_servers:
        problems.append(
            f"agent {agent.name!r} has MCP servers, whose tools would run outside the saga: "
            "serve them through sagacity's MCP adapter as toolbox tools instead"
        )
    return problems


async def gated(policy: ApprovalPolicy, ctx: ToolContext[Any], args: dict[str, Any]) -> bool:
    """Whether the SDK's `needs_approval` asks a human for this call. A call whose
    arguments are not a JSON object cannot be judged by a policy: it asks (the toolbox
    refuses it anyway, and nothing runs)."""
    if isinstance(policy, bool):
        return policy
    if INVALID_ARGUMENTS_KEY in args:
        return True
    return bool(await policy(ctx, dict(args), ctx.tool_call_id))


def model_text(result: Any) -> str:
    """A step's result as the tool output the model reads: text as it is, anything else
    as JSON (the journal keeps the result itself)."""
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False)


def _handled(tool: FunctionTool, error: Exception, arguments: str) -> None:
    """The SDK reports a handled tool error here (to its spans and logs); the saga has
    journaled the step's failure already, and is failed whatever the model does next."""


def saga_function_tool(tool: FunctionTool, submit: Submit) -> FunctionTool:
    """`tool` with its body replaced by a saga step of the same name. It never interrupts
    the run for the SDK's approval: its `needs_approval` is asked per call and handed to
    the saga, whose gate waits for the decision."""
    policy: ApprovalPolicy = tool.needs_approval
    name = tool.name

    async def run_step(ctx: ToolContext[Any], raw: str) -> str:
        # Anything but a JSON object becomes the marker the toolbox refuses (a refused
        # call, journaled), as for sagacity's own agent.
        args = parse_arguments(raw)
        # Queued before anything is awaited: calls reach the saga in the model's order,
        # and the policy is asked when the call's turn comes.
        gate: Gate = (
            policy if isinstance(policy, bool) else functools.partial(gated, policy, ctx, args)
        )
        return model_text(await submit(name, args, gate))

    invoker = with_function_tool_failure_error_handler(run_step, _handled)
    return dataclasses.replace(tool, on_invoke_tool=invoker, needs_approval=False)


def saga_agent(agent: Agent[Any], submit: Submit) -> Agent[Any]:
    """A copy of `agent` whose function tools, and those of every agent it hands off to,
    run as saga steps through `submit`. AgentToolsError (listing every problem) when some
    tool cannot."""
    return _convert(agent, submit, {})


def _convert(agent: Agent[Any], submit: Submit, seen: dict[int, Agent[Any]]) -> Agent[Any]:
    if id(agent) in seen:  # a handoff back to an agent already converted
        return seen[id(agent)]
    problems = tool_problems(agent)
    if problems:
        raise AgentToolsError(problems)
    copy = agent.clone()
    seen[id(agent)] = copy
    copy.tools = [saga_function_tool(t, submit) for t in agent.tools if isinstance(t, FunctionTool)]
    copy.handoffs = [_handoff(h, submit, seen) for h in agent.handoffs]
    return copy


def handoff_target(target: Agent[Any] | Handoff[Any, Any]) -> Agent[Any] | None:
    """The agent a handoff leads to, where it is known before the run: an Agent itself, or
    a Handoff made by the SDK's `handoff(agent)` (which keeps a reference to it). None for
    a custom Handoff whose agent only its invocation returns."""
    if isinstance(target, Agent):
        return target
    ref = getattr(target, "_agent_ref", None)
    agent = ref() if callable(ref) else None
    return agent if isinstance(agent, Agent) else None


def _handoff(
    target: Agent[Any] | Handoff[Any, Any], submit: Submit, seen: dict[int, Agent[Any]]
) -> Agent[Any] | Handoff[Any, Any]:
    if isinstance(target, Agent):
        return _convert(target, submit, seen)
    known = handoff_target(target)
    if known is not None:
        _convert(known, submit, seen)  # refused here, before the run, if it cannot be
    invoke = target.on_invoke_handoff

    async def convert_on_handoff(ctx: RunContextWrapper[Any], raw: str) -> Agent[Any]:
        return _convert(await invoke(ctx, raw), submit, seen)

    return dataclasses.replace(target, on_invoke_handoff=convert_on_handoff)


__all__ = [
    "Gate",
    "Submit",
    "gated",
    "handoff_target",
    "model_text",
    "saga_agent",
    "saga_function_tool",
    "tool_problems",
]
