"""Tool declarations: decorators attach metadata and change nothing else; contexts carry
the step's identity and a retry-stable idempotency key."""

from __future__ import annotations

import dataclasses

import pytest

from sagacity._errors import ToolboxError
from sagacity.tools._decorators import (
    CompensationContext,
    CompensationMark,
    ToolContext,
    ToolKind,
    ToolMark,
    compensable,
    compensation,
    compensation_mark,
    idempotency_key,
    irreversible,
    tool,
    tool_mark,
)


def test_tool_kinds_are_stable_strings() -> None:
    assert [k.value for k in ToolKind] == ["PLAIN", "COMPENSABLE", "IRREVERSIBLE"]


def test_bare_tool_returns_the_same_function_with_metadata() -> None:
    def lookup(sku: str) -> str:
        return sku.upper()

    decorated = tool(lookup)
    assert decorated is lookup
    assert lookup("ab") == "AB"
    assert tool_mark(lookup) == ToolMark(ToolKind.PLAIN)
    assert lookup.__sagacity_tool__ == ToolMark(ToolKind.PLAIN)  # type: ignore[attr-defined]


def test_tool_with_name_and_description() -> None:
    @tool(name="find_stock", description="Find stock.")
    def lookup(sku: str) -> str:
        return sku

    assert tool_mark(lookup) == ToolMark(
        ToolKind.PLAIN, name="find_stock", description="Find stock."
    )


def test_irreversible_bare_and_with_arguments() -> None:
    @irreversible
    def wire(amount: int) -> None: ...

    @irreversible(name="send_wire")
    def wire2(amount: int) -> None: ...

    assert tool_mark(wire) == ToolMark(ToolKind.IRREVERSIBLE)
    assert tool_mark(wire2) == ToolMark(ToolKind.IRREVERSIBLE, name="send_wire")


def test_compensable_records_the_compensation_name() -> None:
    @compensable("release_inventory")
    def reserve(sku: str) -> None: ...

    mark = tool_mark(reserve)
    assert mark is not None
    assert mark.kind is ToolKind.COMPENSABLE
    assert mark.compensation == "release_inventory"


def test_compensable_used_bare_is_an_error_naming_the_function() -> None:
    def reserve(sku: str) -> None: ...

    with pytest.raises(ToolboxError, match=r"@compensable\('release_inventory'\).*'reserve'"):
        compensable(reserve)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", 3, None])
def test_compensable_needs_a_non_empty_name(bad: object) -> None:
    with pytest.raises(ToolboxError, match="compensation name"):
        compensable(bad)  # type: ignore[arg-type]


def test_compensation_name_defaults_to_the_function_name() -> None:
    @compensation
    def release_inventory(ctx: CompensationContext) -> None: ...

    @compensation("refund_card")
    def undo_charge(ctx: CompensationContext) -> None: ...

    assert compensation_mark(release_inventory) == CompensationMark("release_inventory")
    assert compensation_mark(undo_charge) == CompensationMark("refund_card")


def test_declaring_a_function_as_two_tools_is_an_error() -> None:
    def reserve(sku: str) -> None: ...

    tool(reserve)
    with pytest.raises(ToolboxError, match="declared twice"):
        irreversible(reserve)


def test_empty_name_override_is_refused() -> None:
    with pytest.raises(ToolboxError, match="non-empty string"):
        tool(name="")


def test_decorated_methods_stay_ordinary_methods() -> None:
    class Shop:
        def __init__(self) -> None:
            self.stock = {"a": 2}

        @compensable("release")
        def reserve(self, sku: str) -> int:
            self.stock[sku] -= 1
            return self.stock[sku]

        @compensation
        def release(self, ctx: CompensationContext) -> None:
            self.stock[ctx.input["sku"]] += 1

        @staticmethod
        @tool
        def ping() -> str:
            return "pong"

    shop = Shop()
    assert shop.reserve("a") == 1
    assert tool_mark(shop.reserve) is not None
    assert compensation_mark(shop.release) == CompensationMark("release")
    assert Shop.ping() == "pong"
    assert tool_mark(Shop.ping) == ToolMark(ToolKind.PLAIN)


def test_tool_context_key_is_stable_across_attempts() -> None:
    first = ToolContext(saga_id="order-7", step=3, attempt=1, tool="charge_card")
    retry = ToolContext(saga_id="order-7", step=3, attempt=4, tool="charge_card")
    assert first.idempotency_key == retry.idempotency_key == "order-7:3"
    assert idempotency_key("order-7", 3) == "order-7:3"
    assert ToolContext("s", 1, 1, "t", idempotency_key="given").idempotency_key == "given"


def test_tool_context_defaults_are_harmless() -> None:
    ctx = ToolContext(saga_id="s", step=1, attempt=1, tool="t")
    ctx.heartbeat("progress", 50)  # a no-op by default: must not raise
    assert ctx.is_fenced() is False
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.step = 2  # type: ignore[misc]


def test_tool_context_carries_runtime_callables() -> None:
    beats: list[tuple[object, ...]] = []
    ctx = ToolContext("s", 1, 1, "t", heartbeat=lambda *d: beats.append(d), is_fenced=lambda: True)
    ctx.heartbeat("half")
    assert beats == [("half",)]
    assert ctx.is_fenced() is True


def test_compensation_context_uses_the_forward_step_key() -> None:
    ctx = CompensationContext(
        saga_id="order-7", step=2, tool="charge_card", input={"amount": 5}, result={"id": "ch_1"}
    )
    assert ctx.idempotency_key == "order-7:2"
    assert ctx.compensation_key == "order-7:2:compensate"
    assert ctx.attempt == 1
    ctx.heartbeat()
