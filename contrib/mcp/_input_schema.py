"""A server's JSON Schema as the judge of a call's arguments, before anything is sent.

The server's `inputSchema` is the contract the arguments are checked against, in the
worker, before INTENT is journaled: a bad call is refused there and the server never sees
it. The payload is the arguments as given, with the top-level `default`s of the schema
filled in for properties the call left out, so the approver sees (and the hash covers)
the currency a server would otherwise have picked on its own; it is what the server
receives, byte for byte.

Schemas come from a server, so they are bounded (depth and size) and resolved with an
empty registry: a `$ref` to a URL is never fetched.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator, SchemaError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from referencing import Registry
from referencing.exceptions import Unresolvable

from sagacity._errors import NotCanonicalError, ToolInputError
from sagacity.journal._bounds import cut, depth_of, json_bytes
from sagacity.journal._canonical import canonical_bytes

from ._errors import McpMappingError

MAX_SCHEMA_DEPTH = 64
"""Deepest nesting a tool's schema may have (the validator recurses through it)."""
MAX_SCHEMA_BYTES = 256 * 1024
"""Largest schema, as JSON: it travels in every model turn and the worker's identity."""
MAX_LISTED_PROBLEMS = 10
MAX_PROBLEM_CHARS = 200


def _compiled(server: str, tool: str, schema: object, what: str) -> Validator:
    """A validator for `schema` (a JSON object, bounded, valid for its draft) or
    McpMappingError naming the server, the tool and the problem."""
    where = f"the {what} of tool {tool!r} on MCP server {server!r}"
    if not isinstance(schema, Mapping):
        raise McpMappingError(f"{where} is not a JSON object: {type(schema).__name__}")
    if depth_of(schema, MAX_SCHEMA_DEPTH) > MAX_SCHEMA_DEPTH:
        raise McpMappingError(f"{where} is nested more than {MAX_SCHEMA_DEPTH} levels deep")
    size = json_bytes(schema)
    if size > MAX_SCHEMA_BYTES:
        raise McpMappingError(
            f"{where} is {size:,} bytes as JSON, larger than the {MAX_SCHEMA_BYTES:,} a saga "
            "tool's schema may have (it travels with every model turn)"
        )
    schema = dict(schema)
    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise McpMappingError(f"{where} is not a valid JSON Schema: {exc.message}") from exc
    return cls(schema, registry=Registry())


def _path(parts: object) -> str:
    text = ".".join(str(p) for p in parts) if isinstance(parts, list | tuple) else ""
    return text or "(arguments)"


def problems(validator: Validator, instance: Any) -> list[str]:
    """What is wrong with `instance`, one phrase per error (at most MAX_LISTED_PROBLEMS),
    shallowest first; empty when it is valid."""
    errors = sorted(validator.iter_errors(instance), key=lambda e: (len(e.path), str(e.path)))
    listed = [
        f"{_path(list(e.absolute_path))}: {cut(e.message, MAX_PROBLEM_CHARS)}"
        for e in errors[:MAX_LISTED_PROBLEMS]
    ]
    if len(errors) > MAX_LISTED_PROBLEMS:
        listed.append(f"and {len(errors) - MAX_LISTED_PROBLEMS} more")
    return listed


class InputSchema:
    """One tool's input schema, checked when the toolset opens and applied to each call."""

    def __init__(self, server: str, tool: str, schema: object) -> None:
        # 2025-era servers must send `type: object`; an empty schema (or one without a
        # type) takes any object: MCP arguments are always an object.
        self.server = server
        self.tool = tool
        if isinstance(schema, Mapping) and schema.get("type", "object") != "object":
            raise McpMappingError(
                f"the input schema of tool {tool!r} on MCP server {server!r} has type "
                f"{schema.get('type')!r}; MCP arguments are a JSON object, so sagacity serves "
                "only tools whose input schema is an object"
            )
        self._validator = _compiled(server, tool, schema, "input schema")
        raw = dict(schema) if isinstance(schema, Mapping) else {}
        self.schema: dict[str, Any] = raw
        properties = raw.get("properties")
        self.defaults: dict[str, Any] = {
            name: copy.deepcopy(spec["default"])
            for name, spec in (properties.items() if isinstance(properties, Mapping) else ())
            if isinstance(spec, Mapping) and "default" in spec
        }

    @property
    def parameters(self) -> dict[str, Any]:
        """The schema as a model's function parameters (an object schema; a fresh copy)."""
        parameters = copy.deepcopy(self.schema)
        parameters.setdefault("type", "object")
        parameters.setdefault("properties", {})
        return parameters

    @property
    def constrains_nothing(self) -> bool:
        """True for a schema that accepts any object (no properties, no rules)."""
        return not (set(self.schema) - {"type", "title", "description", "$schema"})

    def payload(self, args: object) -> dict[str, Any]:
        """The canonical payload for `args`, or ToolInputError naming every problem."""
        what = f"MCP tool {self.tool!r}"
        if not isinstance(args, Mapping):
            raise ToolInputError(
                f"{what} takes a JSON object of named arguments, got {type(args).__name__}"
            )
        # A JSON round trip: plain dicts and lists, no aliasing of the caller's objects.
        try:
            filled = {**copy.deepcopy(self.defaults), **dict(args)}
            canonical_bytes(filled, what=f"arguments for {what}")
            payload: dict[str, Any] = json.loads(json.dumps(filled, allow_nan=False))
        except (NotCanonicalError, TypeError, ValueError) as exc:
            raise ToolInputError(f"arguments for {what} are not JSON: {exc}") from exc
        try:
            found = problems(self._validator, payload)
        except Unresolvable as exc:
            raise ToolInputError(
                f"the input schema of {what} has a $ref that does not resolve within it "
                f"({exc}); nothing was sent. Fix the schema on the server"
            ) from exc
        if found:
            raise ToolInputError(
                f"invalid arguments for {what} (its input schema on MCP server "
                f"{self.server!r}): {'; '.join(found)}; nothing was sent"
            )
        return payload


class OutputSchema:
    """A tool's declared output schema: a result that breaks it ran all the same."""

    def __init__(self, server: str, tool: str, schema: object) -> None:
        self.tool = tool
        self._validator = _compiled(server, tool, schema, "output schema")

    def problems(self, structured: Any) -> list[str]:
        if structured is None:
            return ["the tool declares an output schema but returned no structured content"]
        try:
            return problems(self._validator, structured)
        except Unresolvable as exc:
            return [f"its output schema has a $ref that does not resolve ({exc})"]


__all__ = ["MAX_SCHEMA_BYTES", "MAX_SCHEMA_DEPTH", "InputSchema", "OutputSchema", "problems"]
