"""Bounds on what enters a saga, without I/O: depth and byte limits, a model turn cut to
its bounds, the conversation counted in bytes, results and carries sized from their
encoded bytes, the worker identity, and the start-input door."""

from __future__ import annotations

from typing import Any

import pytest

from sagacity._errors import BoundsError, ForgedStateError, NotCanonicalError
from sagacity.activities._identity import worker_identity
from sagacity.activities._models import REFUSED_ARGUMENTS_KEY, ChatMessage, ModelTurn, ToolCall
from sagacity.activities._plan_check import check_plan
from sagacity.activities._turn_bounds import bounded_turn
from sagacity.examples.orders import Shop
from sagacity.journal._bounds import (
    MAX_ARGS_BYTES,
    MAX_CALLS_PER_TURN,
    check_value,
    cut,
    depth_of,
    echo,
)
from sagacity.journal._canonical import canonical_bytes
from sagacity.tools._toolbox import Toolbox
from sagacity.workflows._conversation import bound_messages, conversation_bytes
from sagacity.workflows._models import (
    CompensationReport,
    SagaCarry,
    SagaInput,
    SagaResult,
    StepReport,
)
from sagacity.workflows._reporting import CARRY_BUDGET, RESULT_BUDGET, fit_carry, fit_result
from sagacity.workflows._start_input import SagaInputError, check_start_fields
from tests.pure.journal.test_canonical import nested


def test_depth_is_counted_without_recursion_and_stops_early() -> None:
    assert depth_of(1) == 0 and depth_of({"a": [1]}) == 2
    assert depth_of(nested(100_000), limit=32) == 33  # stops as soon as the limit is passed


def test_check_value_names_what_and_the_limit() -> None:
    check_value(nested(32), "x")
    with pytest.raises(BoundsError, match="x is nested more than 32"):
        check_value(nested(33), "x")
    with pytest.raises(BoundsError, match="over the limit of 10"):
        check_value("é" * 10, "y", max_bytes=10)  # bytes, not characters


def test_canonical_json_refuses_deep_values_with_a_typed_error() -> None:
    with pytest.raises(NotCanonicalError, match="nested"):
        canonical_bytes(nested(5_000))


def test_echo_cuts_caller_text() -> None:
    shown = echo("x" * 700_000)
    assert len(shown) < 300 and "+699,800 characters" in shown


def test_a_cut_text_says_so_and_a_whole_one_is_left_alone() -> None:
    assert cut("refund failed", 90) == "refund failed"
    assert cut("x" * 90, 90) == "x" * 90
    shown = cut("provider said " + "y" * 200, 90)
    assert len(shown) == 90 and shown.endswith("…") and shown.startswith("provider said ")


def test_a_model_turn_over_the_bounds_is_refused_call_by_call() -> None:
    calls = [ToolCall(tool="a", args={"deep": nested(40)})]
    calls.append(ToolCall(tool="b", args={"big": "x" * (MAX_ARGS_BYTES + 1)}))
    calls.append(ToolCall(tool="t" * 5_000, args={}))
    calls.extend(ToolCall(tool="c", args={}) for _ in range(MAX_CALLS_PER_TURN))
    turn = bounded_turn(ModelTurn(tool_calls=calls, final="é" * 100_000))
    assert len(turn.tool_calls) == len(calls)  # every call keeps its place
    refused = [c for c in turn.tool_calls if REFUSED_ARGUMENTS_KEY in c.args]
    assert [c.tool for c in refused[:2]] == ["a", "b"]
    assert "more than 64 tool calls" in refused[-1].args[REFUSED_ARGUMENTS_KEY]
    assert len(turn.tool_calls[2].tool) == 200
    assert len((turn.final or "").encode()) < 70_000


def test_the_conversation_budget_is_in_bytes() -> None:
    emoji = ChatMessage(role="tool", content="😀" * 5_000)  # 5,000 characters, 20,000 bytes
    messages = [ChatMessage(role="user", content="goal")] + [
        ChatMessage(role="assistant", content="call"),
        emoji,
    ] * 5
    bounded = bound_messages(messages, 50_000)
    assert conversation_bytes(bounded) <= 50_000 < conversation_bytes(messages)


def _report(step: int) -> StepReport:
    return StepReport(
        step=step, tool="t", status="EXECUTED", args={"a": "x" * 400}, result="y" * 400,
        error="e" * 2_000,
    )  # fmt: skip


def test_a_large_result_is_compacted_under_the_budget() -> None:
    result = SagaResult(saga_id="s", status="COMPLETED", steps=[_report(i) for i in range(1_000)])
    assert len(result.model_dump_json()) > RESULT_BUDGET
    fitted = fit_result(result)
    assert fitted.reports_compacted and len(fitted.model_dump_json().encode()) <= RESULT_BUDGET
    assert [s.step for s in fitted.steps] == list(range(1_000))


