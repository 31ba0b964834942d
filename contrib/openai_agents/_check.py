"""The agent's tools checked against the worker's toolbox when the worker starts.

The agent declares its tools (names, parameters, `needs_approval`) in the workflow; the
toolbox on the worker holds what runs. A mismatch would otherwise show up in a running
saga as a refused step, which fails the saga: a name the toolbox does not know, a
parameter it does not take or one it needs that the agent never sends, or a tool the
agent wants approved that the toolbox would run without asking anyone. Checked here, a
worker with a mismatch does not start, as a toolbox with a misspelt compensation does
not build.
"""

from __future__ import annotations

import difflib
from typing import Any

from agents import Agent, FunctionTool

from sagacity.contrib.openai_agents._errors import AgentToolsError
from sagacity.contrib.openai_agents._tools import handoff_target, tool_problems
from sagacity.tools._decorators import ToolKind
from sagacity.tools._toolbox import Toolbox, ToolSpec


def _agents(agent: Agent[Any]) -> list[Agent[Any]]:
    """`agent` and every agent it hands off to, directly or through a Handoff made by
    `handoff(agent)` (a custom Handoff's target is only known when it runs; run_agent
    converts it then, and a target that cannot be converted fails the saga)."""
    found: dict[int, Agent[Any]] = {}
    todo = [agent]
    while todo:
        current = todo.pop()
        if id(current) in found:
            continue
        found[id(current)] = current
        todo.extend(t for t in map(handoff_target, current.handoffs) if t is not None)
    return list(found.values())


def _parameter_problems(tool: FunctionTool, spec: ToolSpec) -> list[str]:
    sent = set(tool.params_json_schema.get("properties", {}))
    taken = set(spec.parameters.get("properties", {}))
    needed = set(spec.parameters.get("required", []))
    problems = []
    if sent - taken:
        problems.append(
            f"{tool.name!r} sends {sorted(sent - taken)}, which the toolbox's tool does not "
            f"take (it takes {sorted(taken)})"
        )
    if needed - sent:
        problems.append(
            f"{tool.name!r} never sends {sorted(needed - sent)}, which the toolbox's tool requires"
        )
    return problems


def tool_mismatches(tool: FunctionTool, toolbox: Toolbox) -> list[str]:
    """Why `tool` would not run as the toolbox's tool of that name (empty when it would)."""
    if tool.name not in toolbox:
        close = difflib.get_close_matches(tool.name, toolbox.names(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return [f"{tool.name!r} is not a tool of the worker's toolbox{hint}"]
    spec = toolbox.get(tool.name)
    problems = _parameter_problems(tool, spec)
    if tool.needs_approval is not False and spec.kind is not ToolKind.IRREVERSIBLE:
        problems.append(
            f"{tool.name!r} needs approval in the agent, but the toolbox declares it "
            f"{spec.kind.value.lower()}, so it would run without anyone approving it: "
            "declare it @irreversible, or drop needs_approval"
        )
    return problems


def check_agent_tools(agent: Agent[Any], toolbox: Toolbox) -> None:
    """Raise AgentToolsError listing every tool of `agent` (and of the agents it hands off
    to) that could not run as a step of a saga on a worker with `toolbox`."""
    problems: list[str] = []
    for each in _agents(agent):
        problems.extend(tool_problems(each))
        for tool in each.tools:
            if isinstance(tool, FunctionTool):
                problems.extend(tool_mismatches(tool, toolbox))
    if problems:
        raise AgentToolsError(problems)


__all__ = ["check_agent_tools", "tool_mismatches"]
