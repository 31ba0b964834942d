"""Parameter types whose JSON form is not the value the tool would receive are refused
when the toolbox is built (sagacity.tools._round_trip), with the tool, the field's path and
what to do; the types that do round-trip are accepted."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import ipaddress
import pathlib
import uuid
from collections.abc import Iterable
from decimal import Decimal
from typing import Annotated, Any, Literal, NamedTuple, NotRequired

import pytest
from pydantic import (
    AnyUrl,
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    Json,
    PlainSerializer,
    PrivateAttr,
    Secret,
    SecretBytes,
    SecretStr,
    WrapSerializer,
    computed_field,
    field_serializer,
    model_serializer,
)
from pydantic.dataclasses import dataclass as pydantic_dataclass
from pydantic_core import CoreSchema, core_schema
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from sagacity._errors import ParameterRoundTripError, ToolboxError
from sagacity.tools._decorators import irreversible, tool_mark
from sagacity.tools._toolbox import Toolbox, _tool_spec


class Hidden(BaseModel):
    iban: str
    real_iban: str = Field("", exclude=True)


class HiddenIf(BaseModel):
    iban: str
    note: str = Field("", exclude_if=lambda v: v == "")


class FieldSerialized(BaseModel):
    iban: str

    @field_serializer("iban")
    def _masked(self, value: str) -> str:
        return value[:4] + "…"


class ModelSerialized(BaseModel):
    iban: str

    @model_serializer
    def _shown(self) -> dict[str, str]:
        return {"iban": "FR76CUSTOMER"}


class Computed(BaseModel):
    net: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def gross(self) -> int:
        return self.net * 2


@pydantic_dataclass
class ComputedDataclass:
    net: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def gross(self) -> int:
        return self.net * 2


class Private(BaseModel):
    iban: str
    _route: str = PrivateAttr("default")


@dataclasses.dataclass
class WithInitVar:
    iban: str
    override: dataclasses.InitVar[str | None] = None

    def __post_init__(self, override: str | None) -> None:
        if override:
            self.iban = override


class SecretTyped(TypedDict):
    user: str
    pin: Secret[int]


class SecretTuple(NamedTuple):
    user: str
    password: SecretStr


class Tagged(BaseModel):
    labels: frozenset[str]


class SerializedAs(BaseModel):
    iban: str = Field(serialization_alias="account")


class ReadFrom(BaseModel):
    iban: str = Field(validation_alias="account")


class Generated(BaseModel):
    ref: str = Field(default_factory=lambda: uuid.uuid4().hex)


class HiddenTyped(TypedDict):
    iban: str
    real: NotRequired[Annotated[str, Field(exclude=True)]]


class Chain(BaseModel):
    name: str
    next: Chain | None = None
    hidden: Annotated[str, Field(exclude=True)] = ""


class Sloppy(BaseModel):
    note: str = None  # type: ignore[assignment]


class Formatted:
    """A type whose serializer writes it with a format string (two decimals)."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.float_schema(serialization=core_schema.format_ser_schema(".2f"))


CASES: list[tuple[str, object, str, str]] = [
    ("nested exclude", Hidden, "to.real_iban is left out", "remove exclude=True"),
    ("list of", list[Hidden], "to[*].real_iban is left out", "remove exclude=True"),
    ("dict of", dict[str, Hidden], "to[<value>].real_iban", "remove exclude=True"),
    ("union of", int | Hidden, "to.real_iban", "remove exclude=True"),
    ("top-level exclude", Annotated[str, Field(exclude=True)], "to is left out", "exclude=True"),
    ("exclude_if", HiddenIf, "to.note can be left out", "remove exclude_if"),
    ("TypedDict exclude", HiddenTyped, "to.real is left out", "remove exclude=True"),
    ("recursive", Chain, "to.hidden is left out", "remove exclude=True"),
    ("field_serializer", FieldSerialized, "to.iban has a custom serializer", "drop the custom"),
    ("model_serializer", ModelSerialized, "to has a custom serializer", "drop the custom"),
    ("PlainSerializer", Annotated[int, PlainSerializer(str)], "custom serializer", "drop the"),
    ("WrapSerializer", Annotated[int, WrapSerializer(lambda v, h: h(v))], "serializer", "drop"),
    ("format", Formatted, "to is written to JSON with the format '.2f'", "drop the custom format"),
    ("computed", Computed, "to.gross is a computed field", "drop @computed_field"),
    ("computed dataclass", ComputedDataclass, "to.gross is a computed field", "@computed_field"),
    ("private", Private, "to has private attribute(s) _route", "make them fields"),
    ("InitVar", WithInitVar, "to.override is an InitVar", "make it an ordinary field"),
    ("SecretStr", SecretStr, "to is (or contains) a pydantic secret", "reference to the secret"),
    ("SecretBytes list", list[SecretBytes], "to[*] is (or contains) a pydantic secret", "vault"),
    ("Secret TypedDict", SecretTyped, "to.pin is (or contains) a pydantic secret", "vault"),
    ("Secret NamedTuple", SecretTuple, "to.password is (or contains) a pydantic secret", "vault"),
    ("Decimal or float", Decimal | float, "to is a union of Decimal and float", "Decimal alone"),
    ("float or Decimal", list[float | Decimal], "to[*] is a union of Decimal", "Decimal alone"),
    ("set", set[int], "to is a set", "use a list"),
    ("nested frozenset", Tagged, "to.labels is a frozenset", "use a list"),
    ("Iterable", Iterable[int], "to is a lazy iterator", "list[...]"),
    ("Json", Json[list[int]], "to is Json[...]", "inner type"),
    ("serialization_alias", SerializedAs, "to.iban is written to JSON as 'account'", "alias="),
    ("validation_alias", ReadFrom, "to.iban is written to JSON as 'iban' but read", "alias="),
    ("default_factory", Generated, "to.ref has default_factory", "plain default="),
    ("default not of its type", Sloppy, "to.note has the default None", "`... | None`"),
    (
        "top-level default_factory",
        Annotated[str, Field(default_factory=lambda: uuid.uuid4().hex)],
        "to has default_factory",
        "make the parameter required",
    ),
]


