"""One validation, one payload: what is approved, hashed and journaled is what the tool
receives. A converting validator runs once on the call's own arguments (never on its own
output), non-deterministic validation is refused, and secrets are refused at build."""

from __future__ import annotations

import asyncio
import uuid
from datetime import date
from decimal import Decimal
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, BeforeValidator, Field, SecretStr, TypeAdapter

from sagacity.canonical import canonical_bytes
from sagacity.errors import ToolboxError, ToolInputError
from sagacity.toolbox import Toolbox
from sagacity.tools import ToolContext, irreversible, tool


def _cents(value: Any) -> Any:
    """Euros ("12.50", 12.5) to integer cents. Applied to its own output (1250) it would
    give 125000: exactly what re-validating the payload used to do."""
    return round(float(value) * 100)


Cents = Annotated[int, BeforeValidator(_cents)]


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
        amount: Cents,
        currency: Literal["EUR", "USD"],
        when: date,
        ratio: Decimal,
        ref: uuid.UUID,
        to: Address,
        tags: list[str],
        note: str | None = None,
    ) -> str:
        self.received.append(
            {"amount": amount, "currency": currency, "when": when, "ratio": ratio,
             "ref": ref, "to": to, "tags": tags, "note": note}
        )  # fmt: skip
        return "ok"


RECEIVED = TypeAdapter(dict[str, Any])


@settings(max_examples=60, deadline=None)
@given(
    euros=st.decimals(min_value=0, max_value=10_000, places=2).map(str),
    currency=st.sampled_from(["EUR", "USD"]),
    when=st.dates(),
    ratio=st.decimals(min_value=-1000, max_value=1000, places=3, allow_nan=False),
    ref=st.uuids(),
    street=st.text(max_size=30),
    zip_code=st.from_regex(r"^[0-9]{5}$", fullmatch=True),
    tags=st.lists(st.text(max_size=10), max_size=5),
    note=st.none() | st.text(max_size=20),
)
def test_the_tool_receives_exactly_the_approved_payload(
    euros: str, currency: str, when: date, ratio: Decimal, ref: uuid.UUID, street: str,
    zip_code: str, tags: list[str], note: str | None,
) -> None:  # fmt: skip
    recorder = Recorder()
    spec = Toolbox.build(recorder).get("pay")
    raw = {
        "amount": euros, "currency": currency, "when": when.isoformat(), "ratio": str(ratio),
        "ref": str(ref), "to": {"street": street, "zip": zip_code}, "tags": tags, "note": note,
    }  # fmt: skip
    approved = spec.validate(raw)  # what the approver sees and the hash covers
    asyncio.run(spec.invoke(raw, ctx(), payload=approved))
    [got] = recorder.received
    got["to"] = got["to"].model_dump()
    assert canonical_bytes(RECEIVED.dump_python(got, mode="json")) == canonical_bytes(approved)
    assert got["amount"] == approved["amount"] == round(float(euros) * 100)


def test_a_converting_validator_runs_once() -> None:
    recorder = Recorder()
    spec = Toolbox.build(recorder).get("pay")
    raw = {"amount": "12.50", "currency": "EUR", "when": "2026-01-01", "ratio": "1",
           "ref": str(uuid.uuid4()), "to": {"street": "x", "zip": "12345"}, "tags": []}  # fmt: skip
    payload = spec.validate(raw)
    asyncio.run(spec.invoke(raw, ctx(), payload=payload))
    assert payload["amount"] == 1250 and recorder.received[0]["amount"] == 1250  # not 125000


def test_generated_defaults_are_refused_per_call() -> None:
    @tool
    def stamp(ref: Annotated[str, Field(default_factory=lambda: uuid.uuid4().hex)]) -> str:
        return ref

    spec = Toolbox.build(stamp).get("stamp")
    with pytest.raises(ToolInputError, match="validate differently each time"):
        spec.validate({})
    assert spec.validate({"ref": "given"}) == {"ref": "given"}


def test_a_payload_that_no_longer_matches_is_not_run() -> None:
    recorder = Recorder()
    spec = Toolbox.build(recorder).get("pay")
    raw = {"amount": "1", "currency": "EUR", "when": "2026-01-01", "ratio": "1",
           "ref": str(uuid.uuid4()), "to": {"street": "x", "zip": "12345"}, "tags": []}  # fmt: skip
    approved = {**spec.validate(raw), "amount": 1}
    with pytest.raises(ToolInputError, match="approved and journaled payload"):
        asyncio.run(spec.invoke(raw, ctx(), payload=approved))
    assert recorder.received == []


class Login(BaseModel):
    user: str
    password: SecretStr


@pytest.mark.parametrize("annotation", [SecretStr, list[SecretStr], Login, SecretStr | None])
def test_secrets_are_refused_when_the_toolbox_is_built(annotation: Any) -> None:
    def use(secret: Any) -> None:
        pass

    use.__annotations__ = {"secret": annotation, "return": None}
    with pytest.raises(ToolboxError, match="pydantic secret"):
        Toolbox.build(tool(use))
