"""The worker-start check of an agent against the toolbox that runs its tools.

The model sees the agent's Pydantic AI declarations; the worker's sagacity toolbox runs
the calls. `check_agent` makes a mismatch fail when the worker starts, as a misspelt
compensation does, rather than at the first call: a tool the toolbox does not hold, a
parameter the model may send that the tool does not take (or leave out that it needs),
and a tool Pydantic AI has a person approve whose toolbox tool would run without one. It
also names the agent's tools that do not run through the saga.

It reads the declarations as they are built (a `prepare` function or a filter that
changes them per run is not seen; the saga still refuses, at run time, a call its
toolbox cannot run, and the desk refuses an approval-required call the toolbox would not
gate).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.agent.abstract import AbstractAgent
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import (
    AbstractToolset,
    ApprovalRequiredToolset,
    CombinedToolset,
    ExternalToolset,
    FunctionToolset,
    WrapperToolset,
)

from sagacity._errors import ToolboxError
from sagacity.contrib.pydantic_ai._toolset import SagaSteps, SagaToolset
from sagacity.tools._decorators import ToolKind
from sagacity.tools._toolbox import Toolbox, ToolSpec


class AgentToolboxMismatch(ToolboxError):
    """The agent's tool declarations and the worker's toolbox disagree (every problem is
    listed); raised at worker start, before any saga runs."""


@dataclass(frozen=True)
class DeclaredTool:
    """One function tool of the agent as Pydantic AI declares it."""

    name: str
    definition: ToolDefinition
    approval: bool
    """Pydantic AI has a person approve (some of) its calls."""
    in_saga: bool


@dataclass(frozen=True)
class AgentCheck:
    """What `check_agent` found: the saga's tools and what does not go through it."""

    steps: dict[str, ToolKind] = field(default_factory=dict)
    """Each tool that runs as a saga step, with its kind in the toolbox."""
    approval: list[str] = field(default_factory=list)
    """Tools whose calls Pydantic AI has a person approve: the saga's gate does it."""
    outside: list[str] = field(default_factory=list)
    """Tools (and toolsets whose tools are not known before a run) that Pydantic AI runs
    itself, outside the saga: not journaled, never compensated, never gated."""


def _declared(
    toolset: AbstractToolset[Any], *, in_saga: bool = False, approval: bool = False
) -> Iterator[DeclaredTool | str]:
    """The tools under `toolset` (and the label of each leaf whose tools cannot be listed
    without a run)."""
    if isinstance(toolset, SagaToolset):
        yield from _declared(toolset.wrapped, in_saga=True, approval=approval)
    elif isinstance(toolset, SagaSteps):
        yield from _declared(toolset.wrapped, in_saga=in_saga, approval=approval)
    elif isinstance(toolset, ApprovalRequiredToolset):
        yield from _declared(toolset.wrapped, in_saga=in_saga, approval=True)
    elif isinstance(toolset, WrapperToolset):
        yield from _declared(toolset.wrapped, in_saga=in_saga, approval=approval)
    elif isinstance(toolset, CombinedToolset):
        for member in toolset.toolsets:
            yield from _declared(member, in_saga=in_saga, approval=approval)
    elif isinstance(toolset, FunctionToolset):
        for name, tool in toolset.tools.items():
            definition = tool.tool_def
            needs = approval or definition.kind == "unapproved"
            yield DeclaredTool(name, definition, needs, in_saga)
    elif not isinstance(toolset, ExternalToolset):  # external tools never run in the run
        yield f"{toolset.label} (tools listed at run time)"


_NONE = object()


def _schema_problems(tool: DeclaredTool, spec: ToolSpec) -> list[str]:
    offered = tool.definition.parameters_json_schema
    offered_names = set(offered.get("properties", {}))
    offered_required = set(offered.get("required", []))
    taken = spec.parameters
    taken_names = set(taken.get("properties", {}))
    needed = set(taken.get("required", []))
    problems = []
    if extra := sorted(offered_names - taken_names):
        problems.append(
            f"tool {tool.name!r}: the model may send {extra}, which the toolbox's tool does "
            f"not take (it takes {sorted(taken_names)})"
        )
    if missing := sorted(needed - offered_required):
        problems.append(
            f"tool {tool.name!r}: the toolbox's tool requires {missing}, which the Pydantic "
            "AI declaration does not require of the model"
        )
    mine, theirs = offered.get("properties", {}), taken.get("properties", {})
    for name in sorted(offered_names & taken_names):
        said, meant = mine[name].get("default", _NONE), theirs[name].get("default", _NONE)
        if said is not _NONE and meant is not _NONE and said != meant:
            # Pydantic AI fills its default in before the call reaches the saga: that value
            # is the one approved and run, not the toolbox's.
            problems.append(
                f"tool {tool.name!r}: parameter {name!r} defaults to {said!r} in the Pydantic "
                f"AI declaration but to {meant!r} in the toolbox (the declaration's is sent)"
            )
    return problems


def _problems(tool: DeclaredTool, toolbox: Toolbox) -> list[str]:
    if tool.name not in toolbox:
        return [
            f"tool {tool.name!r} runs as a saga step, but the toolbox has no tool of that "
            f"name (it has {', '.join(toolbox.names()) or 'none'})"
        ]
    spec = toolbox.get(tool.name)
    problems = _schema_problems(tool, spec)
    if tool.approval and spec.kind is not ToolKind.IRREVERSIBLE:
        problems.append(
            f"tool {tool.name!r}: Pydantic AI has a person approve its calls, but the "
            f"toolbox declares it {spec.kind.value.lower()}, which runs without an approval; "
            "declare it @irreversible (it then waits for the approval of its exact payload)"
        )
    return problems


def check_agent(agent: AbstractAgent[Any, Any], toolbox: Toolbox) -> AgentCheck:
    """Check `agent`'s SagaToolset tools against the `toolbox` the worker runs them with;
    raise AgentToolboxMismatch listing every problem. Call it where the worker is built:

        toolbox = Toolbox.build(Shop())
        check_agent(agent, toolbox)
    """
    steps: dict[str, ToolKind] = {}
    approval: list[str] = []
    outside: list[str] = []
    problems: list[str] = []
    for toolset in agent.toolsets:
        for found in _declared(toolset):
            if isinstance(found, str):
                outside.append(found)
            elif not found.in_saga:
                outside.append(found.name)
                if found.name in toolbox:
                    # A function of the agent's own under a toolbox tool's name: the model's
                    # call would run it outside the saga (ungated, never undone), which is
                    # not what the toolbox's tool of that name promises.
                    problems.append(
                        f"tool {found.name!r} is the toolbox's "
                        f"{toolbox.get(found.name).kind.value.lower()} tool of that name, but "
                        "the agent runs a function of its own for it, outside the saga: put "
                        "it in the SagaToolset (or rename the agent's function)"
                    )
            else:
                problems.extend(_problems(found, toolbox))
                if found.name in toolbox:
                    steps[found.name] = toolbox.get(found.name).kind
                if found.approval:
                    approval.append(found.name)
    if problems:
        listed = "; ".join(problems)
        raise AgentToolboxMismatch(f"agent {agent.name!r} does not match its toolbox: {listed}")
    return AgentCheck(steps=steps, approval=approval, outside=outside)


__all__ = ["AgentCheck", "AgentToolboxMismatch", "DeclaredTool", "check_agent"]
