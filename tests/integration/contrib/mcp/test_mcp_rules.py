"""Approval rules on MCP tools, whose parameters come from the server's JSON schema: a
string-typed amount is compared as money, and a rule the schema makes useless (a name the
schema lacks, a boolean, an object, an array, no type) fails when the toolset is checked,
naming the server, the tool, the rule and the parameter. The last test opens a real
stdio server and shows the toolset refuses to start and leaves no process behind."""

from __future__ import annotations

from typing import Any

import pytest
from mcp_types import Tool

from sagacity._errors import ApprovalRuleError, ToolboxError
from sagacity.approval._policy import ApprovalPolicy, ArgRule
from sagacity.contrib.mcp import McpConnection, McpToolset, check_mapping, irreversible, toolbox_of
from sagacity.tools._toolbox import ToolSpec
from tests.integration.contrib.mcp.conftest import SHOP_MAPPING, McpShop, assert_stopped

ABOVE_10K = ApprovalPolicy(rules=(ArgRule.above("amount", 10_000, quorum=2),))


def wire_schema(amount: object, **defs: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"iban": {"type": "string"}, "amount": amount},
        "required": ["iban", "amount"],
    }
    if defs:
        schema["$defs"] = defs
    return schema


def wire(amount: object, policy: ApprovalPolicy = ABOVE_10K, **defs: Any) -> ToolSpec:
    """The `wire` tool of a server whose schema types its amount as `amount`, mapped
    irreversible with `policy` and made a toolbox as McpToolset makes it (no session)."""
    listed = [Tool(name="wire", input_schema=wire_schema(amount, **defs))]
    plan = check_mapping("bank", listed, {"wire": irreversible(policy=policy)})
    return toolbox_of(plan, McpConnection("unused", name="bank")).get("wire")


def quorum_for(spec: ToolSpec, amount: object) -> int:
    assert spec.policy is not None
    return spec.policy.requirement(spec.validate({"iban": "DE00", "amount": amount}).args).quorum


def test_a_string_typed_amount_is_compared_as_money() -> None:
    spec = wire({"type": "string"})
    assert [quorum_for(spec, a) for a in ("9999.99", "10000", "10000.01", "50000")] == [1, 1, 2, 2]
    assert quorum_for(spec, "10000.000000000000000001") == 2  # no float on the way
    assert quorum_for(spec, "1e5") == 2 and quorum_for(spec, "NaN") == 2  # read: not a number
    assert spec.policy is not None
    because = spec.policy.requirement(spec.validate({"iban": "x", "amount": "1e5"}).args).because
    assert because == ["amount above 10,000 (amount is not a plain decimal number)"]


def test_number_integer_and_union_typed_amounts_are_compared_too() -> None:
    number = wire({"type": "number"})
    assert [quorum_for(number, a) for a in (9_999.5, 10_000.5)] == [1, 2]
    integer = wire({"type": "integer"})
    assert [quorum_for(integer, a) for a in (10_000, 10_001)] == [1, 2]
    either = wire({"anyOf": [{"type": "number"}, {"type": "string", "pattern": "^[0-9.]+$"}]})
    assert [quorum_for(either, a) for a in (10_001, "10001", "9999")] == [2, 2, 1]
    nullable = wire({"type": ["string", "null"]})
    assert [quorum_for(nullable, a) for a in ("20000", None)] == [2, 2]  # null: rule applies
    by_ref = wire({"$ref": "#/$defs/Money"}, Money={"type": "string"})
    assert quorum_for(by_ref, "20000") == 2
    codes = wire({"enum": ["100", "20000"]})
    assert [quorum_for(codes, a) for a in ("100", "20000")] == [1, 2]


@pytest.mark.parametrize(
    ("amount", "why"),
    [
        ({"type": "boolean"}, "it can be a bool"),
        ({"type": ["integer", "boolean"]}, "it can be a bool"),
        ({"type": "object"}, "it can be an object"),
        ({"type": "array", "items": {"type": "integer"}}, "it can be a list"),
        ({}, "admits any JSON value"),
        (True, "admits any JSON value"),
        ({"description": "the amount"}, "admits any JSON value"),
        ({"anyOf": [{"type": "integer"}, {}]}, "admits any JSON value"),
        ({"$ref": "#/$defs/Money"}, "it can be an object"),
        ({"type": "string", "format": "date-time"}, "never a number"),
        ({"enum": ["low", "high"]}, "never a number"),
        ({"type": "null"}, "never a number"),
    ],
)
def test_a_rule_the_servers_schema_cannot_compare_fails_at_check(amount: object, why: str) -> None:
    with pytest.raises(ApprovalRuleError) as caught:
        wire(amount, Money={"type": "object"})
    message = str(caught.value)
    assert message.startswith(
        "tool 'wire' on MCP server 'bank': approval rule 'amount above 10,000' reads 'amount', "
        "which it cannot compare: "
    )
    assert why in message and "Type the amount as Decimal" in message


def test_a_rule_on_a_parameter_the_servers_schema_lacks_fails_at_check() -> None:
    typo = ApprovalPolicy(rules=(ArgRule.above("amonut", 10_000, quorum=2),))
    with pytest.raises(ApprovalRuleError) as caught:
        wire({"type": "string"}, typo)
    assert str(caught.value) == (
        "tool 'wire' on MCP server 'bank': approval rule 'amonut above 10,000' reads "
        "'amonut', which the tool does not have (its parameters: 'iban', 'amount'); did you "
        "mean 'amount'? Name one of its parameters in ArgRule.above(...)"
    )


async def test_a_toolset_whose_rule_cannot_apply_does_not_start_and_stops_its_server(
    mcp_shop: McpShop,
) -> None:
    """The real shop server types send_wire_transfer(iban, amount: int, currency)."""
    typo = ApprovalPolicy(rules=(ArgRule.above("amount_eur", 10_000, quorum=2),))
    mapping = {**SHOP_MAPPING, "send_wire_transfer": irreversible(policy=typo)}
    with pytest.raises(ToolboxError) as caught:
        async with McpToolset(mcp_shop.server, tools=mapping):
            pytest.fail("the toolset opened with a rule that could never apply")
    assert isinstance(caught.value, ApprovalRuleError)
    assert "tool 'send_wire_transfer' on MCP server 'shop'" in str(caught.value)
    assert "reads 'amount_eur', which the tool does not have" in str(caught.value)
    assert_stopped(mcp_shop.pids())
    assert mcp_shop.calls() == []
    fine = {**SHOP_MAPPING, "send_wire_transfer": irreversible(policy=ABOVE_10K)}
    async with McpToolset(mcp_shop.server, tools=fine) as toolset:
        spec = toolset.toolbox.get("send_wire_transfer")
        assert quorum_for(spec, 50_000) == 2 and quorum_for(spec, 5_000) == 1
