"""Toolbox: build-time checks, JSON schemas, validation into the canonical payload, and
invocation with context injection."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import types
from datetime import UTC, date, datetime
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field, ValidationError

from sagacity._errors import PayloadMismatchError, ToolboxError, ToolInputError, UnknownToolError
from sagacity.approval._models import approval_hash
from sagacity.journal._canonical import canonical_bytes
from sagacity.tools import (
    CompensationContext,
    CompensationSpec,
    Payload,
    Toolbox,
    ToolContext,
    ToolKind,
    ToolResultError,
    ToolSpec,
    compensable,
    compensation,
    irreversible,
    tool,
)


class Address(BaseModel):
    city: str
    zip: str


@dataclasses.dataclass
class Receipt:
    charge_id: str
    at: datetime


class Shop:
    """Tools as methods of an object holding their dependencies."""

    def __init__(self) -> None:
        self.threads: list[int] = []
        self.released: list[CompensationContext] = []

    @compensable("release_inventory")
    def reserve(self, sku: str, qty: int = 1) -> dict[str, Any]:
        """Reserve stock for an order.

        Longer explanation that the model does not need.
        """
        self.threads.append(threading.get_ident())
        return {"sku": sku, "qty": qty}

    @compensation
    def release_inventory(self, ctx: CompensationContext) -> str:
        self.released.append(ctx)
        return f"released {ctx.input['sku']}"

    @irreversible
    async def wire(self, amount: int, iban: str, context: ToolContext) -> Receipt:
        """Send a wire transfer."""
        return Receipt(charge_id=context.idempotency_key, at=datetime(2026, 1, 2, tzinfo=UTC))

    @tool(name="ship_to", description="Ship to an address.")
    def ship(self, address: Address, on: date | None = None) -> Address:
        return address


def build_shop() -> tuple[Shop, Toolbox]:
    shop = Shop()
    return shop, Toolbox.build(shop)


def ctx(tool: str = "t", step: int = 1) -> ToolContext:
    return ToolContext(saga_id="saga-1", step=step, attempt=1, tool=tool)


# --- building -------------------------------------------------------------------------


def test_build_collects_bound_methods_and_resolves_compensations() -> None:
    _, box = build_shop()
    assert box.names() == ["reserve", "ship_to", "wire"]
    reserve = box.get("reserve")
    assert reserve.kind is ToolKind.COMPENSABLE
    assert isinstance(reserve.compensation, CompensationSpec)
    assert reserve.compensation.name == "release_inventory"
    assert box.get("wire").requires_approval
    assert box.get("ship_to").compensation is None


def _payments(undo: str) -> tuple[Any, Any]:
    """A tool charge_card naming the compensation `undo`, and a compensation refund_card."""

    @compensable(undo)
    def charge_card(amount: int) -> str:
        return "ch_1"

    @compensation
    def refund_card(ctx: CompensationContext) -> None: ...

    return charge_card, refund_card


def test_build_from_a_module_and_from_functions() -> None:
    charge_card, refund_card = _payments("refund_card")
    module = types.ModuleType("payments")
    module.charge_card = charge_card  # type: ignore[attr-defined]
    module.refund_card = refund_card  # type: ignore[attr-defined]
    module.helper = len  # type: ignore[attr-defined]
    assert Toolbox.build(module).names() == ["charge_card"]
    # Functions directly, and the same function reachable twice, count once.
    assert Toolbox.build(charge_card, refund_card, module).names() == ["charge_card"]


def test_compensation_typo_fails_at_build_naming_both_names() -> None:
    charge_card, refund_card = _payments("refund_crad")
    with pytest.raises(ToolboxError) as info:
        Toolbox.build(charge_card, refund_card)
    assert str(info.value) == (
        "tool 'charge_card' names compensation 'refund_crad', which is not defined; "
        "did you mean 'refund_card'?"
    )


def test_unresolved_compensation_without_close_match_lists_the_defined_ones() -> None:
    charge_card, refund_card = _payments("undo")
    with pytest.raises(ToolboxError, match="defined compensations: 'refund_card'"):
        Toolbox.build(charge_card, refund_card)


def test_compensation_that_exists_but_is_not_marked_says_so() -> None:
    class Payments:
        @compensable("refund_card")
        def charge_card(self, amount: int) -> str:
            return "ch_1"

        def refund_card(self, ctx: CompensationContext) -> None: ...

    with pytest.raises(ToolboxError, match="'refund_card' exists but is not marked"):
        Toolbox.build(Payments())


def _undo_none() -> None: ...
def _undo_two(ctx: CompensationContext, extra: int) -> None: ...
def _undo_kwonly(ctx: CompensationContext, *, reason: str) -> None: ...
def _undo_typed_wrong(ctx: ToolContext) -> None: ...


@pytest.mark.parametrize(
    ("fn", "problem"),
    [
        (_undo_none, "takes 0 required positional parameters (none)"),
        (_undo_two, "takes 2 required positional parameters (ctx, extra)"),
        (_undo_kwonly, "required keyword-only parameter(s) reason"),
        (_undo_typed_wrong, "annotates its parameter 'ctx' as ToolContext"),
    ],
)
def test_compensation_with_wrong_signature_fails_at_build(fn: Any, problem: str) -> None:
    @compensable("undo")
    def charge_card(amount: int) -> str:
        return "ch_1"

    with pytest.raises(ToolboxError) as info:
        Toolbox.build(charge_card, compensation("undo")(fn))
    message = str(info.value)
    assert "tool 'charge_card' names compensation 'undo'" in message
    assert "wrong signature" in message
    assert problem in message


def test_compensation_may_have_optional_extras_and_be_a_bound_method() -> None:
    class Undo:
        @compensation("undo")
        def run(self, ctx: CompensationContext, verbose: bool = False) -> None: ...

    @compensable("undo")
    def charge_card(amount: int) -> str:
        return "ch_1"

    assert Toolbox.build(charge_card, Undo()).get("charge_card").compensation is not None


def test_duplicate_tool_names_fail() -> None:
    @tool(name="lookup")
    def find(sku: str) -> None: ...

    @tool
    def lookup(sku: str) -> None: ...

    with pytest.raises(ToolboxError, match="two tools are named 'lookup'"):
        Toolbox.build(find, lookup)
    with pytest.raises(ToolboxError, match=r"two (tools|compensations) are named"):
        Toolbox.build(Shop(), Shop())


def test_duplicate_compensation_names_fail() -> None:
    @compensation("undo")
    def a(ctx: CompensationContext) -> None: ...

    @compensation("undo")
    def b(ctx: CompensationContext) -> None: ...

    with pytest.raises(ToolboxError, match="two compensations are named 'undo'"):
        Toolbox.build(a, b)


def test_parameter_without_type_hint_fails_naming_tool_and_parameter() -> None:
    @tool
    def lookup(sku, qty: int) -> None:  # type: ignore[no-untyped-def]
        ...

    with pytest.raises(ToolboxError, match=r"tool 'lookup'.*parameter 'sku' has no type hint"):
        Toolbox.build(lookup)


@pytest.mark.parametrize("star", ["args", "kwargs"])
def test_star_parameters_fail(star: str) -> None:
    def with_args(*args: int) -> None: ...
    def with_kwargs(**kwargs: int) -> None: ...

    fn = tool(with_args if star == "args" else with_kwargs)
    prefix = "\\*" if star == "args" else "\\*\\*"
    with pytest.raises(ToolboxError, match=f"takes {prefix}{star}"):
        Toolbox.build(fn)


def test_name_the_model_cannot_call_fails() -> None:
    @tool(name="charge card")
    def charge(amount: int) -> None: ...

    with pytest.raises(ToolboxError, match=r"'charge card'.*letters, digits"):
        Toolbox.build(charge)


def test_parameter_type_without_json_schema_fails_at_build() -> None:
    @tool
    def hook(callback: CompensationContext) -> None: ...

    with pytest.raises(ToolboxError, match=r"tool 'hook'.*JSON schema"):
        Toolbox.build(hook)


def test_a_class_or_an_object_without_tools_is_refused() -> None:
    with pytest.raises(ToolboxError, match=r"class Shop; pass an instance"):
        Toolbox.build(Shop)
    with pytest.raises(ToolboxError, match="declares no tools"):
        Toolbox.build(object())


# --- schemas --------------------------------------------------------------------------


def test_schemas_for_sync_async_and_methods_in_chat_completions_format() -> None:
    _, box = build_shop()
    by_name = {s["function"]["name"]: s for s in box.schemas()}
    assert by_name["reserve"] == {
        "type": "function",
        "function": {
            "name": "reserve",
            "description": "Reserve stock for an order.",
            "parameters": {
                "type": "object",
                "properties": {
                    "sku": {"title": "Sku", "type": "string"},
                    "qty": {"title": "Qty", "type": "integer", "default": 1},
                },
                "required": ["sku"],
                "additionalProperties": False,
            },
        },
    }
    wire = by_name["wire"]["function"]
    assert wire["description"] == "Send a wire transfer."
    assert set(wire["parameters"]["properties"]) == {"amount", "iban"}  # no context
    assert wire["parameters"]["required"] == ["amount", "iban"]
    ship = by_name["ship_to"]["function"]
    assert ship["description"] == "Ship to an address."
    assert ship["parameters"]["properties"]["address"] == {"$ref": "#/$defs/Address"}
    assert "Address" in ship["parameters"]["$defs"]


def test_schema_of_plain_sync_and_async_functions() -> None:
    @tool
    def ping() -> str:
        return "pong"

    @tool
    async def fetch(url: Annotated[str, Field(description="What to fetch")]) -> str:
        return url

    box = Toolbox.build(ping, fetch)
    assert box.get("ping").parameters == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }
    assert box.get("fetch").parameters["properties"]["url"]["description"] == "What to fetch"
    assert box.get("fetch").is_async and not box.get("ping").is_async


def test_schemas_are_copies() -> None:
    _, box = build_shop()
    box.schemas()[0]["function"]["parameters"]["properties"].clear()
    assert box.schemas()[0]["function"]["parameters"]["properties"]


def test_context_parameter_any_name_optional_is_excluded_and_injected() -> None:
    @tool
    def audit(note: str, runtime: ToolContext | None = None) -> str:
        assert runtime is not None
        return f"{note}@{runtime.idempotency_key}"

    spec = Toolbox.build(audit).get("audit")
    assert spec.takes_context
    assert list(spec.parameters["properties"]) == ["note"]
    assert asyncio.run(spec.invoke(spec.validate({"note": "hi"}), ctx(step=4))) == "hi@saga-1:4"
    with pytest.raises(ToolInputError, match="runtime: Extra inputs are not permitted"):
        spec.validate({"note": "hi", "runtime": {}})


# --- validation -----------------------------------------------------------------------


def test_validate_returns_the_canonical_json_payload() -> None:
    _, box = build_shop()
    assert box.get("reserve").validate({"sku": "A1", "qty": "100"}).args == {
        "sku": "A1",
        "qty": 100,
    }
    assert box.get("reserve").validate({"sku": "A1"}).args == {"sku": "A1", "qty": 1}
    payload = box.get("ship_to").validate(
        {"address": {"city": "Lyon", "zip": "69001"}, "on": "2026-03-01"}
    )
    assert payload.args == {"address": {"city": "Lyon", "zip": "69001"}, "on": "2026-03-01"}
    assert payload.canonical == canonical_bytes(payload.args)
    assert payload.sha256 == approval_hash("ship_to", payload.args)
    assert box.get("ship_to").validate(payload.args) == payload  # a fixed point


def test_validation_errors_name_the_tool_and_every_bad_field() -> None:
    _, box = build_shop()
    with pytest.raises(ToolInputError) as info:
        box.get("wire").validate({"amount": "lots", "extra": 1})
    message = str(info.value)
    assert not isinstance(info.value, ValidationError)
    assert message.startswith("invalid arguments for tool 'wire': ")
    assert "amount: Input should be a valid integer" in message
    assert "iban: Field required" in message
    assert "extra: Extra inputs are not permitted" in message


def test_nested_field_errors_carry_their_path() -> None:
    _, box = build_shop()
    with pytest.raises(ToolInputError, match=r"address\.zip: Field required"):
        box.get("ship_to").validate({"address": {"city": "Lyon"}})


@pytest.mark.parametrize("args", [[1, 2], "sku=A1", None, 5])
def test_arguments_that_are_not_an_object_are_refused(args: object) -> None:
    _, box = build_shop()
    with pytest.raises(ToolInputError, match="takes a JSON object of named arguments"):
        box.get("reserve").validate(args)


def test_values_with_no_exact_json_form_are_refused() -> None:
    @tool
    def measure(value: float, count: int) -> None: ...

    spec = Toolbox.build(measure).get("measure")
    with pytest.raises(ToolInputError, match="value"):
        spec.validate({"value": float("nan"), "count": 1})
    with pytest.raises(ToolInputError, match="integer"):
        spec.validate({"value": 1.0, "count": 2**60})


def test_reserved_parameter_names_work() -> None:
    @tool
    def configure(model_config: str, schema: int) -> str:
        return f"{model_config}/{schema}"

    spec = Toolbox.build(configure).get("configure")
    payload = spec.validate({"model_config": "a", "schema": 2})
    assert payload.args == {"model_config": "a", "schema": 2}
    assert asyncio.run(spec.invoke(payload, ctx())) == "a/2"


# --- invocation -----------------------------------------------------------------------


async def test_sync_tool_runs_in_a_thread_with_validated_values() -> None:
    shop, box = build_shop()
    reserve = box.get("reserve")
    result = await reserve.invoke(reserve.validate({"sku": "A1", "qty": "3"}), ctx("reserve"))
    assert result == {"sku": "A1", "qty": 3}
    assert shop.threads and shop.threads[0] != threading.get_ident()


async def test_async_tool_is_awaited_with_the_context_and_result_made_json() -> None:
    _, box = build_shop()
    result = await box.get("wire").invoke(
        Payload.of("wire", {"amount": 5, "iban": "FR76"}), ctx("wire", step=7)
    )
    assert result == {"charge_id": "saga-1:7", "at": "2026-01-02T00:00:00Z"}


async def test_tool_receives_python_values_and_pydantic_results_become_json() -> None:
    _, box = build_shop()
    ship_to = box.get("ship_to")
    payload = ship_to.validate({"address": {"city": "Lyon", "zip": "69001"}})
    result = await ship_to.invoke(payload, ctx("ship_to"))
    assert result == {"city": "Lyon", "zip": "69001"}


async def test_heartbeats_from_a_sync_tool_run_on_the_event_loop() -> None:
    """Temporal's heartbeat schedules a task, which fails outside the loop's thread."""
    loop_thread = threading.get_ident()
    beats: list[tuple[int, tuple[object, ...]]] = []

    def heartbeat(*details: object) -> None:
        asyncio.get_running_loop()  # raises RuntimeError in a worker thread
        beats.append((threading.get_ident(), details))

    @compensable("undo")
    def upload(name: str, context: ToolContext) -> str:
        assert threading.get_ident() != loop_thread
        context.heartbeat("half", 50)
        return name

    @compensation("undo")
    def delete(ctx: CompensationContext) -> None:
        ctx.heartbeat("undoing")

    spec = Toolbox.build(upload, delete).get("upload")
    runtime = ToolContext("s", 1, 1, "upload", heartbeat=heartbeat)
    assert await spec.invoke(Payload.of("upload", {"name": "a"}), runtime) == "a"
    assert spec.compensation is not None
    await spec.compensation.invoke(
        CompensationContext("s", 1, "upload", {}, "a", heartbeat=heartbeat)
    )
    assert beats == [(loop_thread, ("half", 50)), (loop_thread, ("undoing",))]


async def test_positional_only_parameters_are_passed_positionally() -> None:
    @tool
    def add(a: int, b: int, /, scale: int = 1) -> int:
        return (a + b) * scale

    spec = Toolbox.build(add).get("add")
    assert await spec.invoke(spec.validate({"a": 1, "b": "2", "scale": 10}), ctx()) == 30


async def test_invoke_validates_the_payload_and_never_calls_the_tool_with_bad_args() -> None:
    shop, box = build_shop()
    with pytest.raises(ToolInputError, match="qty"):
        await box.get("reserve").invoke(Payload.of("reserve", {"sku": "A1", "qty": "x"}), ctx())
    assert shop.threads == []


async def test_invoke_takes_only_a_canonical_payload() -> None:
    """Raw arguments ("3" for an int) are not a payload: their dump differs, so they are
    not what an approver saw, and the tool is not called."""
    shop, box = build_shop()
    with pytest.raises(PayloadMismatchError, match="does not validate back to itself"):
        await box.get("reserve").invoke(Payload.of("reserve", {"sku": "A1", "qty": "3"}), ctx())
    assert shop.threads == []


async def test_invoke_refuses_the_payload_of_another_tool() -> None:
    """A payload names its tool (the hash covers the name): one approved for `wire`
    never runs `reserve`, even with arguments `reserve` would take."""
    shop, box = build_shop()
    other = Payload.of("wire", {"sku": "A1", "qty": 3})
    with pytest.raises(PayloadMismatchError, match="payload of tool 'wire'"):
        await box.get("reserve").invoke(other, ctx())
    assert shop.threads == []


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (object(), "returned a object, which cannot be converted to JSON"),
        (float("inf"), "inf is not representable"),
    ],
)
async def test_unserializable_result_raises_tool_result_error(value: object, match: str) -> None:
    @tool
    def broken() -> object:
        return value

    with pytest.raises(ToolResultError, match=match) as info:
        await Toolbox.build(broken).get("broken").invoke(Payload.of("broken", {}), ctx())
    assert "'broken'" in str(info.value)


async def test_compensations_run_sync_in_a_thread_and_async_awaited() -> None:
    shop, box = build_shop()
    spec = box.get("reserve").compensation
    assert spec is not None
    cctx = CompensationContext("saga-1", 2, "reserve", {"sku": "A1", "qty": 1}, {"sku": "A1"})
    assert await spec.invoke(cctx) is None  # what an undo returns is not its outcome
    assert shop.released == [cctx]

    seen: list[str] = []

    @compensable("undo")
    async def book(room: str) -> str:
        return room

    @compensation("undo")
    async def cancel(ctx: CompensationContext) -> None:
        seen.append(ctx.idempotency_key)

    undo = Toolbox.build(book, cancel).get("book").compensation
    assert undo is not None
    assert await undo.invoke(CompensationContext("s", 3, "book", {}, None)) is None
    assert seen == ["s:3"]


async def test_a_compensation_returning_something_unserializable_still_succeeds() -> None:
    undone: list[int] = []

    @compensable("undo")
    def book(room: str) -> str:
        return room

    @compensation("undo")
    def cancel(ctx: CompensationContext) -> object:
        undone.append(ctx.step)
        return object()

    undo = Toolbox.build(book, cancel).get("book").compensation
    assert undo is not None
    await undo.invoke(CompensationContext("s", 4, "book", {}, None))
    assert undone == [4]


# --- lookup, restriction, summaries ---------------------------------------------------


def test_unknown_tool_names_the_tool_and_lists_the_known_ones() -> None:
    _, box = build_shop()
    with pytest.raises(UnknownToolError) as info:
        box.get("reserv")
    assert str(info.value) == (
        "unknown tool 'reserv'; did you mean 'reserve'?; known tools: reserve, ship_to, wire"
    )


def test_restrict_keeps_only_allowed_tools_and_refuses_unknown_names() -> None:
    _, box = build_shop()
    small = box.restrict(["wire", "reserve"])
    assert small.names() == ["reserve", "wire"]
    assert "ship_to" not in small and len(small) == 2
    assert [s["function"]["name"] for s in small.schemas()] == ["reserve", "wire"]
    with pytest.raises(UnknownToolError, match=r"'refund'.*known tools: reserve, ship_to, wire"):
        box.restrict(["wire", "refund"])
    with pytest.raises(TypeError):
        box.restrict("wire")


def test_summary_renders_arguments_and_truncates_to_the_limit() -> None:
    _, box = build_shop()
    spec: ToolSpec = box.get("wire")
    assert spec.summary({"amount": 100, "iban": "EUR"}) == "wire(amount=100, iban='EUR')"
    long = spec.summary({"amount": 100, "iban": "X" * 500}, limit=40)
    assert len(long) == 40
    assert long.endswith("…")
    assert long.startswith("wire(amount=100, iban='XXX")
    assert spec.summary({"amount": 1}, limit=15) == "wire(amount=1)"
    assert spec.summary([1], limit=80) == "wire([1])"
    with pytest.raises(ValueError):
        spec.summary({}, limit=1)


@pytest.mark.parametrize(
    "hint", [set[str], frozenset[int], "list[set[str]]", "dict[str, set[int]] | None"]
)
def test_set_parameters_are_refused_at_build_time(hint: object) -> None:
    """A set's JSON order follows the hash seed: the approved payload could differ from
    the one that runs on another worker, so sets are refused when the toolbox is built."""
    namespace: dict[str, object] = {}
    exec(
        "from sagacity.tools import tool\n"
        f"@tool\ndef tag(labels: {hint if isinstance(hint, str) else 'HINT'}) -> None: ...\n",
        {"HINT": hint, "set": set, "frozenset": frozenset},
        namespace,
    )
    with pytest.raises(ToolboxError, match=r"labels\S* is a (frozen)?set"):
        Toolbox.build(namespace["tag"])
