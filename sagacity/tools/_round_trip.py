"""Parameter types whose JSON form is the value the tool receives.

The approver sees, the hash covers and INTENT journals the JSON dump of a call's validated
arguments, and the tool receives what validating that JSON yields (`ToolSpec.invoke`).
For those to be one value, every parameter type must dump to JSON exactly what validation
reads back. Pydantic lets a type break that in ways its core schema shows: a field left
out of the dump (`exclude=True`), a custom serializer, a computed field, a private
attribute or an `InitVar` (in the value, never in the JSON), a secret (dumped as
`'**********'`), a set (ordered by the hash seed), a lazy iterator, `Json[...]` (dumped
parsed, validated as text), an alias the dump writes and validation does not read, a
`default_factory` that may give another value on every validation, a default whose JSON
form does not read back (`note: str = None`). Each is refused when the toolbox is built,
by walking the core schema of the tool's arguments model through nested models,
dataclasses, TypedDicts, named tuples, lists, dicts, unions and definitions, with the
path of the field and what to do.

What no schema shows (a validator that converts its own output again, or reads a clock)
is caught per call: `ToolSpec.validate` refuses a payload that does not validate back.
"""

from __future__ import annotations

import dataclasses
import decimal
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.types import _SecretBase
from pydantic_core import SchemaSerializer, SchemaValidator, ValidationError, core_schema

from sagacity.tools._round_trip_rules import (
    CHILD_KEYS,
    NO_JSON_FORM,
    SECRET_SERIALIZERS,
    union_problem,
)

SAFE_FACTORIES: frozenset[object] = frozenset(
    {list, dict, tuple, str, int, float, bool, bytes, decimal.Decimal}
)
"""`default_factory` values that give the same value on every call (empty containers and
zero values). Pydantic model and dataclass classes are accepted too: their own fields are
checked like any other."""


@dataclass(frozen=True, slots=True)
class RoundTripProblem:
    """One part of a parameter type whose JSON form is not the value the tool gets."""

    path: str
    """Where, from the parameter: `to.iban`, `lines[*].sku`, `totals[<value>]`."""
    problem: str
    fix: str

    def __str__(self) -> str:
        return f"{self.path} {self.problem}; {self.fix}"


def round_trip_problems(
    model: type[BaseModel], parameters: Mapping[str, str]
) -> list[RoundTripProblem]:
    """Every construct in `model` (a tool's arguments model) whose JSON form does not
    validate back to the value the tool would receive. `parameters` maps the model's field
    names to the tool's parameter names, which the paths start with."""
    root = model.__pydantic_core_schema__
    walker = _Walker(root)
    while root.get("type") == "definitions":
        root = root["schema"]
    walker.visit_serializer(root, "(arguments)")
    config = root.get("config") or {}
    fields = root["schema"].get("fields", {}) if root.get("type") == "model" else {}
    for internal, field in fields.items():
        walker.named_field(field, parameters.get(internal, internal), internal, config)
    return walker.problems


