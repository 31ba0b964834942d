"""SagaToolset: the function tools of a Pydantic AI agent, each call a saga step.

Pydantic AI's Temporal integration runs each tool call as an activity of its own. Inside
a SagaToolset the tool's body is not what runs: the call becomes `saga.call(name, **args)`
in the workflow (through the desk `through_saga` sets up), so the worker's sagacity
toolbox runs it as a journaled step, gates it on the payload-bound approval when it is
irreversible, and compensates it in reverse order when the saga fails. The Pydantic AI
declaration is what the model sees (name, description, parameters) and says which calls
need a person: a tool declared `requires_approval=True`, or a call an
`ApprovalRequiredToolset` asks approval for, waits on the saga's gate instead of ending the
run with Pydantic AI's deferred-tool requests.

The toolset hides its leaves from the durable capability (`visit_and_replace` stops
here): Pydantic AI must not also wrap them as activities of their own, or a call could run
outside the saga.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pydantic_ai import FunctionToolset, ToolsetTool, WrapperToolset
from pydantic_ai.exceptions import ApprovalRequired
from pydantic_ai.tools import AgentDepsT, RunContext, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ExternalToolset
from pydantic_ai.toolsets.function import FunctionToolsetTool
from pydantic_core import to_jsonable_python

from sagacity._errors import SagacityError
from sagacity.contrib.pydantic_ai._desk import current_desk

APPROVAL_DECLARED = "sagacity_approval_declared"
"""Key in a tool definition's metadata: Pydantic AI declared the tool approval-required
(`requires_approval=True`), which its kind said before the toolset made it a plain
function tool for the run to call."""

STEP_KINDS = frozenset({"function", "unapproved"})
"""Tool kinds the saga runs. 'external' tools are resolved outside the run by design (the
run ends with them as deferred requests) and 'output' tools end the run: both are left
to Pydantic AI."""


class SagaToolsetError(SagacityError):
    """A toolset given to SagaToolset has a leaf whose tools cannot run as saga steps."""


def as_step(tool_def: ToolDefinition) -> ToolDefinition:
    """The definition the run sees for a tool the saga runs: a function tool (an approval
    Pydantic AI would ask for is the saga's gate now), run alone and in the order the model
    asked (a saga takes one step at a time), with its declared approval kept in metadata."""
    if tool_def.kind not in STEP_KINDS:
        return tool_def
    metadata = {**(tool_def.metadata or {}), APPROVAL_DECLARED: tool_def.kind == "unapproved"}
    return replace(tool_def, kind="function", sequential=True, metadata=metadata)


def approval_declared(tool_def: ToolDefinition, ctx: RunContext[Any]) -> bool:
    """Whether Pydantic AI would have a person approve this call: the tool is declared
    approval-required, or an ApprovalRequiredToolset asked for approval (SagaToolset then
    calls again with `tool_call_approved`), or the run was resumed with an approval given
    the Pydantic AI way — which never stands in for the saga's own gate."""
    return bool((tool_def.metadata or {}).get(APPROVAL_DECLARED)) or ctx.tool_call_approved


def step_name(name: str, tool: ToolsetTool[Any]) -> str:
    """The saga step's tool name: the name the function toolset holds the tool under (a
    `prepare` function may show it to the model under another)."""
    if isinstance(tool, FunctionToolsetTool) and tool.original_name is not None:
        return tool.original_name
    return name


@dataclass
class SagaSteps(WrapperToolset[AgentDepsT]):
    """One leaf function toolset whose calls are saga steps (SagaToolset puts it in)."""

    async def get_tools(self, ctx: RunContext[AgentDepsT]) -> dict[str, ToolsetTool[AgentDepsT]]:
        tools = await self.wrapped.get_tools(ctx)
        return {
            name: replace(tool, tool_def=as_step(tool.tool_def)) for name, tool in tools.items()
        }

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[AgentDepsT],
        tool: ToolsetTool[AgentDepsT],
    ) -> Any:
        step = step_name(name, tool)
        desk = current_desk(step)
        args = to_jsonable_python(tool_args)
        return await desk.ask(step, args, approval=approval_declared(tool.tool_def, ctx))

    def visit_and_replace(
        self, visitor: Callable[[AbstractToolset[AgentDepsT]], AbstractToolset[AgentDepsT]]
    ) -> AbstractToolset[AgentDepsT]:
        return self


def _to_steps(leaf: AbstractToolset[Any]) -> AbstractToolset[Any]:
    if isinstance(leaf, SagaSteps | ExternalToolset):
        return leaf
    if isinstance(leaf, FunctionToolset):
        return SagaSteps(leaf)
    raise SagaToolsetError(
        f"SagaToolset runs function tools as saga steps, and {leaf.label} "
        f"({type(leaf).__name__}) is not a function toolset: its tools are listed or run "
        "by I/O a workflow cannot do. Give it to the agent outside the SagaToolset (Pydantic "
        "AI's Temporal integration then runs its calls as its own activities, which the "
        "saga neither journals nor compensates), or declare its tools as function tools "
        "whose implementations are in the worker's toolbox"
    )


@dataclass
class SagaToolset(WrapperToolset[AgentDepsT]):
    """Every function tool of `wrapped` runs as a step of the saga the workflow opened:

        tools = FunctionToolset(id="shop")  # the agent's tools, as Pydantic AI declares them
        agent = Agent(model, name="shop", toolsets=[SagaToolset(tools)],
                      capabilities=[TemporalDurability()])
        ...
        async with Saga.open(options) as saga:
            result = await through_saga(saga, agent.run(prompt))

    The saga step is named as the tool is named in its function toolset (prefixes and
    renames above it are for the model), and the worker's toolbox must hold a tool of that
    name (`check_agent` checks it at worker start). A step that fails, is rejected or is
    refused is reported to the model as a failed tool call (ToolFailed) and fails the saga
    whatever the model does next: leaving the saga block then compensates."""

    def __post_init__(self) -> None:
        self.wrapped = self.wrapped.visit_and_replace(_to_steps)

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[AgentDepsT],
        tool: ToolsetTool[AgentDepsT],
    ) -> Any:
        try:
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)
        except ApprovalRequired:
            # An ApprovalRequiredToolset asked for a person before anything ran: the
            # saga's gate is that person, so the call goes on marked as needing approval.
            approving = replace(ctx, tool_call_approved=True)
            return await self.wrapped.call_tool(name, tool_args, approving, tool)

    def visit_and_replace(
        self, visitor: Callable[[AbstractToolset[AgentDepsT]], AbstractToolset[AgentDepsT]]
    ) -> AbstractToolset[AgentDepsT]:
        # The durable capability must not make activities of these tools: they run as saga
        # steps, and a second wrapper would run them outside the saga.
        return self


__all__ = ["APPROVAL_DECLARED", "SagaSteps", "SagaToolset", "SagaToolsetError", "as_step"]