def test_failed_compensations_with_long_errors_are_cut_under_the_budget() -> None:
    undone = [
        CompensationReport(step=i, tool="charge", ok=False, error="e" * 2_000) for i in range(1_000)
    ]
    result = SagaResult(
        saga_id="s", status="UNRESOLVED", steps=[_report(i) for i in range(1_000)],
        compensations=undone,
    )  # fmt: skip
    assert len(result.model_dump_json()) > RESULT_BUDGET
    fitted = fit_result(result)
    assert len(fitted.model_dump_json().encode()) <= RESULT_BUDGET
    assert [(c.step, c.ok) for c in fitted.compensations] == [(i, False) for i in range(1_000)]
    assert all(c.error == "e" * 199 + "…" for c in fitted.compensations)


def test_continue_as_new_input_is_sized_from_its_bytes() -> None:
    goal = "g" * 400_000
    messages = [ChatMessage(role="user", content=goal)] + [
        ChatMessage(role="tool", content="r" * 100_000) for _ in range(20)
    ]
    carry = SagaCarry(next_step=1000, messages=messages, steps=[_report(i) for i in range(1_000)])
    fitted = fit_carry(SagaInput(goal=goal), carry)
    assert fitted is not None and fitted.goal is None  # the goal is not carried twice
    assert len(fitted.model_dump_json().encode()) <= CARRY_BUDGET


def test_the_worker_identity_names_tools_and_journal_but_no_credentials(tmp_path: Any) -> None:
    shop = Toolbox.build(Shop(tmp_path / "shop.db"))
    a = worker_identity(shop, "postgresql://app:secret@db:5432/journal")
    assert a == worker_identity(shop, "postgresql://app:other@db:5432/journal")
    assert a != worker_identity(shop, "postgresql://app:secret@db:5432/elsewhere")
    assert a != worker_identity(shop.restrict(["charge_card"]), "postgresql://db:5432/journal")


def test_start_fields_door() -> None:
    check_start_fields(SagaInput(plan=[ToolCall(tool="x", args={"a": 1})]).model_dump(mode="json"))
    check_start_fields({"goal": "g", "carry": None})  # a first run with no state
    with pytest.raises(ForgedStateError):
        check_start_fields({"goal": "g", "carry": {"next_step": 3}})
    check_start_fields({"goal": "g", "carry": {"next_step": 3}}, continued=True)
    with pytest.raises(SagaInputError, match="unknown SagaInput field"):
        check_start_fields({"goal": "g", "admin": True})
    for look_alike in ["Sagacity:timeout", "\uff53agacity\uff1atimeout", "s\u0430gacity:x"]:
        with pytest.raises(SagaInputError, match="reserved prefix"):
            check_start_fields({"goal": "g", "approvers": [look_alike]})
    step = {"tool": "x", "args": {}}
    check_start_fields({"plan": [step] * 50})  # the default max_steps
    with pytest.raises(SagaInputError, match="the plan has 51 steps but max_steps is 50"):
        check_start_fields({"plan": [step] * 51})
    with pytest.raises(SagaInputError, match="the plan has 4 steps but max_steps is 3"):
        check_start_fields({"plan": [step] * 4, "max_steps": 3})
    with pytest.raises(BoundsError, match="plan step 1"):
        check_start_fields({"plan": [{"tool": "x", "args": {"a": "x" * (MAX_ARGS_BYTES + 1)}}]})
    turn = {"tool_calls": [{"tool": "x", "args": {"a": nested(33)}}]}
    with pytest.raises(BoundsError, match="script turn 1"):
        check_start_fields({"model": {"script": [turn]}})


def test_a_whole_plan_is_checked_before_anything_runs(tmp_path: Any) -> None:
    shop = Toolbox.build(Shop(tmp_path / "shop.db"))
    plan = [
        ToolCall(tool="reserve_inventory", args={"sku": "w", "qty": 1}),
        ToolCall(tool="reserve_inventroy", args={}),
        ToolCall(tool="charge_card", args={"amount": "lots"}),
    ]
    problems = check_plan(shop, plan, None).problems
    assert [(p.index, p.tool) for p in problems] == [(1, "reserve_inventroy"), (2, "charge_card")]
    assert "did you mean 'reserve_inventory'" in problems[0].error
    only = check_plan(shop, plan[:1], ["charge_card"]).problems
    assert "not allowed" in only[0].error


def test_one_turn_with_many_large_results_is_cut_to_the_budget() -> None:
    """The newest exchange is always kept; if it alone is over the budget its results are
    cut, or the next model call's input could outgrow a payload."""
    turn = [ChatMessage(role="assistant", content="64 calls")] + [
        ChatMessage(role="tool", content="r" * 200_000) for _ in range(64)
    ]
    bounded = bound_messages([ChatMessage(role="user", content="goal"), *turn], 400_000)
    assert conversation_bytes(bounded) <= 400_000
    assert sum(m.role == "tool" for m in bounded) == 64
    assert all("journal holds the full result" in (m.content or "") for m in bounded[2:][1:])