def _schemas_in(value: object) -> Iterator[Mapping[str, Any]]:
    """Every dict in a nested structure of dicts and lists (a pre-scan for `ref`s)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)


def _from_pydantic(fn: object) -> bool:
    module = str(getattr(fn, "__module__", "") or "")
    return module == "pydantic" or module.startswith(("pydantic.", "pydantic_core"))


def _is_secret_class(obj: object) -> bool:
    return isinstance(obj, type) and issubclass(obj, _SecretBase)


def _safe_factory(factory: object) -> bool:
    if factory in SAFE_FACTORIES:
        return True
    return isinstance(factory, type) and (
        issubclass(factory, BaseModel) or dataclasses.is_dataclass(factory)
    )


def _name_of(fn: object) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or fn)


class _Walker:
    """One walk over a core schema, collecting problems (each path and kind once)."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.definitions = {
            s["ref"]: s for s in _schemas_in(root) if isinstance(s.get("ref"), str) and "type" in s
        }
        self._root_definitions: list[Any] = (
            list(root["definitions"]) if root.get("type") == "definitions" else []
        )
        self.problems: list[RoundTripProblem] = []
        self._seen: set[tuple[str, str]] = set()
        self._visited: set[str] = set()

    def report(self, path: str, problem: str, fix: str) -> None:
        if (path, problem) not in self._seen:
            self._seen.add((path, problem))
            self.problems.append(RoundTripProblem(path, problem, fix))

    def field(self, field: Mapping[str, Any], path: str, *, key: str, names: set[str]) -> None:
        """A field of a model, dataclass or TypedDict: dumped under `key`, read back from
        any of `names`."""
        if field.get("serialization_exclude"):
            self.report(
                path,
                "is left out of the JSON form (Field(exclude=True)), so the approver, the hash "
                "and the journal would not show the value the tool receives",
                "remove exclude=True; a value the caller must not set belongs inside the tool",
            )
        if field.get("serialization_exclude_if") is not None:
            self.report(
                path,
                "can be left out of the JSON form (Field(exclude_if=...))",
                "remove exclude_if=...; every value the tool receives is shown to the approver",
            )
        if field.get("init_only"):
            self.report(
                path,
                "is an InitVar: __post_init__ reads it, the JSON form never holds it",
                "make it an ordinary field",
            )
        if key not in names:
            self.report(
                path,
                f"is written to JSON as {key!r} but read back from {sorted(names)}",
                "give the field one alias= for both directions (or none)",
            )
        self.visit(field.get("schema"), path)

    def visit(self, schema: object, path: str) -> None:
        if not isinstance(schema, Mapping):
            return
        ref = schema.get("ref")
        if isinstance(ref, str):
            if ref in self._visited:  # recursive models: each definition once
                return
            self._visited.add(ref)
        kind = schema.get("type")
        self.visit_serializer(schema, path)
        if kind == "definition-ref":
            self.visit(self.definitions.get(schema["schema_ref"]), path)
        elif kind == "definitions":
            self.visit(schema["schema"], path)
        elif kind == "model":
            self._model(schema, path)
        elif kind == "model-fields":
            self._model_fields(schema, path, {})
        elif kind == "dataclass":
            self._secret_check(schema, path)
            self._dataclass_args(schema["schema"], path, schema.get("config") or {})
        elif kind == "typed-dict":
            self._computed(schema, path)
            config = schema.get("config") or {}
            for name, field in schema.get("fields", {}).items():
                self.named_field(field, f"{path}.{name}", name, config)
        elif kind == "named-tuple":
            for index, field in enumerate(schema.get("fields", [])):
                name = field.get("name", str(index))
                self.visit(field.get("schema"), f"{path}.{name}")
        elif kind == "default":
            self._default(schema, path)
        elif kind in NO_JSON_FORM:
            problem, fix = NO_JSON_FORM[kind]
            self.report(path, problem, fix)
        elif kind in ("union", "tagged-union"):
            choices = schema.get("choices", [])
            members = [
                choice[0] if isinstance(choice, tuple) else choice
                for choice in (choices.values() if isinstance(choices, Mapping) else choices)
            ]
            if kind == "union" and (
                mixed := union_problem([m.get("type") for m in members if isinstance(m, Mapping)])
            ):
                self.report(path, *mixed)
            for member in members:
                self.visit(member, path)
        elif kind == "chain":
            for step in schema.get("steps", []):
                self.visit(step, path)
        else:
            self._secret_check(schema, path)
            self._children(schema, path, kind)

    def _children(self, schema: Mapping[str, Any], path: str, kind: object) -> None:
        for key in CHILD_KEYS:
            child = schema.get(key)
            if key == "items_schema" and isinstance(child, list):  # tuple[int, str]
                for index, item in enumerate(child):
                    self.visit(item, f"{path}[{index}]")
            elif key == "items_schema":
                self.visit(child, f"{path}[*]")
            elif key == "keys_schema":
                self.visit(child, f"{path}[<key>]")
            elif key == "values_schema":
                self.visit(child, f"{path}[<value>]")
            else:
                self.visit(child, path)

    def _secret_check(self, schema: Mapping[str, Any], path: str) -> None:
        function = schema.get("function")
        inner = function.get("function") if isinstance(function, Mapping) else None
        if _is_secret_class(schema.get("cls")) or _is_secret_class(inner):
            self._secret(path)

    def _secret(self, path: str) -> None:
        self.report(
            path,
            "is (or contains) a pydantic secret; its JSON form is '**********', so the "
            "approver, the hash and the journal would not see the value the tool receives",
            "pass a reference to the secret (a vault key name) and read it inside the tool",
        )

    def visit_serializer(self, schema: Mapping[str, Any], path: str) -> None:
        ser = schema.get("serialization")
        if not isinstance(ser, Mapping):
            return
        kind = ser.get("type")
        fn = ser.get("function")
        if fn in SECRET_SERIALIZERS:
            self._secret(path)
        elif kind in ("function-plain", "function-wrap") and (
            ser.get("is_field_serializer") or not _from_pydantic(fn)
        ):
            self.report(
                path,
                f"has a custom serializer ({_name_of(fn)}): its JSON form is what the "
                "serializer writes, not the value the tool receives",
                "drop the custom serializer (field_serializer, model_serializer, "
                "PlainSerializer, WrapSerializer) and convert inside the tool",
            )
        elif kind == "format":
            self.report(
                path,
                f"is written to JSON with the format {ser.get('formatting_string')!r}",
                "drop the custom format and format inside the tool",
            )

    def _model(self, schema: Mapping[str, Any], path: str) -> None:
        cls = schema.get("cls")
        private = sorted(getattr(cls, "__private_attributes__", None) or {})
        if private:
            self.report(
                path,
                f"has private attribute(s) {', '.join(private)} of {_name_of(cls)}, which "
                "are in the value the tool receives but never in its JSON form",
                "make them fields, or compute them inside the tool",
            )
        inner = schema.get("schema")
        if isinstance(inner, Mapping) and inner.get("type") == "model-fields":
            self._model_fields(inner, path, schema.get("config") or {})
        else:  # a RootModel, or a model with a custom core schema
            self.visit(inner, path)

    def _model_fields(
        self, schema: Mapping[str, Any], path: str, config: Mapping[str, Any]
    ) -> None:
        self._computed(schema, path)
        for name, field in schema.get("fields", {}).items():
            self.named_field(field, f"{path}.{name}", name, config)

    def _dataclass_args(self, schema: object, path: str, config: Mapping[str, Any]) -> None:
        if not isinstance(schema, Mapping) or schema.get("type") != "dataclass-args":
            self.visit(schema, path)
            return
        self._computed(schema, path)
        for field in schema.get("fields", []):
            name = str(field.get("name"))
            self.named_field(field, f"{path}.{name}", name, config)

    def named_field(
        self, field: Mapping[str, Any], path: str, name: str, config: Mapping[str, Any]
    ) -> None:
        key = field.get("serialization_alias") or name
        alias = field.get("validation_alias")
        names: set[str] = set()
        if alias is None or config.get("validate_by_name"):
            names.add(name)
        if alias is not None and config.get("validate_by_alias", True):
            if isinstance(alias, str):
                names.add(alias)
            else:  # AliasChoices / AliasPath: only a one-key path reads the dumped key
                names.update(p[0] for p in alias if len(p) == 1 and isinstance(p[0], str))
        self.field(field, path, key=str(key), names=names)

    def _computed(self, schema: Mapping[str, Any], path: str) -> None:
        for computed in schema.get("computed_fields") or []:
            name = computed.get("property_name", "?")
            self.report(
                f"{path}.{name}",
                "is a computed field: the approver would see a value the tool derives, "
                "not one it receives",
                "drop @computed_field and compute the value inside the tool",
            )

    def _default(self, schema: Mapping[str, Any], path: str) -> None:
        factory = schema.get("default_factory")
        if factory is not None and not _safe_factory(factory):
            self.report(
                path,
                f"has default_factory={_name_of(factory)}, which runs at every validation: "
                "the value approved and the value that runs could differ",
                "use a plain default=... (pydantic copies mutable defaults), or make the "
                "parameter required and pass the value",
            )
        if "default" in schema:
            self._default_value(schema["schema"], schema["default"], path)
        self.visit(schema.get("schema"), path)

    def _default_value(self, inner: Mapping[str, Any], default: object, path: str) -> None:
        """A default fills the payload when the caller leaves the field out, so its JSON
        form must validate back to it (`x: str = None` does not: null is not a str)."""
        full: Any = inner
        if self._root_definitions:
            full = core_schema.definitions_schema(inner, self._root_definitions)
        try:
            serializer = SchemaSerializer(full)
            dumped = serializer.to_json(default, warnings=False)
            again = serializer.to_json(SchemaValidator(full).validate_json(dumped), warnings=False)
        except ValidationError as exc:
            problem = f"it reads back as invalid: {exc.errors()[0]['msg']}"
        except Exception as exc:  # any other failure to dump or read back is the finding
            problem = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        else:
            if again == dumped:
                return
            problem = f"it reads back as {again.decode()}"
        self.report(
            path,
            f"has the default {default!r}, whose JSON form does not validate back to it "
            f"({problem})",
            "give it a default of its own type, or widen the type (`... | None` for a None "
            "default)",
        )


__all__ = ["SAFE_FACTORIES", "RoundTripProblem", "round_trip_problems"]