def _wire(annotation: object) -> Any:
    def wire(to: Any) -> None: ...

    wire.__annotations__ = {"to": annotation, "return": None}
    return irreversible(wire)


@pytest.mark.parametrize(
    ("annotation", "where", "fix"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_type_that_does_not_round_trip_is_refused_at_build(
    annotation: object, where: str, fix: str
) -> None:
    with pytest.raises(ParameterRoundTripError) as info:
        Toolbox.build(_wire(annotation))
    message = str(info.value)
    assert isinstance(info.value, ToolboxError)
    assert info.value.tool == "wire" and message.startswith("tool 'wire' (")
    assert where in message
    assert fix in message
    assert info.value.problems


def test_a_toolbox_made_from_specs_by_hand_is_checked_too() -> None:
    wire = _wire(Hidden)
    mark = tool_mark(wire)
    assert mark is not None
    spec = _tool_spec("wire", mark, wire, None)
    with pytest.raises(ParameterRoundTripError, match=r"to\.real_iban"):
        Toolbox([spec])


def typed_defaults(text: str | None = None, count: float = 1.5, tags: list[str] = []) -> None:  # noqa: B006
    """Defaults of their own type are accepted (pydantic copies the list)."""


def test_a_parameter_default_whose_json_form_does_not_read_back_is_refused() -> None:
    """Left out by the caller, the default fills the payload: null is not a str."""

    def note(text: str = None, count: float = float("nan")) -> None: ...  # type: ignore[assignment]  # noqa: RUF013

    with pytest.raises(ParameterRoundTripError) as info:
        Toolbox.build(irreversible(note))
    assert [p.path for p in info.value.problems] == ["text", "count"]
    assert "has the default None" in str(info.value)
    assert Toolbox.build(irreversible(typed_defaults)).names() == ["typed_defaults"]


def test_every_problem_of_a_tool_is_listed() -> None:
    def pay(to: Hidden, card: SecretStr, ref: Generated) -> None: ...

    with pytest.raises(ParameterRoundTripError) as info:
        Toolbox.build(irreversible(pay))
    assert [p.path for p in info.value.problems] == ["to.real_iban", "card", "ref.ref"]


class Currency(enum.StrEnum):
    EUR = "EUR"
    USD = "USD"


class Line(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    sku: str = Field(alias="SKU")
    qty: Annotated[int, Field(gt=0)] = 1
    tags: list[str] = Field(default_factory=list)


@dataclasses.dataclass
class Window:
    start: datetime.datetime
    length: datetime.timedelta


class Totals(TypedDict):
    net: Decimal
    currency: NotRequired[Currency]


class Point(NamedTuple):
    x: float
    y: float = 0.0


class Options(BaseModel):
    fast: bool = False


class Tree(BaseModel):
    name: str
    children: list[Tree] = []


ACCEPTED: list[object] = [
    int, str, bool, float, Decimal, bytes, uuid.UUID, datetime.date, datetime.datetime,
    datetime.time, datetime.timedelta, Currency, Literal["a", "b"], int | None,
    list[Line], dict[str, Totals], tuple[int, str], Point, Window, Tree, AnyUrl,
    ipaddress.IPv4Address, pathlib.Path, Annotated[list[int], Field(default_factory=list)],
    Annotated[Options, Field(default_factory=Options)], Any, int | Decimal, Decimal | str,
]  # fmt: skip


@pytest.mark.parametrize("annotation", ACCEPTED, ids=repr)
def test_types_that_round_trip_are_accepted(annotation: object) -> None:
    assert Toolbox.build(_wire(annotation)).names() == ["wire"]
