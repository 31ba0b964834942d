"""Tool declarations: the decorators users put on their functions, the contexts tools and
compensations receive, and the calling convention (sync callables run in a thread with
heartbeats handed back to the loop; results must have an exact JSON form).

Decorators only attach metadata and return the function unchanged, so a decorated method is
still an ordinary method and a decorated function can be unit-tested without sagacity.
Everything that can be wrong with a declaration (a compensation name that does not resolve,
a compensation with the wrong signature, an untyped parameter) is checked once, when
`Toolbox.build` collects the metadata: a typo must fail at startup, never at refund time.
"""

from __future__ import annotations

import asyncio
import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any, TypeVar, overload

import pydantic_core

from sagacity._errors import NotCanonicalError, SagacityError, ToolboxError
from sagacity.approval._policy import ApprovalPolicy
from sagacity.journal._canonical import JsonValue, canonical_bytes

F = TypeVar("F", bound=Callable[..., Any])

TOOL_ATTR = "__sagacity_tool__"
"""Attribute holding a `ToolMark` on a function declared as a tool."""

COMPENSATION_ATTR = "__sagacity_compensation__"
"""Attribute holding a `CompensationMark` on a function declared as a compensation."""


class ToolKind(StrEnum):
    """How a tool's effect is handled when a saga does not complete."""

    PLAIN = "PLAIN"
    """Journaled; nothing to undo (reads, idempotent lookups)."""
    COMPENSABLE = "COMPENSABLE"
    """Undone by its named compensation, in reverse order, when the saga fails."""
    IRREVERSIBLE = "IRREVERSIBLE"
    """Cannot be undone, so it never runs until a human approves its exact payload."""


@dataclass(frozen=True, slots=True)
class ToolMark:
    """What a tool decorator records. `name`/`description` of None mean "derive from the
    function" (its `__name__` and the first paragraph of its docstring)."""

    kind: ToolKind
    name: str | None = None
    description: str | None = None
    compensation: str | None = None
    policy: ApprovalPolicy | None = None


@dataclass(frozen=True, slots=True)
class CompensationMark:
    """What `@compensation` records: the name compensable tools refer to."""

    name: str


def _is_function_like(fn: object) -> bool:
    return callable(fn) or isinstance(fn, staticmethod | classmethod)


def _attach(fn: F, attr: str, mark: object, decorator: str) -> F:
    if not _is_function_like(fn):
        raise ToolboxError(f"@{decorator} decorates a function or method, got {fn!r}")
    # staticmethod/classmethod objects and bound methods keep metadata on the function
    # they wrap, which is where attribute access on the bound result finds it again.
    target = getattr(fn, "__func__", fn)
    if hasattr(target, attr):
        raise ToolboxError(
            f"{getattr(target, '__name__', target)!r} is declared twice with @{decorator} "
            "or a sibling decorator; a function is one tool (@tool, @compensable or "
            "@irreversible) and at most one compensation"
        )
    setattr(target, attr, mark)
    return fn


def _check_text(value: object, what: str, decorator: str) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise ToolboxError(f"@{decorator}({what}=...) must be a non-empty string, got {value!r}")


@overload
def tool(fn: F, /) -> F: ...
@overload
def tool(*, name: str | None = None, description: str | None = None) -> Callable[[F], F]: ...
def tool(
    fn: F | None = None, /, *, name: str | None = None, description: str | None = None
) -> F | Callable[[F], F]:
    """Declare a plain tool: journaled, nothing to undo. Use bare (`@tool`) or with
    `@tool(name=..., description=...)` to override the function's name and docstring."""
    _check_text(name, "name", "tool")
    _check_text(description, "description", "tool")
    mark = ToolMark(ToolKind.PLAIN, name=name, description=description)
    if fn is not None:
        return _attach(fn, TOOL_ATTR, mark, "tool")
    return lambda f: _attach(f, TOOL_ATTR, mark, "tool")


@overload
def irreversible(fn: F, /) -> F: ...
@overload
def irreversible(
    *,
    name: str | None = None,
    description: str | None = None,
    policy: ApprovalPolicy | None = None,
) -> Callable[[F], F]: ...
def irreversible(
    fn: F | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    policy: ApprovalPolicy | None = None,
) -> F | Callable[[F], F]:
    """Declare a tool whose effect cannot be undone (a wire, an email). It never runs until
    a human approves the SHA-256 of its exact validated arguments; `policy` says who may
    approve and how many people must (sagacity.approval._policy; default: one approver,
    not the saga's requester)."""
    _check_text(name, "name", "irreversible")
    _check_text(description, "description", "irreversible")
    if policy is not None and not isinstance(policy, ApprovalPolicy):
        raise ToolboxError(f"@irreversible(policy=...) takes an ApprovalPolicy, got {policy!r}")
    mark = ToolMark(ToolKind.IRREVERSIBLE, name=name, description=description, policy=policy)
    if fn is not None:
        return _attach(fn, TOOL_ATTR, mark, "irreversible")
    return lambda f: _attach(f, TOOL_ATTR, mark, "irreversible")


