"""Keys, the registry and statements, without servers: what each refuses and why."""

from __future__ import annotations

import json
import os
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sagacity.approval._judge import (
    ApprovalDecision,
    ApprovalRequest,
    JudgeContext,
    RefusalReason,
    judge,
    parse_decision,
)
from sagacity.approval._policy import ApprovalPolicy, ApprovalRequirement, ArgRule
from sagacity.approval._registry import ApproverRegistry, RegistryError
from sagacity.approval._registry_file import KeyLookup, RegistryFile
from sagacity.approval._signed_action import sign_action
from sagacity.approval._signing import KeyFileError, SigningKey, verify_signature
from sagacity.worker.cli._main import app

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def test_keys_new_writes_an_owner_only_file_and_never_overwrites(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "alice.key"
    made = runner.invoke(app, ["keys", "new", "--approver", "alice@example.com", "--out", str(out)])
    assert made.exit_code == 0, made.output
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    key = SigningKey.from_file(out)
    assert key.approver == "alice@example.com" and key.public_key in made.output
    assert (
        "private_key" not in made.output
        and json.loads(out.read_text())["private_key"] not in made.output
    )
    again = runner.invoke(
        app, ["keys", "new", "--approver", "alice@example.com", "--out", str(out)]
    )
    assert again.exit_code == 1 and "never overwritten" in again.output
    os.chmod(out, 0o644)
    with pytest.raises(KeyFileError, match="chmod 600"):
        SigningKey.from_file(out)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe not text", "not UTF-8"),
        (b"{not json", "not JSON"),
        (b'{"type": "sagacity/log-key/v1"}', "is not a sagacity/approver-key/v1 key file"),
    ],
)
def test_an_approver_key_file_that_is_not_one_is_a_typed_error(
    tmp_path: Path, content: bytes, message: str
) -> None:
    """Bytes that are not UTF-8 once escaped as a bare UnicodeDecodeError; a log key's file
    must not pass for an approver's."""
    path = tmp_path / "bad.key"
    path.write_bytes(content)
    os.chmod(path, 0o600)
    with pytest.raises(KeyFileError, match=message):
        SigningKey.from_file(path)


def test_a_registry_refuses_a_key_id_that_is_not_its_keys_and_system_names() -> None:
    a, b = SigningKey.generate("alice"), SigningKey.generate("bob")
    reg = ApproverRegistry().enroll("alice", a.public_key, valid_from=NOW)
    record = reg.model_dump(mode="json")
    record["keys"][0]["key_id"] = b.key_id
    with pytest.raises(ValueError, match="not the id of its public key"):
        ApproverRegistry.model_validate(record)
    with pytest.raises(RegistryError):
        reg.enroll("sagacity:timeout", b.public_key, valid_from=NOW)
    with pytest.raises(RegistryError, match="already enrolled"):
        reg.enroll("alice", a.public_key, valid_from=NOW)


def test_a_revoked_key_counts_before_its_revocation_only() -> None:
    a = SigningKey.generate("alice")
    reg = ApproverRegistry().enroll("alice", a.public_key, valid_from=NOW - timedelta(days=1))
    revoked = reg.revoke(a.key_id, NOW)
    key = revoked.key(a.key_id)
    assert key is not None and revoked.version == reg.version + 1
    assert key.invalid_at(NOW - timedelta(seconds=1)) is None
    assert "revoked" in (key.invalid_at(NOW) or "")


def test_the_worker_keeps_the_newer_registry_when_an_older_one_is_written(tmp_path: Path) -> None:
    path = tmp_path / "approvers.json"
    a = SigningKey.generate("alice")
    v1 = ApproverRegistry().enroll("alice", a.public_key, valid_from=NOW)
    v1.save(path)
    live = RegistryFile(path)
    v2 = v1.revoke(a.key_id, NOW)
    v2.save(path)
    assert live.current().version == v2.version
    v1.save(path)  # an attacker (or a restore) puts back the version without the revocation
    os.utime(path, ns=(1, 1))
    assert live.current().version == v2.version and live.problem and "not newer" in live.problem
    path.write_text("{not json")
    os.utime(path, ns=(2, 2))
    assert live.current().version == v2.version and "not a valid" in (live.problem or "")


def _pending() -> ApprovalRequest:
    return ApprovalRequest.for_call("s1", 2, "pay", {"amount": 5}, requested_at=NOW)


