"""An MCP tool as a sagacity ToolSpec, and an MCP tool as a compensation.

The spec plugs into sagacity's own tool runner: `validate` judges the arguments against
the server's input schema (before INTENT, so a bad call is refused with nothing sent),
and `invoke` sends the validated payload — exactly what was journaled and, for an
irreversible tool, approved — with the step's idempotency key in the request's `_meta`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from temporalio.exceptions import ApplicationError

from sagacity._errors import PayloadMismatchError
from sagacity.journal._canonical import JsonValue, canonical_bytes, parse_canonical
from sagacity.tools._decorators import CompensationContext, ToolContext, result_to_json
from sagacity.tools._payload import Payload
from sagacity.tools._toolbox import CompensationSpec, ToolSpec

from ._connection import McpConnection
from ._errors import McpToolChangedError
from ._mapping import ResolvedCompensation, ResolvedTool
from ._results import step_result, undo_arguments

IDEMPOTENCY_KEY_META = "sagacity/idempotency-key"
"""The `_meta` key of a call's idempotency key: `saga_id:step` for a step (the same for
every attempt), `saga_id:step:compensate` for its undo. A server that keys its effect on
it applies a retried call once."""
SAGA_ID_META = "sagacity/saga-id"
STEP_META = "sagacity/step"


def call_meta(saga_id: str, step: int, key: str) -> dict[str, Any]:
    return {IDEMPOTENCY_KEY_META: key, SAGA_ID_META: saga_id, STEP_META: step}


class _ValidatedByTheServerSchema(BaseModel):
    """Stands in for the pydantic model of a Python tool: an MCP tool's arguments are
    judged by its JSON Schema (McpToolSpec.validate), never by this."""


def _never_called(**_: Any) -> None:
    raise AssertionError("an MCP tool is invoked through McpToolSpec.invoke")


@dataclass(frozen=True, eq=False)
class McpToolSpec(ToolSpec):
    """A tool of an MCP server, as the worker took it at start. Build with McpToolset."""

    remote: ResolvedTool | None = field(default=None, repr=False)
    connection: McpConnection | None = field(default=None, repr=False)

    @classmethod
    def of(
        cls, remote: ResolvedTool, connection: McpConnection, undo: CompensationSpec | None
    ) -> McpToolSpec:
        definition = remote.definition
        return cls(
            name=remote.name,
            kind=remote.kind,
            description=definition.description or definition.title or "",
            compensation=undo,
            fn=_never_called,
            parameters=remote.input.parameters,
            model=_ValidatedByTheServerSchema,
            params=(),
            policy=remote.policy,
            remote=remote,
            connection=connection,
        )

    def _parts(self) -> tuple[ResolvedTool, McpConnection]:
        assert self.remote is not None and self.connection is not None
        return self.remote, self.connection

    def validate(self, args: object) -> Payload:
        """The payload: `args` with the schema's top-level defaults, valid against the
        server's input schema; ToolInputError naming every problem otherwise."""
        return Payload.of(self.name, self._parts()[0].input.payload(args))

    async def invoke(self, payload: Payload, ctx: ToolContext) -> JsonValue:
        """Send the canonical `payload` (the one approved and journaled), once it is
        checked to validate back to itself against the server's schema."""
        remote, connection = self._parts()
        own = remote.input.payload(parse_canonical(payload.text))
        if payload.tool != self.name or canonical_bytes(own) != payload.canonical:
            raise PayloadMismatchError(
                f"the payload of MCP tool {self.name!r} does not validate back to itself "
                "against the server's schema, so it is not what was approved and "
                "journaled; nothing was sent"
            )
        meta = call_meta(ctx.saga_id, ctx.step, ctx.idempotency_key)
        answer = await connection.call(remote.definition, own, meta)
        kept = step_result(connection.name, self.name, answer, remote.output)
        return result_to_json(kept, f"MCP tool {self.name!r}")


def mcp_compensation(
    forward: str, undo: ResolvedCompensation, connection: McpConnection
) -> Callable[[CompensationContext], Awaitable[None]]:
    """The compensation that calls the server's undo tool with the arguments `undo.args`
    builds (by default the forward call's structured result, as recorded). Arguments that cannot be
    built or that break the undo's schema are not retried: no retry would fix them, and
    the saga ends COMPENSATION_FAILED for a person. A failed undo call is retried."""
    assert undo.tool is not None and undo.input is not None
    tool, schema = undo.tool, undo.input
    what = f"undo of {forward!r} by MCP tool {tool.name!r}"

    async def call_undo(ctx: CompensationContext) -> None:
        try:
            built = undo.args(ctx) if undo.args is not None else undo_arguments(ctx.result, what)
            arguments = schema.payload(built)
        except Exception as exc:  # the mapping's builder or the recorded result
            raise ApplicationError(
                f"{what}: cannot build its arguments: {type(exc).__name__}: {exc}",
                type="McpUndoArguments",
                non_retryable=True,
            ) from exc
        meta = call_meta(ctx.saga_id, ctx.step, ctx.compensation_key)
        try:
            answer = await connection.call(tool, arguments, meta)
        except McpToolChangedError as exc:
            raise ApplicationError(str(exc), type="McpToolChanged", non_retryable=True) from exc
        step_result(connection.name, tool.name, answer, None)

    call_undo.__name__ = call_undo.__qualname__ = f"undo_{forward}_by_{tool.name}"
    return call_undo


def compensation_spec(
    forward: str, undo: ResolvedCompensation, connection: McpConnection
) -> CompensationSpec:
    if undo.fn is not None:
        return CompensationSpec(undo.name, undo.fn)
    return CompensationSpec(undo.name, mcp_compensation(forward, undo, connection))


__all__ = [
    "IDEMPOTENCY_KEY_META",
    "SAGA_ID_META",
    "STEP_META",
    "McpToolSpec",
    "call_meta",
    "compensation_spec",
    "mcp_compensation",
]
