"""What each MCP tool is to a saga, declared in a small mapping and checked at start.

An MCP server says what its tools take, not what they do to the world: whether a call
can be undone, and by what, is the worker owner's word. The mapping gives it:

    {
        "reserve_inventory": compensated_by("release_inventory"),
        "charge_card": compensated_by("refund_card"),
        "ship_order": plain,
        "send_wire_transfer": irreversible,
    }

A compensation is another tool of the same server, called with the forward step's
structured result as its arguments (so the forward tool must declare an output schema)
or with what `args=` builds from the recorded input and result; or it is a Python
`@compensation` passed beside the mapping. Every name is resolved against the server's
listing when the toolset opens; one that resolves to nothing (or to two things) fails
there with McpMappingError naming it and the server's tools. A rule of an irreversible
tool's policy that names a parameter the server's input schema does not have, or one it
types as something never an amount (a boolean, an object, an array, no type at all),
fails there too, with ApprovalRuleError (sagacity.approval._policy.check_rules).

Tools the mapping leaves out are refused by default: they are not in the toolbox, so a
call to one is journaled CALL_REFUSED and never sent. A server that grows a tool must not
grow the agent's powers; `unmapped="plain"` opts in to serving them as plain tools.
Tools named only as compensations are never callable as tools.
"""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mcp_types import Tool

from sagacity.approval._policy import ApprovalPolicy, check_rules
from sagacity.tools._decorators import (
    CompensationContext,
    ToolKind,
    compensation_mark,
    compensation_signature_problem,
)

from ._errors import McpMappingError
from ._input_schema import InputSchema, OutputSchema

Unmapped = Literal["refuse", "plain"]
ArgsBuilder = Callable[[CompensationContext], Mapping[str, Any]]

TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""The names a saga tool may have (what chat-completions APIs accept as a function)."""


@dataclass(frozen=True)
class Plain:
    """Journaled; nothing to undo (reads, idempotent lookups, a step that must fail)."""

    def __repr__(self) -> str:
        return "plain"


@dataclass(frozen=True)
class Irreversible:
    """Never sent until a person approves the SHA-256 of its exact arguments. Use bare
    (`irreversible`) or with a policy: `irreversible(policy=ApprovalPolicy(...))`."""

    policy: ApprovalPolicy | None = None

    def __call__(self, *, policy: ApprovalPolicy | None = None) -> Irreversible:
        if policy is not None and not isinstance(policy, ApprovalPolicy):
            raise McpMappingError(
                f"irreversible(policy=...) takes an ApprovalPolicy, got {policy!r}"
            )
        return Irreversible(policy)

    def __repr__(self) -> str:
        return "irreversible" if self.policy is None else f"irreversible(policy={self.policy!r})"


@dataclass(frozen=True)
class CompensatedBy:
    """Undone, when the saga fails, by the compensation named `compensation`."""

    compensation: str
    args: ArgsBuilder | None = None


def compensated_by(compensation: str, /, *, args: ArgsBuilder | None = None) -> CompensatedBy:
    """Undone by `compensation`: a tool of the same MCP server, or a Python function marked
    `@compensation` passed in `compensations=`. An MCP compensation is called with
    `args(ctx)` (ctx is the CompensationContext: the step's recorded input and result),
    by default the forward call's structured result."""
    if not isinstance(compensation, str) or not compensation:
        raise McpMappingError(
            f"compensated_by(...) needs the name of the compensation, got {compensation!r}"
        )
    if args is not None and not callable(args):
        raise McpMappingError(
            f"compensated_by({compensation!r}, args=...) takes a function of the "
            f"CompensationContext returning the undo's arguments, got {args!r}"
        )
    return CompensatedBy(compensation, args)


plain = Plain()
irreversible = Irreversible()
Declaration = Plain | Irreversible | CompensatedBy


@dataclass(frozen=True)
class ResolvedCompensation:
    """A compensation found: a server tool (with its schema and argument builder) or a
    Python function."""

    name: str
    tool: Tool | None = None
    input: InputSchema | None = None
    args: ArgsBuilder | None = None
    fn: Callable[[CompensationContext], Any] | None = None


@dataclass(frozen=True)
class ResolvedTool:
    """One server tool as a saga tool: its definition as listed at start, checked."""

    definition: Tool
    kind: ToolKind
    input: InputSchema
    output: OutputSchema | None
    policy: ApprovalPolicy | None = None
    compensation: ResolvedCompensation | None = None

    @property
    def name(self) -> str:
        return self.definition.name


@dataclass(frozen=True)
class MappingPlan:
    """The toolset's tools, and the server tools it leaves out (with why)."""

    tools: list[ResolvedTool]
    left_out: dict[str, str]


def _close(name: str, known: Iterable[str]) -> str:
    matches = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
    return "; did you mean " + " or ".join(map(repr, matches)) + "?" if matches else ""


def _listing(names: Iterable[str]) -> str:
    listed = sorted(names)
    shown = ", ".join(listed[:50]) + (f" and {len(listed) - 50} more" if len(listed) > 50 else "")
    return shown or "none"


def python_compensations(sources: Sequence[object]) -> dict[str, Callable[..., Any]]:
    """The functions marked `@compensation` in `sources` (functions, instances, modules)."""
    found: dict[str, Callable[..., Any]] = {}
    for source in sources:
        if isinstance(source, type):
            raise McpMappingError(
                f"compensations= got the class {source.__name__}; pass an instance"
            )
        marked: list[Callable[..., Any]]
        if compensation_mark(source) is not None and callable(source):
            marked = [source]
        else:  # static lookup: reading every attribute would run properties
            marked = [
                getattr(source, a)
                for a in dir(source)
                if compensation_mark(inspect.getattr_static(source, a, None)) is not None
            ]
        if not marked:
            raise McpMappingError(f"{source!r} declares no function marked @compensation")
        for fn in marked:
            mark = compensation_mark(fn)
            assert mark is not None
            if mark.name in found and found[mark.name] != fn:
                raise McpMappingError(f"two Python compensations are named {mark.name!r}")
            found[mark.name] = fn
    return found


class _Checker:
    def __init__(
        self, server: str, listed: Sequence[Tool], python: Mapping[str, Callable[..., Any]]
    ) -> None:
        self.server = server
        self.python = python
        self.by_name: dict[str, Tool] = {}
        for tool in listed:
            if tool.name in self.by_name:
                raise McpMappingError(f"MCP server {server!r} lists two tools named {tool.name!r}")
            self.by_name[tool.name] = tool

    def fail(self, message: str) -> McpMappingError:
        return McpMappingError(
            f"{message}; MCP server {self.server!r} lists: {_listing(self.by_name)}"
        )

    def tool(self, name: str, declared: object) -> ResolvedTool:
        if not isinstance(name, str):
            raise McpMappingError(f"a mapping key must be a tool name (str), got {name!r}")
        if declared is compensated_by:
            raise McpMappingError(
                f"tool {name!r}: compensated_by needs the compensation's name, e.g. "
                f"compensated_by('refund_card')"
            )
        if not isinstance(declared, Plain | Irreversible | CompensatedBy):
            raise McpMappingError(
                f"tool {name!r} is mapped to {declared!r}; map it to plain, irreversible, "
                "irreversible(policy=...) or compensated_by('undo_tool')"
            )
        definition = self.by_name.get(name)
        if definition is None:
            raise self.fail(
                f"the mapping names tool {name!r}, which MCP server {self.server!r} does not "
                f"list{_close(name, self.by_name)}"
            )
        base = self.definition(definition)
        if isinstance(declared, Irreversible):
            # The policy's rules read the server's schema: one it cannot compare fails here.
            where = f" on MCP server {self.server!r}"
            check_rules(name, declared.policy, base["input"].parameters, where)
            return ResolvedTool(**base, kind=ToolKind.IRREVERSIBLE, policy=declared.policy)
        if isinstance(declared, CompensatedBy):
            undo = self.compensation(name, declared)
            return ResolvedTool(**base, kind=ToolKind.COMPENSABLE, compensation=undo)
        return ResolvedTool(**base, kind=ToolKind.PLAIN)

    def definition(self, tool: Tool) -> dict[str, Any]:
        if not TOOL_NAME.fullmatch(tool.name):
            raise McpMappingError(
                f"tool {tool.name!r} on MCP server {self.server!r} cannot be a saga tool: "
                "its name must be 1-64 letters, digits, '_' or '-'"
            )
        output = tool.output_schema
        return {
            "definition": tool,
            "input": InputSchema(self.server, tool.name, tool.input_schema),
            "output": None if output is None else OutputSchema(self.server, tool.name, output),
        }

    def compensation(self, name: str, declared: CompensatedBy) -> ResolvedCompensation:
        wanted = declared.compensation
        where = f"tool {name!r} names compensation {wanted!r}"
        on_server = self.by_name.get(wanted)
        in_python = self.python.get(wanted)
        if wanted == name:
            raise McpMappingError(f"{where}: a tool cannot undo itself")
        if on_server is not None and in_python is not None:
            raise McpMappingError(
                f"{where}, which is both a tool of MCP server {self.server!r} and a Python "
                "@compensation; rename the Python one"
            )
        if in_python is not None:
            if declared.args is not None:
                raise McpMappingError(
                    f"{where}, a Python compensation: args= is only for a compensation that "
                    "is an MCP tool (a Python one reads ctx.input and ctx.result itself)"
                )
            problem = compensation_signature_problem(in_python)
            if problem:
                raise McpMappingError(
                    f"{where}, which has the wrong signature: it {problem}; a compensation "
                    "takes exactly one required positional parameter, the CompensationContext"
                )
            return ResolvedCompensation(wanted, fn=in_python)
        if on_server is None:
            known = [*self.by_name, *self.python]
            python = _listing(self.python)
            raise self.fail(
                f"{where}, which is neither a tool of MCP server {self.server!r} nor a Python "
                f"@compensation (Python compensations: {python}){_close(wanted, known)}"
            )
        forward = self.by_name[name]
        if declared.args is None and forward.output_schema is None:
            raise McpMappingError(
                f"{where}: by default the undo is called with {name!r}'s structured result, "
                f"but {name!r} declares no output schema, so it may return none; give "
                f"compensated_by({wanted!r}, args=...) a function that builds the undo's "
                "arguments from ctx.input and ctx.result"
            )
        checked = self.definition(on_server)
        return ResolvedCompensation(
            wanted, tool=on_server, input=checked["input"], args=declared.args
        )


def check_mapping(
    server: str,
    listed: Sequence[Tool],
    mapping: Mapping[str, object],
    *,
    compensations: Mapping[str, Callable[..., Any]] | None = None,
    unmapped: Unmapped = "refuse",
) -> MappingPlan:
    """The saga tools of one server's listing under `mapping`, or McpMappingError."""
    if not isinstance(mapping, Mapping):
        raise McpMappingError(
            f"the mapping of MCP server {server!r} is a dict of tool name to plain, "
            f"irreversible or compensated_by(...), got {type(mapping).__name__}"
        )
    if unmapped not in ("refuse", "plain"):
        raise McpMappingError(f"unmapped= is 'refuse' or 'plain', got {unmapped!r}")
    checker = _Checker(server, listed, compensations or {})
    tools = [checker.tool(name, declared) for name, declared in mapping.items()]
    undoes = {t.compensation.name for t in tools if t.compensation and t.compensation.tool}
    left_out: dict[str, str] = {}
    for name, definition in checker.by_name.items():
        if name in mapping:
            continue
        if name in undoes:
            left_out[name] = "a compensation, called only to undo a step"
        elif unmapped == "refuse":
            left_out[name] = "not in the mapping (unmapped='refuse')"
        else:
            try:
                tools.append(ResolvedTool(**checker.definition(definition), kind=ToolKind.PLAIN))
            except McpMappingError as exc:  # a tool nobody named must not stop the worker
                left_out[name] = f"cannot be served: {exc}"
    return MappingPlan(tools, left_out)


__all__ = [
    "CompensatedBy",
    "Declaration",
    "Irreversible",
    "MappingPlan",
    "Plain",
    "ResolvedCompensation",
    "ResolvedTool",
    "Unmapped",
    "check_mapping",
    "compensated_by",
    "irreversible",
    "plain",
    "python_compensations",
]
