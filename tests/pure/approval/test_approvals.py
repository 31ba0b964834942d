"""Approvals: the hash recipe, parsing raw decisions, and the fail-closed judge."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from sagacity.approval import ApprovalDecision, ApprovalRequest, Refusal, RefusalReason, Verdict
from sagacity.approval._judge import judge, parse_decision
from sagacity.approval._models import approval_hash, approval_payload, is_reserved_actor

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
ARGS = {"amount": 100, "currency": "EUR"}


def request(step: int = 1, payload: dict[str, Any] | None = None) -> ApprovalRequest:
    args = ARGS if payload is None else payload
    return ApprovalRequest.for_call("order-7", step, "charge_card", args, NOW)


def decision(pending: ApprovalRequest, **changes: Any) -> ApprovalDecision:
    fields: dict[str, Any] = {
        "saga_id": pending.saga_id,
        "step": pending.step,
        "payload_sha256": pending.payload_sha256,
        "approver": "alice",
        "approve": True,
    }
    fields.update(changes)
    return ApprovalDecision(**fields)


def refused(verdict: Verdict) -> RefusalReason:
    assert not verdict.accepted
    assert verdict.refusal is not None
    assert verdict.refusal.detail
    return verdict.refusal.reason


# --- the hash recipe ------------------------------------------------------------------


def test_hash_covers_canonical_tool_and_args_known_answer() -> None:
    expected = hashlib.sha256(b'{"args":{"amount":100,"currency":"EUR"},"tool":"charge_card"}')
    assert approval_payload("charge_card", ARGS) == {"tool": "charge_card", "args": ARGS}
    assert approval_hash("charge_card", ARGS) == expected.hexdigest()
    assert request().payload_sha256 == expected.hexdigest()


def test_same_args_for_another_tool_hash_differently() -> None:
    assert approval_hash("charge_card", ARGS) != approval_hash("wire", ARGS)


def test_request_refuses_a_hash_that_does_not_cover_its_payload() -> None:
    good = request()
    with pytest.raises(ValidationError, match="not the hash"):
        ApprovalRequest(**{**good.model_dump(), "payload": {"amount": 1_000_000}})


@pytest.mark.parametrize(
    "change",
    [
        {"step": 0},
        {"requested_at": datetime(2026, 5, 1, 12, 0)},  # naive: its zone is a guess
        {"deadline": NOW - timedelta(seconds=1)},
        {"saga_id": ""},
    ],
)
def test_request_refuses_bad_fields(change: dict[str, Any]) -> None:
    fields = {**request().model_dump(), **change}
    with pytest.raises(ValidationError):
        ApprovalRequest(**fields)


def test_request_expiry_uses_the_time_it_is_given() -> None:
    pending = ApprovalRequest.for_call("s", 1, "wire", ARGS, NOW, deadline=NOW + timedelta(hours=1))
    assert not pending.expired(NOW + timedelta(minutes=59))
    assert pending.expired(NOW + timedelta(hours=1))
    assert not request().expired(NOW + timedelta(days=365))


# --- parsing raw decisions ------------------------------------------------------------


def test_parse_a_well_formed_decision() -> None:
    pending = request()
    raw = {"step": 1, "payload_sha256": pending.payload_sha256, "approver": "alice"}
    parsed = parse_decision(raw, approve=True)
    assert isinstance(parsed, ApprovalDecision)
    assert parsed.approve is True and parsed.saga_id is None and parsed.reason == ""
    rejected = parse_decision({**raw, "reason": "too much", "approve": False}, approve=None)
    assert isinstance(rejected, ApprovalDecision) and rejected.approve is False


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"payload_sha256": "a" * 64, "approver": "alice"}, "step"),
        ({"step": "1", "payload_sha256": "a" * 64, "approver": "alice"}, "step"),
        ({"step": True, "payload_sha256": "a" * 64, "approver": "alice"}, "step"),
        ({"step": 0, "payload_sha256": "a" * 64, "approver": "alice"}, "step"),
        ({"step": 1, "payload_sha256": "A" * 64, "approver": "alice"}, "payload_sha256"),
        ({"step": 1, "payload_sha256": "a" * 63, "approver": "alice"}, "payload_sha256"),
        ({"step": 1, "payload_sha256": "a" * 100_000, "approver": "alice"}, "payload_sha256"),
        ({"step": 1, "payload_sha256": 7, "approver": "alice"}, "payload_sha256"),
        ({"step": 1, "payload_sha256": "a" * 64, "approver": "x" * 257}, "approver"),
        ({"step": 1, "payload_sha256": "a" * 64, "approver": "al\nice"}, "approver"),
        ({"step": 1, "payload_sha256": "a" * 64, "approver": ["alice"]}, "approver"),
        ({"step": 1, "payload_sha256": "a" * 64, "approver": "a", "reason": "r" * 2001}, "reason"),
        ({"step": 1, "payload_sha256": "a" * 64, "approver": "a", "reason": "\ud800"}, "reason"),
        ({"step": 1, "payload_sha256": "a" * 64, "approver": "a", "saga_id": 5}, "saga_id"),
        ({"step": 1, "payload_sha256": "a" * 64, "approver": "a", "payload": {}}, "payload"),
    ],
)
def test_malformed_bodies_are_refused_naming_the_field(raw: dict[str, Any], field: str) -> None:
    parsed = parse_decision(raw, approve=True)
    assert isinstance(parsed, Refusal)
    assert parsed.reason is RefusalReason.MALFORMED
    assert f"field '{field}'" in parsed.detail
    assert len(parsed.detail) < 1_000  # a huge value is never echoed back


@pytest.mark.parametrize("raw", [None, "approve", [1, 2], 42])
def test_a_body_that_is_not_an_object_is_malformed(raw: object) -> None:
    parsed = parse_decision(raw, approve=True)
    assert isinstance(parsed, Refusal) and parsed.reason is RefusalReason.MALFORMED


def test_approve_must_be_given_by_the_signal_or_the_body_and_agree() -> None:
    raw = {"step": 1, "payload_sha256": "a" * 64, "approver": "alice"}
    missing = parse_decision(raw, approve=None)
    assert isinstance(missing, Refusal) and "field 'approve'" in missing.detail
    for body, verb in (({**raw, "approve": True}, False), ({**raw, "approve": "yes"}, True)):
        contradicting = parse_decision(body, approve=verb)
        assert isinstance(contradicting, Refusal)
        assert contradicting.reason is RefusalReason.MALFORMED
        assert "field 'approve'" in contradicting.detail


@pytest.mark.parametrize("body", [{}, {"payload_sha256": ""}, {"payload_sha256": "   "}])
def test_missing_hash_parses_so_the_judge_can_say_so(body: dict[str, Any]) -> None:
    parsed = parse_decision({"step": 1, "approver": "alice", **body}, approve=True)
    assert isinstance(parsed, ApprovalDecision)
    assert refused(judge(request(), parsed)) is RefusalReason.MISSING_HASH


# --- the judge: one test per refusal reason -------------------------------------------


def test_matching_decision_is_accepted() -> None:
    pending = request()
    verdict = judge(pending, decision(pending), allowed_approvers=frozenset({"alice"}))
    assert verdict == Verdict(accepted=True, refusal=None, approver="alice")
    assert judge(pending, decision(pending, saga_id=None)).accepted


def test_already_decided() -> None:
    pending = request()
    assert refused(judge(pending, decision(pending), already_decided=True)) is (
        RefusalReason.ALREADY_DECIDED
    )
    assert refused(judge(None, decision(pending), already_decided=True)) is (
        RefusalReason.ALREADY_DECIDED
    )


def test_no_pending_request() -> None:
    assert refused(judge(None, decision(request()))) is RefusalReason.NO_PENDING_REQUEST


def test_wrong_saga() -> None:
    pending = request()
    assert refused(judge(pending, decision(pending, saga_id="order-8"))) is RefusalReason.WRONG_SAGA


def test_wrong_step() -> None:
    pending = request(step=2)
    assert refused(judge(pending, decision(pending, step=3))) is RefusalReason.WRONG_STEP


def test_an_approval_for_step_10_never_authorises_step_1() -> None:
    step_1 = request(step=1)
    step_10 = request(step=10)  # same tool, same payload, hence the same hash
    assert step_10.payload_sha256 == step_1.payload_sha256
    verdict = judge(step_1, decision(step_10))
    assert refused(verdict) is RefusalReason.WRONG_STEP
    assert verdict.refusal is not None and "step 10" in verdict.refusal.detail


def test_missing_hash() -> None:
    pending = request()
    assert refused(judge(pending, decision(pending, payload_sha256=""))) is (
        RefusalReason.MISSING_HASH
    )
    unchecked = ApprovalDecision.model_construct(
        **{**decision(pending).__dict__, "payload_sha256": " \t"}
    )
    assert refused(judge(pending, unchecked)) is RefusalReason.MISSING_HASH


def test_hash_mismatch_does_not_reveal_the_expected_hash() -> None:
    pending = request()
    other = approval_hash("charge_card", {"amount": 1_000_000, "currency": "EUR"})
    verdict = judge(pending, decision(pending, payload_sha256=other))
    assert refused(verdict) is RefusalReason.HASH_MISMATCH
    assert verdict.refusal is not None
    assert pending.payload_sha256 not in verdict.refusal.detail


@pytest.mark.parametrize("approver", ["", "   "])
def test_empty_approver(approver: str) -> None:
    pending = request()
    assert refused(judge(pending, decision(pending, approver=approver))) is (
        RefusalReason.EMPTY_APPROVER
    )


def test_approver_not_allowed_and_an_empty_allow_list_allows_nobody() -> None:
    pending = request()
    d = decision(pending, approver="mallory")
    assert refused(judge(pending, d, allowed_approvers=frozenset({"alice"}))) is (
        RefusalReason.APPROVER_NOT_ALLOWED
    )
    assert refused(judge(pending, decision(pending), allowed_approvers=frozenset())) is (
        RefusalReason.APPROVER_NOT_ALLOWED
    )


def test_a_rejection_goes_through_the_same_checks() -> None:
    pending = request(step=2)
    assert refused(judge(pending, decision(pending, approve=False, step=1))) is (
        RefusalReason.WRONG_STEP
    )
    stale = approval_hash("charge_card", {"amount": 5})
    assert refused(judge(pending, decision(pending, approve=False, payload_sha256=stale))) is (
        RefusalReason.HASH_MISMATCH
    )
    assert judge(pending, decision(pending, approve=False)).accepted


def test_verdict_is_either_accepted_or_refused() -> None:
    with pytest.raises(ValidationError):
        Verdict(accepted=True, refusal=Refusal(reason=RefusalReason.MALFORMED, detail="x"))
    with pytest.raises(ValidationError):
        Verdict(accepted=False)


# --- properties -----------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
payloads = st.dictionaries(st.text(max_size=8), json_values, max_size=5)
hex_hashes = st.from_regex(r"\A[0-9a-f]{64}\Z")


@given(payload=payloads, wrong=hex_hashes)
def test_any_well_formed_wrong_hash_is_refused(payload: dict[str, Any], wrong: str) -> None:
    pending = request(payload=payload)
    verdict = judge(pending, decision(pending, payload_sha256=wrong))
    assert verdict.accepted is (wrong == pending.payload_sha256)
    if not verdict.accepted:
        assert refused(verdict) is RefusalReason.HASH_MISMATCH


@given(payload=payloads, wrong=st.text(max_size=80))
def test_any_other_string_as_hash_is_refused(payload: dict[str, Any], wrong: str) -> None:
    pending = request(payload=payload)
    # model_construct skips validation: the judge alone must still fail closed.
    fields = {**decision(pending).__dict__, "payload_sha256": wrong}
    verdict = judge(pending, ApprovalDecision.model_construct(**fields))
    assert not verdict.accepted
    assert refused(verdict) in (RefusalReason.HASH_MISMATCH, RefusalReason.MISSING_HASH)


@given(payload=payloads)
def test_the_right_hash_of_any_payload_is_accepted(payload: dict[str, Any]) -> None:
    pending = request(payload=payload)
    assert pending.payload_sha256 == approval_hash("charge_card", payload)
    assert judge(pending, decision(pending)).accepted


_DISGUISES = st.sampled_from(["", "\u200b", "\u200d", "\u2060", "\u00ad", "\u0301", " "])


@given(st.lists(_DISGUISES, min_size=9, max_size=9), st.text(max_size=20), st.booleans())
def test_a_disguised_reserved_name_is_still_reserved(
    between: list[str], rest: str, wide: bool
) -> None:
    """Invisible characters, combining marks and spaces between the letters of
    `sagacity:`, fullwidth forms, any case: the name still reads as the saga's own."""
    letters = "SaGaCiTy:" if not wide else "\uff53\uff41\uff47\uff41\uff43\uff49\uff54\uff59\uff1a"
    name = "".join(c + gap for c, gap in zip(letters, between, strict=True)) + rest
    assert is_reserved_actor(name)


