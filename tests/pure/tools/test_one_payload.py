"""One validation, one payload: what is approved, hashed and journaled is what the tool
receives. The tool gets what validating the approved payload yields (never the caller's
arguments), a payload that does not validate back to itself is refused per call, and
non-deterministic validation is refused."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from datetime import date
from decimal import Decimal
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, TypeAdapter

from sagacity._errors import ParameterRoundTripError, PayloadMismatchError, ToolInputError
from sagacity.journal._canonical import canonical_bytes
from sagacity.tools._decorators import ToolContext, irreversible, tool, tool_mark
from sagacity.tools._payload import Payload
from sagacity.tools._toolbox import Toolbox, _tool_spec


def _cents(value: Any) -> Any:
    """Euros ("12.50", 12.5) to integer cents. Applied to its own output (1250) it gives
    125000: the tool would receive what validating the approved 1250 yields."""
    return round(float(value) * 100)


Cents = Annotated[int, BeforeValidator(_cents)]
Upper = Annotated[str, AfterValidator(str.upper)]
"""A converting validator that accepts its own output unchanged: allowed."""


class Address(BaseModel):
    street: str
    zip: Annotated[str, Field(pattern=r"^[0-9]{5}$")]


def ctx() -> ToolContext:
    return ToolContext(
        saga_id="s", step=1, attempt=1, tool="t", idempotency_key="s:1",
        heartbeat=lambda *a: None, is_fenced=lambda: False,
    )  # fmt: skip


class Recorder:
    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []

    @irreversible
    def pay(
        self,
        amount: Decimal,
        currency: Literal["EUR", "USD"],
        when: date,
        ref: uuid.UUID,
        to: Address,
        tags: list[Upper],
        note: str | None = None,
    ) -> str:
        self.received.append(
            {"amount": amount, "currency": currency, "when": when, "ref": ref, "to": to,
             "tags": tags, "note": note}
        )  # fmt: skip
        return "ok"


RECEIVED = TypeAdapter(dict[str, Any])


@settings(max_examples=60, deadline=None)
@given(
    amount=st.decimals(min_value=0, max_value=10_000, places=2),
    currency=st.sampled_from(["EUR", "USD"]),
    when=st.dates(),
    ref=st.uuids(),
    street=st.text(max_size=30),
    zip_code=st.from_regex(r"^[0-9]{5}$", fullmatch=True),
    tags=st.lists(st.text(max_size=10), max_size=5),
    note=st.none() | st.text(max_size=20),
)
def test_the_tool_receives_exactly_the_approved_payload(
    amount: Decimal, currency: str, when: date, ref: uuid.UUID, street: str, zip_code: str,
    tags: list[str], note: str | None,
) -> None:  # fmt: skip
    recorder = Recorder()
    spec = Toolbox.build(recorder).get("pay")
    raw = {
        "amount": str(amount), "currency": currency, "when": when.isoformat(),
        "ref": str(ref), "to": {"street": street, "zip": zip_code}, "tags": tags, "note": note,
    }  # fmt: skip
    approved = spec.validate(raw)  # what the approver sees and the hash covers
    asyncio.run(spec.invoke(approved, ctx()))
    [got] = recorder.received
    got["to"] = got["to"].model_dump()
    assert canonical_bytes(RECEIVED.dump_python(got, mode="json")) == approved.canonical
    assert got["tags"] == [t.upper() for t in tags]


def test_a_converting_validator_that_changes_its_own_output_is_refused_per_call() -> None:
    """Approved 1250 (cents); validating 1250 again gives 125000. The tool receives what
    the approved payload validates to, so such a call is refused before anything runs."""
    sent: list[int] = []

    @irreversible
    def pay_euros(amount: Cents) -> None:
        sent.append(amount)

    spec = Toolbox.build(pay_euros).get("pay_euros")
    with pytest.raises(ToolInputError, match=r"do not survive their own JSON form.*'amount'"):
        spec.validate({"amount": "12.50"})
    with pytest.raises(PayloadMismatchError):
        asyncio.run(spec.invoke(Payload.of("pay_euros", {"amount": 1250}), ctx()))
    assert sent == []


TICKS = itertools.count()
Stamped = Annotated[str, AfterValidator(lambda v: f"{v}-{next(TICKS)}")]
"""A validator whose output changes at every call, like one reading a clock."""


def test_validation_reading_a_clock_is_refused_per_call() -> None:
    @tool
    def stamp(ref: Stamped) -> str:
        return ref

    spec = Toolbox.build(stamp).get("stamp")
    with pytest.raises(ToolInputError, match="validate differently each time"):
        spec.validate({"ref": "a"})


def test_a_payload_the_tool_does_not_validate_back_is_not_run() -> None:
    """invoke takes the canonical payload only: an altered or raw one is refused."""
    recorder = Recorder()
    spec = Toolbox.build(recorder).get("pay")
    raw = {"amount": "1.50", "currency": "EUR", "when": "2026-01-01", "ref": str(uuid.uuid4()),
           "to": {"street": "x", "zip": "12345"}, "tags": ["a"]}  # fmt: skip
    approved = spec.validate(raw)
    assert approved.args["tags"] == ["A"]
    altered = Payload.of("pay", {**approved.args, "tags": ["a"]})  # not a dump
    with pytest.raises(PayloadMismatchError, match="does not validate back to itself"):
        asyncio.run(spec.invoke(altered, ctx()))
    with pytest.raises(ToolInputError, match="amount"):
        asyncio.run(spec.invoke(Payload.of("pay", {**approved.args, "amount": "lots"}), ctx()))
    assert recorder.received == []


class Target(BaseModel):
    iban: str
    amount: int
    real_iban: str | None = Field(default=None, exclude=True)


def test_the_hidden_field_attack_is_refused_at_build() -> None:
    @irreversible
    def wire(to: Target) -> None: ...

    with pytest.raises(ParameterRoundTripError) as info:
        Toolbox.build(wire)
    assert info.value.tool == "wire"
    assert "to.real_iban is left out of the JSON form" in str(info.value)
    assert "remove exclude=True" in str(info.value)


def test_invoke_gives_the_tool_the_payload_even_past_the_build_check() -> None:
    """The second line of defence: a spec made without the toolbox's check still gives
    the tool only what the approved payload says, never the attacker's hidden IBAN."""
    got: list[Target] = []

    def wire(to: Target) -> None:
        got.append(to)

    wire = irreversible(wire)
    mark = tool_mark(wire)
    assert mark is not None
    spec = _tool_spec("wire", mark, wire, None)  # no Toolbox(...): no round-trip check
    raw = {"to": {"iban": "FR76CUSTOMER", "amount": 900, "real_iban": "XX00ATTACKER"}}
    approved = spec.validate(raw)
    assert approved.args == {"to": {"iban": "FR76CUSTOMER", "amount": 900}}
    asyncio.run(spec.invoke(approved, ctx()))
    assert got[0].real_iban is None and got[0].iban == "FR76CUSTOMER"


def test_a_whole_float_beyond_2_53_in_an_int_or_float_union_is_refused_per_call() -> None:
    """1e20 is written "100000000000000000000" in canonical JSON, which `int | float`
    reads back as an int with no exact JSON form: refused, never silently changed."""

    @tool
    def scale(factor: int | float) -> float:
        return factor

    spec = Toolbox.build(scale).get("scale")
    assert spec.validate({"factor": 2.5}).args == {"factor": 2.5}
    with pytest.raises(ToolInputError, match="safe integer"):
        spec.validate({"factor": 1e20})
