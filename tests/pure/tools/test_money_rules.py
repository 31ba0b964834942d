"""Approval rules never fail open. `ArgRule.above` reads the call's canonical payload the
way the tool's own type makes it (a Decimal is the string "50000" there, an MCP amount
may be a JSON string) and compares money exactly; a value it cannot read makes the rule
apply; a rule that could never apply is refused when the toolbox is built; a rule that
raises refuses the call. The tools here are built with Toolbox.build, so every payload is
the one the approver would see and the hash would cover."""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field
from temporalio.testing import ActivityEnvironment

from sagacity._errors import ApprovalPolicyError, ApprovalRuleError, ToolboxError
from sagacity.activities._models import OutcomeKind, RunToolInput, ToolCall
from sagacity.activities._tool_runner import ToolRunner
from sagacity.approval._policy import ApprovalPolicy, ArgRule
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import MemoryJournalStore
from sagacity.tools._decorators import irreversible
from sagacity.tools._toolbox import Toolbox, ToolSpec

ABOVE_10K = ApprovalPolicy(rules=(ArgRule.above("amount", 10_000, quorum=2),))
NOT_READ = "amount above 10,000 (amount is not a plain decimal number)"


def pay_tool(amount_type: Any, policy: ApprovalPolicy = ABOVE_10K) -> ToolSpec:
    """A `pay(iban, amount)` tool whose amount has `amount_type`, built like any tool."""

    def pay(iban, amount):  # type: ignore[no-untyped-def]
        """Pay `amount`."""

    pay.__annotations__ = {"iban": str, "amount": amount_type, "return": None}
    return Toolbox.build(irreversible(policy=policy)(pay)).get("pay")


def quorum_for(spec: ToolSpec, amount: object) -> int:
    """The quorum the call `amount` needs, read from its canonical payload."""
    assert spec.policy is not None
    return spec.policy.requirement(spec.validate({"iban": "DE00", "amount": amount}).args).quorum


def test_decimal_int_numeric_string_and_float_amounts_compare_as_the_same_money() -> None:
    decimal, integer, text, real = (pay_tool(t) for t in (Decimal, int, str, float))
    assert decimal.validate({"iban": "x", "amount": 50_000}).args["amount"] == "50000"  # a string
    for spec, below, at, above in [
        (decimal, 9_999, Decimal("10000.00"), Decimal("10000.01")),
        (integer, 9_999, 10_000, 10_001),
        (text, "9999.99", "10000", "10000.01"),
        (real, 9_999.5, 10_000.0, 10_000.5),
    ]:
        assert [quorum_for(spec, v) for v in (below, at, above)] == [1, 1, 2], spec
    assert quorum_for(decimal, 50_000) == 2 and quorum_for(text, "50000") == 2


def test_a_decimal_is_compared_exactly_never_through_a_float() -> None:
    hair_above = "10000.000000000000000001"  # 10000.0 as a float: not above
    assert quorum_for(pay_tool(Decimal), hair_above) == 2
    assert quorum_for(pay_tool(str), hair_above) == 2
    assert ABOVE_10K.requirement({"amount": Decimal(hair_above)}).quorum == 2
    big = ApprovalPolicy(rules=(ArgRule.above("amount", 2**53, quorum=2),))
    assert big.requirement({"amount": str(2**53 + 1)}).quorum == 2  # float(...) == 2**53


def test_a_float_amount_is_compared_as_written_against_an_exact_limit() -> None:
    """A float reaches a rule only from a parameter whose schema says number; it is read
    as its payload writes it (the shortest repr), as the approver reads it."""
    policy = ApprovalPolicy(rules=(ArgRule.above("amount", Decimal("10000.1"), quorum=2),))
    real = pay_tool(float, policy)
    assert real.parameters["properties"]["amount"]["type"] == "number"
    assert quorum_for(real, 10_000.1) == 1  # exactly 10000.1000000000003637... in binary
    assert quorum_for(real, 10_000.100000000002) == 2
    cents = ArgRule.above("amount", 0.1, quorum=2)
    assert cents.description == "amount above 0.1"
    assert ApprovalPolicy(rules=(cents,)).requirement({"amount": "0.1"}).quorum == 1


@pytest.mark.parametrize(
    "value",
    ["1e5", "1E+5", "NaN", "Infinity", "-Infinity", " 5", "5 ", "5\n", "", "+5", "050",
     "5.", ".5", "50,000", "50_000", "0x10", "\u0665\u0660\u0660\u0660\u0660", "\uff11\uff12"],
)  # fmt: skip
def test_a_string_that_is_not_a_plain_decimal_numeral_makes_the_rule_apply(value: str) -> None:
    requirement = ABOVE_10K.requirement(pay_tool(str).validate({"iban": "x", "amount": value}).args)
    assert requirement.quorum == 2
    assert requirement.because == [NOT_READ]  # the approver is told why


def test_a_decimal_given_in_exponent_form_makes_the_rule_apply() -> None:
    """pydantic writes Decimal("5e4") as "5E+4": not plain, so the rule applies."""
    spec = pay_tool(Decimal)
    payload = spec.validate({"iban": "x", "amount": "5e4"}).args
    assert payload["amount"] == "5E+4"
    assert ABOVE_10K.requirement(payload).because == [NOT_READ]


@pytest.mark.parametrize("value", [True, False, None, [50_000], {"amount": 50_000}])
def test_a_bool_null_or_structure_is_not_an_amount_and_the_rule_applies(value: object) -> None:
    assert ABOVE_10K.requirement({"iban": "x", "amount": value}).because == [NOT_READ]


def test_a_missing_amount_makes_the_rule_apply() -> None:
    assert ABOVE_10K.requirement({"iban": "x"}).quorum == 2
    assert quorum_for(pay_tool(Decimal | None), None) == 2  # null: the rule cannot read it


