"""The mapping of MCP tools to saga tools, judged against a server's listing with no
server at all: every branch of check_mapping, I/O-free."""

from __future__ import annotations

from typing import Any

import pytest
from mcp_types import Tool

from sagacity.approval._policy import ApprovalPolicy
from sagacity.contrib.mcp import McpMappingError, check_mapping, compensated_by, irreversible, plain
from sagacity.contrib.mcp._mapping import python_compensations
from sagacity.tools._decorators import CompensationContext, ToolKind, compensation

BROKEN = {"type": "object", "required": "amount"}
"""Not a valid JSON Schema: `required` is a list."""
OBJECT = {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]}


RESULT = {"type": "object", "properties": {"id": {"type": "string"}}}


def tool(name: str, schema: dict[str, Any] | None = None, **more: Any) -> Tool:
    more.setdefault("output_schema", RESULT)
    return Tool(name=name, input_schema=OBJECT if schema is None else schema, **more)


SHOP = [tool(n) for n in ("reserve", "release", "charge", "refund", "ship", "wire", "lookup")]


def test_each_declaration_gives_its_kind_and_compensation() -> None:
    policy = ApprovalPolicy(quorum=2)
    plan = check_mapping(
        "shop",
        SHOP,
        {
            "reserve": compensated_by("release"),
            "ship": plain,
            "wire": irreversible(policy=policy),
            "charge": irreversible,
        },
    )
    by_name = {t.name: t for t in plan.tools}
    assert [t.name for t in plan.tools] == ["reserve", "ship", "wire", "charge"]
    assert by_name["reserve"].kind is ToolKind.COMPENSABLE
    assert by_name["reserve"].compensation is not None
    assert by_name["reserve"].compensation.tool == SHOP[1]
    assert by_name["ship"].kind is ToolKind.PLAIN and by_name["ship"].compensation is None
    assert by_name["wire"].kind is ToolKind.IRREVERSIBLE and by_name["wire"].policy is policy
    assert by_name["charge"].policy is None
    # release is only an undo; refund and lookup are not mapped: refused by default
    assert plan.left_out == {
        "release": "a compensation, called only to undo a step",
        "refund": "not in the mapping (unmapped='refuse')",
        "lookup": "not in the mapping (unmapped='refuse')",
    }


def test_unmapped_plain_serves_the_rest_as_plain_tools_but_never_an_undo() -> None:
    plan = check_mapping("shop", SHOP, {"reserve": compensated_by("release")}, unmapped="plain")
    assert {t.name: t.kind for t in plan.tools} == {
        "reserve": ToolKind.COMPENSABLE, "charge": ToolKind.PLAIN, "refund": ToolKind.PLAIN,
        "ship": ToolKind.PLAIN, "wire": ToolKind.PLAIN, "lookup": ToolKind.PLAIN,
    }  # fmt: skip
    assert list(plan.left_out) == ["release"]


def test_a_name_the_server_does_not_list_fails_naming_it_and_the_servers_tools() -> None:
    with pytest.raises(McpMappingError) as caught:
        check_mapping("shop", SHOP, {"send_wire": irreversible})
    message = str(caught.value)
    assert "'send_wire', which MCP server 'shop' does not list" in message
    assert "lists: charge, lookup, refund, release, reserve, ship, wire" in message


def test_a_misspelt_compensation_fails_with_a_hint() -> None:
    with pytest.raises(McpMappingError, match=r"'refnud'.*neither a tool.*did you mean 'refund'"):
        check_mapping("shop", SHOP, {"charge": compensated_by("refnud")})


def test_the_default_undo_arguments_need_a_forward_tool_with_an_output_schema() -> None:
    listed = [tool("charge", output_schema=None), tool("refund")]
    with pytest.raises(McpMappingError, match=r"'charge' declares no output schema.*args="):
        check_mapping("shop", listed, {"charge": compensated_by("refund")})
    plan = check_mapping(
        "shop", listed, {"charge": compensated_by("refund", args=lambda ctx: ctx.input)}
    )
    assert plan.tools[0].compensation is not None


def test_a_tool_cannot_undo_itself() -> None:
    with pytest.raises(McpMappingError, match="cannot undo itself"):
        check_mapping("shop", SHOP, {"charge": compensated_by("charge")})


