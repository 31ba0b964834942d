"""A runnable tool: its arguments validated into the call's one Payload, and run on it.

A spec validates arguments with a pydantic model built from the tool's type hints
(sagacity.tools._toolbox builds it) and returns a `Payload`: the JSON dump of the validated
values and its canonical bytes, which are what the approver sees, what the hash covers
and what INTENT journals. `invoke` takes only a Payload and gives the tool what validating
its canonical bytes yields, never the caller's arguments, so the approval, the hash, the
journal and the tool's input are one value. `validate` therefore refuses a call whose
payload does not validate back to itself (a validator that converts its own output again,
euros to cents to "cents of cents") or whose validation is not deterministic (a validator
reading a clock).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pydantic_core
from pydantic import BaseModel, ValidationError

from sagacity._errors import NotCanonicalError, PayloadMismatchError, ToolInputError
from sagacity.approval._policy import ApprovalPolicy
from sagacity.journal._canonical import JsonValue, canonical_bytes
from sagacity.tools._decorators import (
    CompensationContext,
    ToolContext,
    ToolKind,
    call_in_loop,
    result_to_json,
    thread_safe_heartbeat,
)
from sagacity.tools._payload import Payload

__all__ = ["CompensationSpec", "ToolSpec", "call_summary"]

_MAX_LISTED_PROBLEMS = 10


class _Param(NamedTuple):
    """How one function parameter is filled: from a model field, or with the context."""

    name: str
    positional_only: bool
    field: str | None  # None: inject the ToolContext


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

    def validate(self, args: object) -> Payload:
        """The call's Payload for `args`: validated, defaults filled in, JSON mode, with
        its canonical bytes.

        Raises ToolInputError naming the tool and every bad field; when validating the
        same arguments twice gives two payloads (a clock or a random value in a
        validator); or when the payload does not validate back to itself (a validator
        that converts its own output again): what was approved could then never be what
        runs.
        """
        payload, canonical = self._dumped(self._validated(args))
        self._same((payload, canonical), self._dumped(self._validated(args)), _UNSTABLE)
        self._same((payload, canonical), self._dumped(self._from_json(canonical)), _NOT_FIXED)
        return Payload.of(self.name, payload, canonical)

    def _same(
        self,
        first: tuple[dict[str, Any], bytes],
        other: tuple[dict[str, Any], bytes],
        problem: str,
    ) -> None:
        """Refuse arguments whose payload `other` (validated again, or from its JSON) is
        not the payload `first`: ToolInputError with `problem`, naming the parameters."""
        (payload, canonical), (payload_again, canonical_again) = first, other
        if canonical_again != canonical:
            params = _differing(payload, payload_again)
            raise ToolInputError(f"arguments for tool {self.name!r} " + problem.format(params))

    async def invoke(self, payload: Payload, ctx: ToolContext) -> JsonValue:
        """Run the tool on `payload` (the one approved and journaled, as `validate` gave
        it) and return its result as JSON.

        The tool receives what validating the payload's canonical bytes yields — never the
        caller's own arguments, whose Python values could hold what the payload does not
        show — and nothing runs unless that value dumps back to the same bytes. The
        context is passed only if the tool declares one."""
        if payload.tool != self.name:
            raise PayloadMismatchError(
                f"a payload of tool {payload.tool!r} was given to tool {self.name!r}; nothing ran"
            )
        instance = self._from_json(payload.canonical)
        if self._dumped(instance)[1] != payload.canonical:
            raise PayloadMismatchError(
                f"the payload of tool {self.name!r} does not validate back to itself, so it "
                "is not what was approved and journaled; nothing ran"
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

    def _dumped(self, instance: BaseModel) -> tuple[dict[str, Any], bytes]:
        """The validated arguments in JSON mode, and their canonical bytes."""
        what = f"arguments for tool {self.name!r}"
        try:
            payload: dict[str, Any] = instance.model_dump(mode="json", by_alias=True)
            return payload, canonical_bytes(payload, what=what)
        except NotCanonicalError as exc:
            raise ToolInputError(str(exc)) from exc
        except pydantic_core.PydanticSerializationError as exc:
            raise ToolInputError(
                f"{what} have no JSON form ({exc}); a validator returned a value of a type "
                "pydantic cannot dump"
            ) from exc

    def _validated(self, args: object) -> BaseModel:
        """The caller's arguments validated as JSON, lax ("100" becomes 100): the same
        mode as the payload is validated in for the tool (`invoke`), so a type that
        validates JSON differently from Python objects (bytes | str) gives one value."""
        if not isinstance(args, Mapping):
            raise ToolInputError(
                f"tool {self.name!r} takes a JSON object of named arguments, "
                f"got {type(args).__name__}"
            )
        try:
            data = pydantic_core.to_json(dict(args), inf_nan_mode="constants")
        except pydantic_core.PydanticSerializationError as exc:
            raise ToolInputError(
                f"arguments for tool {self.name!r} are not JSON values ({exc})"
            ) from exc
        return self._from_json(data)

    def _from_json(self, data: bytes) -> BaseModel:
        try:
            return self.model.model_validate_json(data)
        except ValidationError as exc:
            raise self._invalid(exc) from exc

    def _invalid(self, exc: ValidationError) -> ToolInputError:
        errors = exc.errors(include_url=False, include_input=False)
        problems = [
            f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
            for e in errors[:_MAX_LISTED_PROBLEMS]
        ]
        if len(errors) > _MAX_LISTED_PROBLEMS:
            problems.append(f"and {len(errors) - _MAX_LISTED_PROBLEMS} more")
        return ToolInputError(f"invalid arguments for tool {self.name!r}: {'; '.join(problems)}")


_UNSTABLE = (
    "validate differently each time (parameters {}): a validator reading a clock or random "
    "source. Pass the value explicitly, or derive it inside the tool from ctx.idempotency_key"
)
"""Validating the same arguments twice gave two payloads."""
_NOT_FIXED = (
    "do not survive their own JSON form (parameters {} change when the payload is validated "
    "again): a validator that converts its own output again (euros to cents, then cents to "
    "'cents of cents'). The tool receives what the approved payload validates to, so make "
    "the validator accept its own output unchanged, or convert inside the tool"
)
"""The payload does not validate back to itself."""


def _differing(first: Mapping[str, Any], second: Mapping[str, Any]) -> list[str]:
    """Up to five top-level keys whose values differ between two payloads."""
    keys = set(first) | set(second)
    return sorted(k for k in keys if first.get(k, ...) != second.get(k, ...))[:5]
