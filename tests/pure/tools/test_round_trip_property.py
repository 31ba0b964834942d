"""For every parameter type the toolbox accepts, the tool receives exactly the approved
value: hypothesis draws a type (scalars, enums, dates, Decimals, and lists, dicts,
tuples, optionals, nested models, dataclasses and TypedDicts of them) and a value of it;
the tool's argument equals what validating the canonical JSON yields, equals the caller's
validated value, and dumps back to the same canonical bytes."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import itertools
import uuid
from decimal import Decimal
from typing import Any, Literal, Optional

import pytest
from hypothesis import HealthCheck, find, given, reject, settings
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter, create_model
from pydantic_core import to_json
from typing_extensions import TypedDict

from sagacity._errors import ParameterRoundTripError
from sagacity.approval._models import approval_hash
from sagacity.journal._canonical import canonical_bytes
from sagacity.tools._decorators import ToolContext, irreversible
from sagacity.tools._toolbox import Toolbox


class Currency(enum.Enum):
    EUR = "EUR"
    USD = "USD"


class Priority(enum.IntEnum):
    LOW = 1
    HIGH = 2


Typed = tuple[Any, st.SearchStrategy[Any]]
"""A parameter type and a strategy for values of it (as a caller's Python objects)."""

SAFE_INT = 2**53 - 1
OFFSETS = st.integers(-23 * 60 + 1, 23 * 60 - 1).map(
    lambda m: datetime.timezone(datetime.timedelta(minutes=m))
)

LEAVES: list[Typed] = [
    (int, st.integers(-SAFE_INT, SAFE_INT)),
    (bool, st.booleans()),
    (str, st.text(max_size=12)),
    (float, st.floats(-SAFE_INT, SAFE_INT)),  # beyond, see test_one_payload.py (int | float)
    (Decimal, st.decimals(allow_nan=False, allow_infinity=False)),
    (bytes, st.text(max_size=8).map(str.encode)),
    (uuid.UUID, st.uuids()),
    (datetime.date, st.dates()),
    (datetime.datetime, st.datetimes(timezones=st.none() | OFFSETS)),
    (datetime.time, st.times()),
    (datetime.timedelta, st.timedeltas()),
    (Currency, st.sampled_from(Currency)),
    (Priority, st.sampled_from(Priority)),
    (Literal["a", "b", 3], st.sampled_from(["a", "b", 3])),
]
_names = itertools.count()


def _fields(children: list[Typed]) -> tuple[dict[str, Any], dict[str, st.SearchStrategy[Any]]]:
    annotations = {f"f{i}": ann for i, (ann, _) in enumerate(children)}
    strategies = {f"f{i}": s for i, (_, s) in enumerate(children)}
    return annotations, strategies


def _model(children: list[Typed]) -> Typed:
    annotations, strategies = _fields(children)
    fields: dict[str, Any] = {k: (v, ...) for k, v in annotations.items()}
    model = create_model(f"Model{next(_names)}", **fields)
    return model, st.fixed_dictionaries(strategies).map(lambda kw: model(**kw))


def _dataclass(children: list[Typed]) -> Typed:
    annotations, strategies = _fields(children)
    cls = dataclasses.make_dataclass(f"Data{next(_names)}", list(annotations.items()))
    return cls, st.fixed_dictionaries(strategies).map(lambda kw: cls(**kw))


def _typed_dict(children: list[Typed]) -> Typed:
    annotations, strategies = _fields(children)
    typed_dict: Any = TypedDict(f"Typed{next(_names)}", annotations)
    return typed_dict, st.fixed_dictionaries(strategies)


def _extend(inner: st.SearchStrategy[Typed]) -> st.SearchStrategy[Typed]:
    several = st.lists(inner, min_size=1, max_size=3)
    keys = st.text(max_size=4)
    return st.one_of(
        inner.map(lambda t: (list[t[0]], st.lists(t[1], max_size=3))),
        inner.map(lambda t: (Optional[t[0]], st.none() | t[1])),  # noqa: UP045
        inner.map(
            lambda t: (
                dict[str, t[0]],
                st.dictionaries(keys, t[1], max_size=3),
            )
        ),
        st.tuples(inner, inner).map(
            lambda p: (tuple[p[0][0], p[1][0]], st.tuples(p[0][1], p[1][1]))
        ),
        st.tuples(inner, inner).map(lambda p: (p[0][0] | p[1][0], p[0][1] | p[1][1])),
        several.map(_model),
        several.map(_dataclass),
        several.map(_typed_dict),
    )


TYPES = st.recursive(st.sampled_from(LEAVES), _extend, max_leaves=6)


def _ctx() -> ToolContext:
    return ToolContext(saga_id="s", step=1, attempt=1, tool="take")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(typed=TYPES, data=st.data())
def test_the_tool_receives_exactly_the_approved_value(typed: Typed, data: st.DataObject) -> None:
    annotation, values = typed
    value = data.draw(values, label="the caller's value")
    received: list[Any] = []

    def take(x: Any) -> None:
        received.append(x)

    take.__annotations__ = {"x": annotation, "return": None}
    try:
        spec = Toolbox.build(irreversible(take)).get("take")  # accepted at build
    except ParameterRoundTripError as exc:  # the one union refused by its member kinds
        assert all("union of Decimal and float" in problem.problem for problem in exc.problems), exc
        reject()
    adapter = TypeAdapter(annotation)
    raw = {"x": adapter.dump_python(value, mode="json")}  # the call, as JSON

    approved = spec.validate(raw)  # what the approver sees, the hash covers, INTENT holds
    asyncio.run(spec.invoke(approved, _ctx()))
    [got] = received

    from_json = adapter.validate_json(canonical_bytes(approved.args["x"]))
    assert got == from_json
    assert got == adapter.validate_json(to_json(raw["x"]))  # the caller's value, validated
    dumped = canonical_bytes({"x": adapter.dump_python(got, mode="json")})
    assert dumped == approved.canonical == canonical_bytes(approved.args)
    assert approved.sha256 == approval_hash("take", approved.args)


def _kind(annotation: Any) -> str:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "model"
    if dataclasses.is_dataclass(annotation):
        return "dataclass"
    if isinstance(annotation, type) and issubclass(annotation, dict):
        return "typeddict"
    return str(getattr(getattr(annotation, "__origin__", None), "__name__", "leaf"))


@pytest.mark.parametrize("kind", ["model", "dataclass", "typeddict", "list", "dict", "tuple"])
def test_the_generated_types_reach_every_container(kind: str) -> None:
    """The strategy really builds each container (a guard against one that silently
    stops at scalars)."""
    found = find(
        TYPES, lambda t: _kind(t[0]) == kind, settings=settings(database=None, max_examples=2_000)
    )
    assert _kind(found[0]) == kind
