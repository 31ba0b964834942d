"""The toolbox: decorated callables collected, checked and turned into runnable specs.

Building is where declarations are judged. A compensation name that does not resolve, a
compensation that cannot take its context, two tools with one name, a parameter the
model cannot be told about, or a parameter type whose JSON form is not the value the tool
would receive (sagacity.tools._round_trip) is a `ToolboxError` at startup, because the
alternative is finding out at refund time, with money already moved. What a built tool
does with a call (validate it into the call's one Payload, run on that) is
sagacity.tools._spec.
"""

from __future__ import annotations

import difflib
import inspect
import re
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Annotated, Any

from pydantic import ConfigDict, Field, PydanticUserError, create_model

from sagacity._errors import ParameterRoundTripError, ToolboxError, UnknownToolError
from sagacity.approval._policy import check_rules
from sagacity.tools._decorators import (
    ToolMark,
    ToolResultError,
    compensation_mark,
    compensation_signature_problem,
    is_context_annotation,
    tool_mark,
)
from sagacity.tools._round_trip import round_trip_problems
from sagacity.tools._spec import CompensationSpec, ToolSpec, _Param, call_summary

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What chat-completions APIs accept as a function name."""

_ARGS_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False)
"""Lax coercion ("100" → 100) like the model would expect, but unknown keys are refused
and NaN/Infinity too: they have no JSON form, so they could not be approved or journaled."""


def _qualname(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn)))


def _first_paragraph(doc: str | None) -> str:
    if not doc:
        return ""
    first = re.split(r"\n\s*\n", doc.strip(), maxsplit=1)[0]
    return " ".join(line.strip() for line in first.splitlines())


def _did_you_mean(name: str, known: Iterable[str]) -> str:
    matches = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
    if not matches:
        return ""
    return "; did you mean " + " or ".join(repr(m) for m in matches) + "?"


def _type_hints(fn: Callable[..., Any], what: str) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # NameError, TypeError...: any unresolvable annotation
        raise ToolboxError(
            f"{what}: cannot resolve its type hints ({type(exc).__name__}: {exc}); "
            "import every annotated type at module level"
        ) from exc


def _tool_spec(
    name: str, mark: ToolMark, fn: Callable[..., Any], compensation: CompensationSpec | None
) -> ToolSpec:
    what = f"tool {name!r} ({_qualname(fn)})"
    hints = _type_hints(fn, what)
    fields: dict[str, Any] = {}
    params: list[_Param] = []
    for index, p in enumerate(inspect.signature(fn).parameters.values()):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            star = "*" if p.kind is p.VAR_POSITIONAL else "**"
            raise ToolboxError(
                f"{what} takes {star}{p.name}; list its parameters by name with type hints "
                "so the model sees them in the JSON schema"
            )
        positional_only = p.kind is p.POSITIONAL_ONLY
        annotation = hints.get(p.name, p.empty)
        if is_context_annotation(annotation):
            if any(q.field is None for q in params):
                raise ToolboxError(f"{what} declares more than one ToolContext parameter")
            params.append(_Param(p.name, positional_only, None))
            continue
        if annotation is p.empty:
            raise ToolboxError(
                f"{what}: parameter {p.name!r} has no type hint; annotate it "
                f"(e.g. `{p.name}: str`) so it can be validated and described to the model"
            )
        # Internal field names with the parameter name as alias: any parameter name works,
        # even ones pydantic reserves (model_config, schema, _private).
        internal = f"p{index}"
        default = ... if p.default is p.empty else p.default
        fields[internal] = (Annotated[annotation, Field(alias=p.name)], default)
        params.append(_Param(p.name, positional_only, internal))
    try:
        model = create_model(f"{name}_arguments", __config__=_ARGS_CONFIG, **fields)
        schema = model.model_json_schema(by_alias=True)
    except (PydanticUserError, TypeError, ValueError) as exc:
        raise ToolboxError(
            f"{what}: its parameter types cannot be validated or described as JSON schema "
            f"({type(exc).__name__}: {str(exc).splitlines()[0]})"
        ) from exc
    schema.pop("title", None)
    schema.setdefault("properties", {})
    schema.setdefault("required", [])
    schema["additionalProperties"] = False
    description = mark.description or _first_paragraph(inspect.getdoc(fn))
    return ToolSpec(
        name, mark.kind, description, compensation, fn, schema, model, tuple(params), mark.policy
    )


def _members(source: object) -> list[Callable[..., Any]]:
    """The decorated callables of one source, bound to it when it is an instance."""
    if isinstance(source, type):
        raise ToolboxError(
            f"Toolbox.build got the class {source.__name__}; pass an instance "
            f"({source.__name__}(...)) so its tools are bound methods"
        )
    if tool_mark(source) or compensation_mark(source):
        return [typing.cast(Callable[..., Any], source)]
    found: list[Callable[..., Any]] = []
    for attr in dir(source):
        try:
            raw = inspect.getattr_static(source, attr)
        except AttributeError:
            continue
        if tool_mark(raw) or compensation_mark(raw):
            found.append(getattr(source, attr))
    if not found:
        label = getattr(source, "__name__", None) or type(source).__name__
        raise ToolboxError(
            f"{label!r} declares no tools or compensations; decorate its functions with "
            "@tool, @compensable(...), @irreversible or @compensation"
        )
    return found


class Toolbox:
    """An immutable, ordered set of tools by name, with their compensations resolved."""

    __slots__ = ("_tools",)

    def __init__(self, tools: Iterable[ToolSpec] = ()) -> None:
        """A toolbox of `tools`; ParameterRoundTripError when a tool's parameter type has a
        JSON form that is not the value the tool would receive (sagacity.tools._round_trip)."""
        self._tools: dict[str, ToolSpec] = {}
        for spec in tools:
            check_rules(spec.name, spec.policy, spec.parameters)  # a rule that could never apply
            if spec.name in self._tools:
                raise ToolboxError(f"two tools are named {spec.name!r}")
            _check_round_trip(spec)
            self._tools[spec.name] = spec

    @classmethod
    def build(cls, *sources: object) -> Toolbox:
        """Collect tools and compensations from instances, modules or decorated functions,
        check every declaration, and resolve compensations by name."""
        seen: set[tuple[int, int]] = set()
        tools: dict[str, tuple[ToolMark, Callable[..., Any]]] = {}
        compensations: dict[str, Callable[..., Any]] = {}
        for source in sources:
            for fn in _members(source):
                # One function reachable twice (re-exported by two modules) counts once.
                identity = (id(getattr(fn, "__func__", fn)), id(getattr(fn, "__self__", None)))
                if identity in seen:
                    continue
                seen.add(identity)
                mark = tool_mark(fn)
                if mark is not None:
                    name = mark.name or str(getattr(fn, "__name__", ""))
                    if not _TOOL_NAME.fullmatch(name):
                        raise ToolboxError(
                            f"tool name {name!r} ({_qualname(fn)}) must be 1-64 letters, "
                            "digits, '_' or '-'; rename it with @tool(name=...)"
                        )
                    if name in tools:
                        raise ToolboxError(
                            f"two tools are named {name!r}: {_qualname(tools[name][1])} and "
                            f"{_qualname(fn)}; rename one with name=..."
                        )
                    tools[name] = (mark, fn)
                comp = compensation_mark(fn)
                if comp is not None:
                    if comp.name in compensations:
                        raise ToolboxError(
                            f"two compensations are named {comp.name!r}: "
                            f"{_qualname(compensations[comp.name])} and {_qualname(fn)}"
                        )
                    compensations[comp.name] = fn
        specs = []
        for name, (mark, fn) in tools.items():
            spec = None
            if mark.compensation is not None:
                target = compensations.get(mark.compensation)
                if target is None:
                    raise ToolboxError(_unresolved(name, mark.compensation, compensations, sources))
                problem = compensation_signature_problem(target)
                if problem:
                    raise ToolboxError(
                        f"tool {name!r} names compensation {mark.compensation!r} "
                        f"({_qualname(target)}), which has the wrong signature: it {problem}; "
                        "a compensation takes exactly one required positional parameter, "
                        "the CompensationContext"
                    )
                spec = CompensationSpec(mark.compensation, target)
            specs.append(_tool_spec(name, mark, fn, spec))
        return cls(specs)

    def names(self) -> list[str]:
        return list(self._tools)

    def get(self, name: str) -> ToolSpec:
        """The tool called `name`; UnknownToolError (listing the known ones) otherwise."""
        spec = self._tools.get(name)
        if spec is None:
            hint = _did_you_mean(str(name), self._tools)
            raise UnknownToolError(f"unknown tool {name!r}{hint}; {self._known()}")
        return spec

    def restrict(self, allowed: Iterable[str]) -> Toolbox:
        """A toolbox with only the `allowed` tools (in this toolbox's order). Naming a tool
        that is not here is an error: a misspelt allow-list must not silently shrink."""
        if isinstance(allowed, str):
            raise TypeError("restrict() takes an iterable of tool names, not one string")
        wanted = set(allowed)
        unknown = sorted(wanted - self._tools.keys())
        if unknown:
            listed = ", ".join(map(repr, unknown))
            raise UnknownToolError(f"cannot allow unknown tool(s) {listed}; {self._known()}")
        kept = Toolbox()
        kept._tools = {name: spec for name, spec in self._tools.items() if name in wanted}
        return kept  # these specs were checked when this toolbox was made

    def schemas(self) -> list[dict[str, Any]]:
        """Every tool in the chat-completions "tools" format, in toolbox order."""
        return [spec.schema() for spec in self._tools.values()]

    def _known(self) -> str:
        return f"known tools: {', '.join(self._tools) or 'none'}"

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"Toolbox({', '.join(self._tools)})"


def _check_round_trip(spec: ToolSpec) -> None:
    names = {p.field: p.name for p in spec.params if p.field is not None}
    problems = round_trip_problems(spec.model, names)
    if problems:
        raise ParameterRoundTripError(spec.name, _qualname(spec.fn), problems)


def _unresolved(
    tool: str, wanted: str, compensations: Mapping[str, object], sources: tuple[object, ...]
) -> str:
    message = f"tool {tool!r} names compensation {wanted!r}, which is not defined"
    if any(getattr(s, "__name__", None) == wanted or hasattr(s, wanted) for s in sources):
        return message + f"; {wanted!r} exists but is not marked with @compensation"
    hint = _did_you_mean(wanted, compensations)
    if hint:
        return message + hint
    known = ", ".join(map(repr, compensations)) or "none"
    return f"{message}; defined compensations: {known}"


__all__ = ["CompensationSpec", "ToolResultError", "ToolSpec", "Toolbox", "call_summary"]