def test_a_signature_binds_every_field_of_the_statement() -> None:
    key = SigningKey.generate("alice")
    p = _pending()
    body = sign_action(
        key,
        ApprovalDecision(
            saga_id="s1",
            step=2,
            tool="pay",
            payload_sha256=p.payload_sha256,
            approve=True,
            reason="ok",
        ),
        NOW,
    ).body()
    reg = ApproverRegistry().enroll("alice", key.public_key, valid_from=NOW - timedelta(hours=1))
    lookup = KeyLookup(configured=True, version=1, sha256=reg.sha256, key=reg.key(key.key_id))
    ctx = JudgeContext(now=NOW, lookup=lookup)

    def verdict(raw: dict[str, object]) -> str:
        parsed = parse_decision(raw, approve=None)
        assert isinstance(parsed, ApprovalDecision), parsed  # well-formed: the signature decides
        v = judge(p, parsed, context=ctx)
        return "ACCEPTED" if v.accepted else v.refusal.reason.value  # type: ignore[union-attr]

    assert verdict(body) == "ACCEPTED"
    assert verdict({**body, "reason": "edited"}) == RefusalReason.BAD_SIGNATURE.value
    assert verdict({**body, "issued_at": "2026-12-03T12:00:01.000000Z"}) == "BAD_SIGNATURE"
    assert verdict({**body, "approve": False}) == "BAD_SIGNATURE"
    assert verdict({**body, "signature": body["signature"].rstrip("=")}) == "BAD_SIGNATURE"  # type: ignore[union-attr]
    future = sign_action(
        key,
        ApprovalDecision(
            saga_id="s1", step=2, tool="pay", payload_sha256=p.payload_sha256, approve=True
        ),
        NOW + timedelta(hours=1),
    ).body()
    assert verdict(future) == "STALE_STATEMENT"
    assert not verify_signature(key.public_key, b"x", "A" * 88)


def test_a_rule_on_the_args_tightens_and_a_saga_can_only_tighten() -> None:
    policy = ApprovalPolicy(groups=frozenset({"finance", "ops"}),
                            rules=(ArgRule.above("amount", 10_000, quorum=2),))  # fmt: skip
    assert policy.requirement({"amount": 10_000}).quorum == 1
    big = policy.requirement({"amount": 10_001})
    assert big.quorum == 2 and big.because == ["amount above 10,000"]
    # A bool is not an amount: the rule cannot read it, so it applies (never fails open).
    assert policy.requirement({"amount": True}).quorum == 2
    saga = ApprovalRequirement(groups=["finance"], quorum=1, separate_from_requester=False)
    tight = big.tightened(saga)
    assert tight.groups == ["finance"] and tight.quorum == 2 and tight.separate_from_requester
    assert tight.needs(1) == "1 of 2 approvals from finance"


@pytest.mark.parametrize("spelling", ["Alice", "\u0430lice", "alice\u200b", "alice "])
def test_a_second_spelling_of_an_enrolled_person_is_refused(spelling: str) -> None:
    reg = ApproverRegistry().enroll("alice", SigningKey.generate("a").public_key, valid_from=NOW)
    with pytest.raises(RegistryError, match="reads as 'alice'"):
        reg.enroll(spelling, SigningKey.generate("b").public_key, valid_from=NOW)


def test_a_changed_registry_without_a_new_version_or_not_utf8_is_not_taken(tmp_path: Path) -> None:
    path = tmp_path / "approvers.json"
    a = SigningKey.generate("alice")
    v1 = ApproverRegistry().enroll("alice", a.public_key, valid_from=NOW)
    v2 = v1.revoke(a.key_id, NOW)
    v2.save(path)
    live = RegistryFile(path)
    undone = ApproverRegistry(version=v2.version, keys=v1.keys)  # the revocation taken out
    undone.save(path)
    os.utime(path, ns=(3, 3))
    assert live.current().sha256 == v2.sha256 and "must raise the version" in (live.problem or "")
    path.write_bytes(b"\xff" + path.read_bytes())
    os.utime(path, ns=(4, 4))
    assert live.current().sha256 == v2.sha256 and "UTF-8" in (live.problem or "")


def test_separation_of_duties_compares_people_not_spellings() -> None:
    p = _pending()
    raw = {"saga_id": "s1", "step": 2, "payload_sha256": p.payload_sha256, "approve": True}
    for spelling in ("Alice", "\u0430lice", "alice\u200b"):
        parsed = parse_decision({**raw, "approver": spelling}, approve=None)
        ctx = JudgeContext(now=NOW, lookup=KeyLookup(configured=False), requester="alice")
        verdict = judge(p, parsed, context=ctx)  # type: ignore[arg-type]
        assert verdict.refusal is not None
        assert verdict.refusal.reason is RefusalReason.REQUESTER_CANNOT_APPROVE
        counted = JudgeContext(
            now=NOW, lookup=KeyLookup(configured=False), counted=frozenset({"alice"})
        )
        again = judge(p, parsed, context=counted)  # type: ignore[arg-type]
        assert (
            again.refusal is not None and again.refusal.reason is RefusalReason.DUPLICATE_APPROVER
        )