class Refunds:
    @compensation
    def refund(self, ctx: CompensationContext) -> None:
        """Clashes with the server's refund tool."""

    @compensation("void_charge")
    def void(self, ctx: CompensationContext) -> None:
        """A Python undo."""

    @compensation("needs_two")
    def two(self, ctx: CompensationContext, other: int) -> None:
        """A wrong signature."""


def test_a_python_compensation_resolves_by_its_name() -> None:
    found = python_compensations([Refunds()])
    plan = check_mapping(
        "shop", SHOP, {"charge": compensated_by("void_charge")}, compensations=found
    )
    undo = plan.tools[0].compensation
    assert undo is not None and undo.tool is None and undo.fn == found["void_charge"]


def test_a_python_compensation_with_the_name_of_a_server_tool_is_ambiguous() -> None:
    found = python_compensations([Refunds()])
    with pytest.raises(McpMappingError, match="both a tool of MCP server 'shop' and a Python"):
        check_mapping("shop", SHOP, {"charge": compensated_by("refund")}, compensations=found)


def test_a_python_compensation_must_take_one_context_and_no_args_builder() -> None:
    found = python_compensations([Refunds()])
    with pytest.raises(McpMappingError, match="wrong signature"):
        check_mapping("shop", SHOP, {"charge": compensated_by("needs_two")}, compensations=found)
    with pytest.raises(McpMappingError, match="args= is only for a compensation that is an MCP"):
        check_mapping(
            "shop",
            SHOP,
            {"charge": compensated_by("void_charge", args=lambda ctx: {})},
            compensations=found,
        )


@pytest.mark.parametrize(
    ("declared", "needle"),
    [
        ("irreversible", "map it to plain, irreversible"),
        (compensated_by, "compensated_by needs the compensation's name"),
        (None, "map it to plain"),
    ],
)
def test_a_value_that_is_no_declaration_is_refused(declared: object, needle: str) -> None:
    with pytest.raises(McpMappingError, match=needle):
        check_mapping("shop", SHOP, {"wire": declared})


def test_declaration_helpers_refuse_bad_arguments() -> None:
    with pytest.raises(McpMappingError, match="needs the name"):
        compensated_by("")
    with pytest.raises(McpMappingError, match="takes a function"):
        compensated_by("refund", args={"charge": "x"})  # type: ignore[arg-type]
    with pytest.raises(McpMappingError, match="takes an ApprovalPolicy"):
        irreversible(policy="finance")  # type: ignore[arg-type]
    with pytest.raises(McpMappingError, match="is a dict of tool name"):
        check_mapping("shop", SHOP, [("wire", irreversible)])  # type: ignore[arg-type]
    with pytest.raises(McpMappingError, match="'refuse' or 'plain'"):
        check_mapping("shop", SHOP, {}, unmapped="all")  # type: ignore[arg-type]


def test_a_mapped_tool_sagacity_cannot_serve_fails_at_start() -> None:
    dotted = [tool("shop.charge"), tool("scalar", {"type": "string"}), tool("broken", BROKEN)]
    with pytest.raises(McpMappingError, match="name must be 1-64 letters"):
        check_mapping("shop", dotted, {"shop.charge": plain})
    with pytest.raises(McpMappingError, match="has type 'string'; MCP arguments are a JSON object"):
        check_mapping("shop", dotted, {"scalar": plain})
    with pytest.raises(McpMappingError, match="is not a valid JSON Schema"):
        check_mapping("shop", dotted, {"broken": plain})


def test_an_unmapped_tool_sagacity_cannot_serve_is_left_out_not_fatal() -> None:
    listed = [tool("charge"), tool("shop.export"), tool("broken", BROKEN)]
    plan = check_mapping("shop", listed, {}, unmapped="plain")
    assert [t.name for t in plan.tools] == ["charge"]
    assert plan.left_out["shop.export"].startswith("cannot be served: ")
    assert "not a valid JSON Schema" in plan.left_out["broken"]


def test_a_server_listing_a_name_twice_is_refused() -> None:
    with pytest.raises(McpMappingError, match="lists two tools named 'charge'"):
        check_mapping("shop", [tool("charge"), tool("charge")], {})


def test_compensations_must_be_instances_with_marked_functions() -> None:
    with pytest.raises(McpMappingError, match="pass an instance"):
        python_compensations([Refunds])
    with pytest.raises(McpMappingError, match="declares no function marked @compensation"):
        python_compensations([object()])