class Address(BaseModel):
    street: str


class Currency(BaseModel):
    code: str


REFUSED_TYPES: list[tuple[Any, str]] = [
    (bool, "a bool"),
    (int | bool, "a bool"),
    (dict[str, int], "an object"),
    (Address, "an object"),
    (list[int], "a list"),
    (Any, "any JSON value"),
    (object, "any JSON value"),
    (datetime.date, "never a number"),
    (Literal["low", "high"], "never a number"),
]
ACCEPTED_TYPES: list[Any] = [
    int, Decimal, str, float, Decimal | None, int | Decimal,
    Annotated[Decimal, Field(gt=0, max_digits=12, decimal_places=2)],
    Annotated[int, Field(ge=0)], Literal["100", "20000"], Literal[100, 20_000],
]  # fmt: skip


@pytest.mark.parametrize(("amount_type", "why"), REFUSED_TYPES)
def test_a_rule_on_a_parameter_it_cannot_compare_fails_the_build(
    amount_type: Any, why: str
) -> None:
    with pytest.raises(ApprovalRuleError) as caught:
        pay_tool(amount_type)
    message = str(caught.value)
    assert "tool 'pay'" in message and "rule 'amount above 10,000'" in message
    assert "reads 'amount', which it cannot compare" in message and why in message
    assert "Type the amount as Decimal" in message  # what to do
    assert isinstance(caught.value, ToolboxError)  # raised where every build error is


def test_rules_on_every_money_type_build_and_only_those() -> None:
    for amount_type in ACCEPTED_TYPES:
        assert pay_tool(amount_type).policy is ABOVE_10K, amount_type
    refused = []
    for amount_type, _ in REFUSED_TYPES:
        try:
            pay_tool(amount_type)
        except ApprovalRuleError:
            refused.append(amount_type)
    assert refused == [t for t, _ in REFUSED_TYPES]


def test_a_rule_on_a_parameter_the_tool_does_not_have_fails_the_build() -> None:
    typo = ApprovalPolicy(rules=(ArgRule.above("amout", 10_000, quorum=2),))
    with pytest.raises(ApprovalRuleError) as caught:
        pay_tool(Decimal, typo)
    message = str(caught.value)
    assert "tool 'pay': approval rule 'amout above 10,000' reads 'amout'" in message
    assert "which the tool does not have (its parameters: 'iban', 'amount')" in message
    assert "did you mean 'amount'?" in message and "ArgRule.above" in message


def test_the_check_runs_wherever_a_toolbox_is_made_from_specs() -> None:
    """Toolbox(specs) — what restrict() and the MCP adapter use — checks too."""
    good = pay_tool(Decimal)
    other = ApprovalPolicy(rules=(ArgRule.above("fee", 10, quorum=2),))
    import dataclasses

    with pytest.raises(ApprovalRuleError, match="reads 'fee'"):
        Toolbox([dataclasses.replace(good, policy=other)])


@pytest.mark.parametrize("limit", [True, float("nan"), float("inf"), "1e5", "", None, [1]])
def test_a_limit_that_is_not_a_finite_number_fails_at_declaration(limit: Any) -> None:
    with pytest.raises(ApprovalPolicyError, match="finite number"):
        ArgRule.above("amount", limit, quorum=2)


def test_a_rule_that_cannot_be_a_requirement_fails_at_declaration() -> None:
    with pytest.raises(ValueError, match="quorum"):
        ArgRule.above("amount", 10_000, quorum=50)
    rule = ArgRule.above("amount", 10_000, quorum=2)
    for not_rules in (rule, (rule, lambda args: True), ("amount above 10,000",)):
        with pytest.raises(ApprovalPolicyError, match="takes a tuple of ArgRule"):
            ApprovalPolicy(rules=not_rules)  # type: ignore[arg-type]


def test_a_rule_that_raises_or_answers_no_bool_refuses_instead_of_guessing() -> None:
    raising = ApprovalPolicy(rules=(ArgRule("odd", lambda a: a["amount"]["x"] > 1, quorum=2),))
    with pytest.raises(ApprovalPolicyError, match="rule 'odd' raised TypeError"):
        raising.requirement({"amount": "5"})
    # `a.get("amount") and ...` answers None for a missing amount: not "does not apply".
    vague = ApprovalPolicy(rules=(ArgRule("vague", lambda a: a.get("amount") and True),))
    with pytest.raises(ApprovalPolicyError, match="answered NoneType, not True or False"):
        vague.requirement({})


class Wire:
    def __init__(self) -> None:
        self.runs: list[str] = []

    @irreversible(
        policy=ApprovalPolicy(rules=(ArgRule("vague", lambda a: a.get("memo") and True),))
    )
    def wire(self, amount: Decimal, memo: str | None = None) -> None:
        self.runs.append(str(amount))


async def test_the_tool_runner_refuses_and_journals_a_call_whose_rule_cannot_tell() -> None:
    store, wire = MemoryJournalStore(), Wire()
    opened = store.append(EntryDraft.new("rule-saga", Phase.SAGA_OPENED))
    runner = ToolRunner(store, Toolbox.build(wire))
    call = ToolCall(tool="wire", args={"amount": "50000"})
    outcome = await ActivityEnvironment().run(
        runner.run, RunToolInput(saga_id="rule-saga", step=1, call=call), opened
    )
    assert outcome.kind is OutcomeKind.REFUSED and outcome.approval is None
    assert "answered NoneType" in (outcome.error or "")
    assert [e.phase for e in store.entries("rule-saga")] == [Phase.SAGA_OPENED, Phase.CALL_REFUSED]
    assert wire.runs == []