def compensable(
    compensation: str, /, *, name: str | None = None, description: str | None = None
) -> Callable[[F], F]:
    """Declare a tool undone by the compensation named `compensation`.

    The compensation is bound by name rather than by reference so tools and their undo can
    live in different modules or objects; the name is resolved (with close-match hints for
    typos) when the toolbox is built.
    """
    if callable(compensation):
        raise ToolboxError(
            "@compensable needs the name of its compensation, e.g. "
            "@compensable('release_inventory'); it was used bare on "
            f"{getattr(compensation, '__name__', compensation)!r}"
        )
    if not isinstance(compensation, str) or not compensation:
        raise ToolboxError(
            f"@compensable(...) needs a non-empty compensation name, got {compensation!r}"
        )
    _check_text(name, "name", "compensable")
    _check_text(description, "description", "compensable")
    mark = ToolMark(
        ToolKind.COMPENSABLE, name=name, description=description, compensation=compensation
    )
    return lambda f: _attach(f, TOOL_ATTR, mark, "compensable")


@overload
def compensation(fn: F, /) -> F: ...
@overload
def compensation(name: str | None = None, /) -> Callable[[F], F]: ...
def compensation(fn: F | str | None = None, /) -> F | Callable[[F], F]:
    """Mark a function as a compensation. Use bare (the name is the function's name) or as
    `@compensation("release_inventory")`. It must take exactly one required positional
    parameter, the `CompensationContext`; the toolbox checks that when it is built."""
    if fn is not None and not isinstance(fn, str):
        target = getattr(fn, "__func__", fn)
        name = str(getattr(target, "__name__", ""))
        return _attach(fn, COMPENSATION_ATTR, CompensationMark(name), "compensation")
    _check_text(fn, "name", "compensation")
    given = fn

    def decorate(f: F) -> F:
        target = getattr(f, "__func__", f)
        return _attach(
            f, COMPENSATION_ATTR, CompensationMark(given or target.__name__), "compensation"
        )

    return decorate


def tool_mark(obj: object) -> ToolMark | None:
    """The tool metadata on `obj` (function, method, staticmethod), or None."""
    mark = getattr(getattr(obj, "__func__", obj), TOOL_ATTR, None)
    return mark if isinstance(mark, ToolMark) else None


def compensation_mark(obj: object) -> CompensationMark | None:
    """The compensation metadata on `obj`, or None."""
    mark = getattr(getattr(obj, "__func__", obj), COMPENSATION_ATTR, None)
    return mark if isinstance(mark, CompensationMark) else None


def idempotency_key(saga_id: str, step: int) -> str:
    """The key for one step: the same for every retry of that step and for its
    compensation, so providers that honour idempotency keys apply the effect once."""
    return f"{saga_id}:{step}"


def _no_heartbeat(*details: Any) -> None:
    return None