@pytest.mark.parametrize("name", ["alice", "sagacity", "sagacit:y", "ops:sagacity:x"])
def test_names_that_do_not_read_as_the_saga_are_people(name: str) -> None:
    assert not is_reserved_actor(name)


@pytest.mark.parametrize(
    "name",
    [
        "sa\u0261acity:timeout",  # Latin script g
        "sagac\u0131ty:timeout",  # dotless i
        "saga\u03f2ity:timeout",  # Greek lunate sigma for c
        "sagacity\ua4fdtimeout",  # Lisu letter that looks like a colon
        "sagacity\u0903cancelled",  # Devanagari visarga (a mark: dropped by the skeleton)
        "sagacity\ufe30timeout",  # presentation form, NFKD makes it two dots
        "sagacity\u2982timeout",  # Z notation type colon
    ],
)
def test_look_alikes_outside_any_table_are_still_reserved(name: str) -> None:
    """No table of look-alikes is complete: a name written with anything outside ASCII
    whose letters could read as "sagacity" is refused, whatever follows them."""
    assert is_reserved_actor(name)


@pytest.mark.parametrize("name", ["S\u00f8ren", "Jos\u00e9", "sagacity-ops", "\u674e\u96f7"])
def test_people_with_non_ascii_names_are_not_reserved(name: str) -> None:
    assert not is_reserved_actor(name)
