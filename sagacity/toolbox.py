"""The toolbox: decorated callables collected, checked and turned into runnable specs.

Building is where declarations are judged. A compensation name that does not resolve, a
compensation that cannot take its context, two tools with one name, or a parameter the
model cannot be told about is a `ToolboxError` at startup, because the alternative is
finding out at refund time, with money already moved.

A spec validates arguments with a pydantic model built from the type hints and returns
the JSON dump of the validated values. That dump is the canonical payload: what the
journal records and what an approver's hash covers. The tool receives the values
validated from the call's own arguments — never a re-validation of the dump, which would
run a converting validator twice (euros to cents, then cents to "cents of cents") — and
`invoke` checks, byte for byte, that their dump is the payload that was approved and
journaled. So validation must be deterministic (`validate` runs it twice and refuses a
call whose two results differ), and types whose JSON form hides the value the tool gets
(secrets) are refused when the toolbox is built.
"""

from __future__ import annotations

import collections.abc
import copy
import dataclasses
import difflib
import inspect
import re
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, ValidationError, create_model
from pydantic.types import _SecretBase

from sagacity.approval_policy import ApprovalPolicy, check_rules
from sagacity.canonical import JsonValue, canonical_bytes
from sagacity.errors import (
    NotCanonicalError,
    PayloadMismatchError,
    ToolboxError,
    ToolInputError,
    UnknownToolError,
)
from sagacity.tools import (
    CompensationContext,
    ToolContext,
    ToolKind,
    ToolMark,
    ToolResultError,
    call_in_loop,
    compensation_mark,
    compensation_signature_problem,
    is_context_annotation,
    result_to_json,
    thread_safe_heartbeat,
    tool_mark,
)

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What chat-completions APIs accept as a function name."""

_ARGS_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False)
"""Lax coercion ("100" → 100) like the model would expect, but unknown keys are refused
and NaN/Infinity too: they have no JSON form, so they could not be approved or journaled."""

_MAX_LISTED_PROBLEMS = 10


class _Param(NamedTuple):
    """How one function parameter is filled: from a model field, or with the context."""

    name: str
    positional_only: bool
    field: str | None  # None: inject the ToolContext


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


@dataclass(frozen=True, eq=False)
class CompensationSpec:
    """A resolved compensation: the callable that undoes one kind of step."""

    name: str
    fn: Callable[[CompensationContext], Any] = field(repr=False)

    async def invoke(self, ctx: CompensationContext) -> None:
        """Run the compensation. Its return value is ignored: an undo that ran must never
        be reported failed because of what it returned."""
        if not inspect.iscoroutinefunction(self.fn):
            ctx = dataclasses.replace(ctx, heartbeat=thread_safe_heartbeat(ctx.heartbeat))
        await call_in_loop(self.fn, [ctx], {})


def call_summary(name: str, args: object, limit: int = 80) -> str:
    """`charge_card(amount=100, currency='EUR')`, cut to `limit` characters with "…".

    One rendering for the toolbox and the workflow's activity summaries and tables, so the
    Temporal UI and the CLI show a call the same way."""
    if limit < 2:
        raise ValueError(f"limit must be at least 2, got {limit}")
    if isinstance(args, Mapping):
        parts: list[str] = []
        length = len(name) + 2
        for key, value in args.items():
            parts.append(f"{key}={value!r}")
            length += len(parts[-1]) + 2
            if length > limit:  # the rest would be cut anyway
                break
        inner = ", ".join(parts)
    else:
        inner = repr(args)
    text = f"{name}({inner})"
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, eq=False)
class ToolSpec:
    """A validated tool declaration. Build these with `Toolbox.build`, not by hand."""

    name: str
    kind: ToolKind
    description: str
    compensation: CompensationSpec | None
    fn: Callable[..., Any] = field(repr=False)
    parameters: dict[str, Any] = field(repr=False)
    model: type[BaseModel] = field(repr=False)
    params: tuple[_Param, ...] = field(repr=False)
    policy: ApprovalPolicy | None = field(default=None, repr=False)
    """Who may approve a call of an irreversible tool (None: the default policy)."""

    @property
    def requires_approval(self) -> bool:
        return self.kind is ToolKind.IRREVERSIBLE

    @property
    def takes_context(self) -> bool:
        return any(p.field is None for p in self.params)

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)

    def schema(self) -> dict[str, Any]:
        """This tool in the chat-completions "tools" format (a fresh copy)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": copy.deepcopy(self.parameters),
            },
        }

    def validate(self, args: object) -> dict[str, Any]:
        """The canonical payload for `args`: validated, defaults filled in, JSON mode.

        Raises ToolInputError naming the tool and every bad field, or when validating the
        same arguments twice gives two payloads (a generated default, a clock or a random
        value in a validator): what was approved could then never be what runs.
        """
        payload = self._payload(self._validated(args))
        again = self._payload(self._validated(args))
        if canonical_bytes(again) != canonical_bytes(payload):
            differ = sorted(k for k in payload if payload.get(k) != again.get(k))[:5]
            raise ToolInputError(
                f"arguments for tool {self.name!r} validate differently each time "
                f"(parameters {differ}): a generated default or a validator reading a clock "
                "or random source. Pass the value explicitly, or derive it inside the tool "
                "from ctx.idempotency_key"
            )
        return payload

    def _payload(self, instance: BaseModel) -> dict[str, Any]:
        payload: dict[str, Any] = instance.model_dump(mode="json", by_alias=True)
        try:
            canonical_bytes(payload, what=f"arguments for tool {self.name!r}")
        except NotCanonicalError as exc:
            raise ToolInputError(str(exc)) from exc
        return payload

    async def invoke(
        self,
        call_args: Mapping[str, Any],
        ctx: ToolContext,
        *,
        payload: dict[str, Any] | None = None,
    ) -> JsonValue:
        """Validate the call's own arguments, check their payload is `payload` (the one
        approved and journaled; by default, what `validate` gives) byte for byte, call the
        tool with those values and return its result as JSON. The context is passed only
        if the tool declares one."""
        instance = self._validated(call_args)
        expected = self.validate(call_args) if payload is None else payload
        if canonical_bytes(self._payload(instance)) != canonical_bytes(expected):
            raise PayloadMismatchError(
                f"the arguments of tool {self.name!r} no longer validate to the approved and "
                "journaled payload; nothing ran"
            )
        if not self.is_async:
            ctx = dataclasses.replace(ctx, heartbeat=thread_safe_heartbeat(ctx.heartbeat))
        positional: list[Any] = []
        named: dict[str, Any] = {}
        for param in self.params:
            value = ctx if param.field is None else getattr(instance, param.field)
            if param.positional_only:
                positional.append(value)
            else:
                named[param.name] = value
        result = await call_in_loop(self.fn, positional, named)
        return result_to_json(result, f"tool {self.name!r}")

    def summary(self, args: object, limit: int = 80) -> str:
        """A one-line rendering such as `charge_card(amount=100, currency='EUR')`, cut to
        `limit` characters with "…", for activity summaries and tables."""
        return call_summary(self.name, args, limit)

    def _validated(self, args: object) -> BaseModel:
        if not isinstance(args, Mapping):
            raise ToolInputError(
                f"tool {self.name!r} takes a JSON object of named arguments, "
                f"got {type(args).__name__}"
            )
        try:
            return self.model.model_validate(dict(args))
        except ValidationError as exc:
            errors = exc.errors(include_url=False, include_input=False)
            problems = [
                f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
                for e in errors[:_MAX_LISTED_PROBLEMS]
            ]
            if len(errors) > _MAX_LISTED_PROBLEMS:
                problems.append(f"and {len(errors) - _MAX_LISTED_PROBLEMS} more")
            raise ToolInputError(
                f"invalid arguments for tool {self.name!r}: {'; '.join(problems)}"
            ) from exc