def _never_fenced() -> bool:
    return False


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool may receive: declare a parameter annotated `ToolContext` (any name).

    The parameter is injected by the runtime and is not part of the tool's JSON schema.
    `idempotency_key` defaults to `saga_id:step`; pass it to payment providers. A long
    tool should call `heartbeat(...)` so a stuck attempt is detected, and check
    `is_fenced()` right before applying its effect: Temporal cannot stop a timed-out
    attempt, so a compensation leaves a tombstone that a late attempt must honour.
    """

    saga_id: str
    step: int
    attempt: int
    tool: str
    idempotency_key: str = ""
    heartbeat: Callable[..., None] = field(default=_no_heartbeat, repr=False, compare=False)
    is_fenced: Callable[[], bool] = field(default=_never_fenced, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.idempotency_key:
            object.__setattr__(self, "idempotency_key", idempotency_key(self.saga_id, self.step))


@dataclass(frozen=True, slots=True)
class CompensationContext:
    """What a compensation receives: enough to undo one step without any other state.

    `input` is the validated JSON arguments the step ran with and `result` its recorded
    JSON result (e.g. the charge id to refund). `idempotency_key` is the forward step's key;
    `compensation_key` derives a distinct one for providers that refuse to reuse a key for
    a different operation.
    """

    saga_id: str
    step: int
    tool: str
    input: dict[str, Any]
    result: JsonValue
    idempotency_key: str = ""
    attempt: int = 1
    heartbeat: Callable[..., None] = field(default=_no_heartbeat, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.idempotency_key:
            object.__setattr__(self, "idempotency_key", idempotency_key(self.saga_id, self.step))

    @property
    def compensation_key(self) -> str:
        return f"{self.idempotency_key}:compensate"


def is_context_annotation(annotation: object) -> bool:
    """True for `ToolContext` and `ToolContext | None` (so a tool can default it to None
    and still be called directly in tests): such a parameter is injected, not validated."""
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return len(members) == 1 and is_context_annotation(members[0])
    return isinstance(annotation, type) and issubclass(annotation, ToolContext)


def compensation_signature_problem(fn: Callable[..., Any]) -> str | None:
    """What is wrong with `fn` as a compensation, as a phrase ("takes 2 required positional
    parameters (ctx, extra)"), or None. A compensation is called with exactly one
    positional argument, its CompensationContext; extra parameters need defaults."""
    try:
        values = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError) as exc:
        return f"has no inspectable signature ({exc})"
    required = [
        p
        for p in values
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    keyword_only = [p.name for p in values if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if keyword_only:
        return f"has required keyword-only parameter(s) {', '.join(keyword_only)}"
    if len(required) != 1:
        listed = ", ".join(p.name for p in required) or "none"
        return f"takes {len(required)} required positional parameters ({listed})"
    try:
        annotation = typing.get_type_hints(fn).get(required[0].name)
    except Exception:  # forward references to TYPE_CHECKING imports: nothing to check
        return None
    if (
        isinstance(annotation, type)
        and annotation is not Any
        and not issubclass(CompensationContext, annotation)
    ):
        return f"annotates its parameter {required[0].name!r} as {annotation.__name__}"
    return None


class ToolResultError(SagacityError, TypeError):
    """A tool or compensation returned a value with no exact JSON form, so its result
    cannot be journaled. Return dict/list/str/int/float/bool/None, a pydantic model or a
    dataclass; pass big integers and binary data as strings.

    `value` is what the tool returned, so a runner can still describe it as evidence."""

    value: object = None


def result_to_json(value: object, what: str) -> JsonValue:
    """The JSON form of a result, or ToolResultError. Canonicalization is checked here so
    a result the journal could not hold fails with the tool's name, not later."""
    try:
        data = pydantic_core.to_jsonable_python(value)
    except (pydantic_core.PydanticSerializationError, TypeError, ValueError) as exc:
        error = ToolResultError(
            f"{what} returned a {type(value).__name__}, which cannot be converted to JSON "
            f"({exc}); return dict, list, str, int, float, bool, None, a pydantic model or "
            "a dataclass"
        )
        error.value = value
        raise error from exc
    try:
        canonical_bytes(data, what=f"the result of {what}")
    except NotCanonicalError as exc:
        error = ToolResultError(str(exc))
        error.value = value
        raise error from exc
    return data


def thread_safe_heartbeat(callback: Callable[..., None]) -> Callable[..., None]:
    """A heartbeat a worker thread may call. Heartbeat callbacks (Temporal's among them)
    schedule work on the event loop and fail from another thread, and sync tools run in a
    thread, so their heartbeats are handed back to the loop."""
    loop = asyncio.get_running_loop()

    def relay(*details: Any) -> None:
        loop.call_soon_threadsafe(callback, *details)

    return relay


async def call_in_loop(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
    """Await async callables; run sync ones in a thread so they never block the loop."""
    if inspect.iscoroutinefunction(fn):
        result = await fn(*args, **kwargs)
    else:
        result = await asyncio.to_thread(fn, *args, **kwargs)
    if inspect.isawaitable(result):  # a sync wrapper around an async function
        result = await result
    return result


__all__ = [
    "COMPENSATION_ATTR",
    "TOOL_ATTR",
    "CompensationContext",
    "CompensationMark",
    "ToolContext",
    "ToolKind",
    "ToolMark",
    "ToolResultError",
    "call_in_loop",
    "compensable",
    "compensation",
    "compensation_mark",
    "compensation_signature_problem",
    "idempotency_key",
    "irreversible",
    "is_context_annotation",
    "result_to_json",
    "thread_safe_heartbeat",
    "tool",
    "tool_mark",
]