def _type_hints(fn: Callable[..., Any], what: str) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # NameError, TypeError...: any unresolvable annotation
        raise ToolboxError(
            f"{what}: cannot resolve its type hints ({type(exc).__name__}: {exc}); "
            "import every annotated type at module level"
        ) from exc


def _mentions_set(annotation: object) -> bool:
    """True if a set or frozenset appears anywhere in the annotation."""
    origin = typing.get_origin(annotation) or annotation
    if origin in (set, frozenset, collections.abc.Set, collections.abc.MutableSet):
        return True
    return any(_mentions_set(arg) for arg in typing.get_args(annotation))


def _mentions_secret(annotation: object, seen: set[int] | None = None) -> bool:
    """True if a pydantic secret appears in the annotation, its arguments, or the fields of
    a model or dataclass it names (recursively)."""
    seen = set() if seen is None else seen
    if id(annotation) in seen:
        return False
    seen.add(id(annotation))
    origin = typing.get_origin(annotation) or annotation
    if isinstance(origin, type) and issubclass(origin, _SecretBase):
        return True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return any(_mentions_secret(f.annotation, seen) for f in annotation.model_fields.values())
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return any(_mentions_secret(f.type, seen) for f in dataclasses.fields(annotation))
    return any(_mentions_secret(arg, seen) for arg in typing.get_args(annotation))


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
        if _mentions_secret(annotation):
            raise ToolboxError(
                f"{what}: parameter {p.name!r} is (or contains) a pydantic secret; its JSON "
                "form is '**********', so the approver, the hash and the journal would not "
                "see the value the tool receives. Pass a reference to the secret (a vault "
                "key name) and read it inside the tool"
            )
        if _mentions_set(annotation):
            raise ToolboxError(
                f"{what}: parameter {p.name!r} is a set; its JSON form depends on the process's "
                "hash seed, so the approved payload could differ from the one that runs. Use "
                "a list (sorted if order does not matter)"
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
        self._tools: dict[str, ToolSpec] = {}
        for spec in tools:
            check_rules(spec.name, spec.policy, spec.parameters)  # a rule that could never apply
            if spec.name in self._tools:
                raise ToolboxError(f"two tools are named {spec.name!r}")
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
        return Toolbox(spec for name, spec in self._tools.items() if name in wanted)

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
