"""Passkey decisions without servers: enrollment through the `webauthn` package with a
software authenticator, and every hostile assertion refused by the judge with its typed
reason (the same pure code the workflow runs)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import cbor2
import pytest
from pydantic import ValidationError

from sagacity.approval._judge import judge, parse_decision
from sagacity.approval._models import (
    ApprovalDecision,
    ApprovalRequest,
    Refusal,
    RefusalReason,
    Verdict,
)
from sagacity.approval._passkey_models import b64url
from sagacity.approval._passkeys import (
    PasskeyAssertionError,
    PasskeyDraft,
    PasskeyFailure,
    PasskeyRegistrationError,
    check_assertion,
    draft_options,
    enroll_passkey,
    new_challenge,
    passkey_draft,
    passkey_signed,
    registration_options,
    verify_registration,
)
from sagacity.approval._policy import ApprovalRequirement
from sagacity.approval._registry import ApproverRegistry, EnrolledKey, RegistryError
from sagacity.approval._registry_file import KeyLookup
from sagacity.approval._signed_action import sign_action
from sagacity.approval._signed_checks import JudgeContext
from sagacity.approval._signing import SigningKey
from tests.support.soft_authenticator import SoftAuthenticator, enrolled_key, signed_with

ORIGIN = "http://localhost:8765"
RP = "localhost"
NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def enroll(
    device: SoftAuthenticator, approver: str = "alice", groups: tuple[str, ...] = ("finance",)
) -> EnrolledKey:
    return enrolled_key(
        device, approver, rp_id=RP, rp_name="t", origin=ORIGIN,
        valid_from=NOW - timedelta(days=1), groups=groups,
    )  # fmt: skip


REQUEST = ApprovalRequest.for_call("saga-a", 2, "pay", {"iban": "DE89", "amount": 5}, NOW)


def approving(request: ApprovalRequest = REQUEST, **over: Any) -> ApprovalDecision:
    """A decision approving `request`, with any field replaced by `over`."""
    fields: dict[str, Any] = {
        "saga_id": request.saga_id, "step": request.step, "tool": request.tool,
        "payload_sha256": request.payload_sha256, "approve": True,
    }  # fmt: skip
    return ApprovalDecision(**{**fields, **over})


def draft_for(
    key: EnrolledKey, request: ApprovalRequest = REQUEST, **over: Any
) -> PasskeyDraft[ApprovalDecision]:
    return passkey_draft(approving(request, **over), key, NOW + timedelta(seconds=5))


def body(device: SoftAuthenticator, key: EnrolledKey, **get: Any) -> dict[str, Any]:
    origin, rp = get.pop("origin", ORIGIN), get.pop("rp", RP)
    return signed_with(device, draft_for(key), key, origin, rp, **get).model_dump(mode="json")


def verdict(raw: Any, key: EnrolledKey | None, **context: Any) -> Verdict:
    parsed = parse_decision(raw, approve=None)
    if isinstance(parsed, Refusal):
        return Verdict.refuse(parsed.reason, parsed.detail)
    lookup = KeyLookup(configured=True, version=1, sha256="0" * 64, key=key)
    return judge(
        REQUEST,
        parsed,
        context=JudgeContext(now=NOW + timedelta(seconds=10), lookup=lookup, **context),  # type: ignore[arg-type]
    )


@pytest.fixture(params=[-7, -8], ids=["es256", "eddsa"])
def device(request: pytest.FixtureRequest) -> SoftAuthenticator:
    return SoftAuthenticator(algorithm=request.param)


def test_enrolled_passkey_signs_a_decision_that_the_judge_accepts(
    device: SoftAuthenticator,
) -> None:
    key = enroll(device)
    assert key.kind == "passkey" and key.passkey is not None
    assert key.passkey.algorithm == device.algorithm and key.passkey.origins == [ORIGIN]
    raw = body(device, key)
    assert set(raw["passkey"]) == {
        "credential_id", "authenticator_data", "client_data_json", "signature", "user_handle"
    }  # fmt: skip
    assert raw["signature"] is None and raw["key_id"] == key.key_id
    got = verdict(raw, key, requirement=ApprovalRequirement(groups=frozenset({"finance"})))
    assert got.accepted, got.refusal
    assert got.approver == "alice" and got.key == key


def test_passkey_decision_checks_before_sending_with_the_sagas_reason() -> None:
    device = SoftAuthenticator()
    key = enroll(device)
    draft = draft_for(key)
    credential = device.get(draft.challenge, "https://evil.example", RP)
    with pytest.raises(PasskeyAssertionError) as caught:
        passkey_signed(draft, credential, key=key)
    assert caught.value.reason is RefusalReason.WRONG_ORIGIN
    # The draft survives a round trip through a page's session.
    assert PasskeyDraft.from_json(draft.to_json(), ApprovalDecision).challenge == draft.challenge


def test_registration_refuses_another_challenge_origin_rp_or_ceremony() -> None:
    device = SoftAuthenticator()
    challenge = new_challenge()
    options = registration_options(approver="alice", rp_id=RP, rp_name="t", challenge=challenge)
    good = dict(approver="alice", challenge=challenge, rp_id=RP, origins=[ORIGIN], valid_from=NOW)
    cases: list[tuple[dict[str, Any], dict[str, Any]]] = [
        (device.create(options, ORIGIN), {"challenge": new_challenge()}),
        (device.create(options, "https://evil.example"), {}),
        (device.create({**options, "rp": {"id": "evil.example"}}, ORIGIN), {}),
        (device.create(options, ORIGIN), {"rp_id": "example.com"}),
    ]
    for response, over in cases:
        with pytest.raises(PasskeyRegistrationError):
            verify_registration(response, **{**good, **over})  # type: ignore[arg-type]
    # An assertion ceremony's clientData is not a registration.
    created = device.create(options, ORIGIN)
    fake = json.dumps({"type": "webauthn.get", "challenge": b64url(challenge), "origin": ORIGIN})
    created["response"]["clientDataJSON"] = b64url(fake.encode())
    with pytest.raises(PasskeyRegistrationError, match="type"):
        verify_registration(created, **good)  # type: ignore[arg-type]
    garbled = device.create(options, ORIGIN)
    garbled["response"]["attestationObject"] = b64url(b"\xa3\x63fmt\xff not cbor")
    with pytest.raises(PasskeyRegistrationError):
        verify_registration(garbled, **good)  # type: ignore[arg-type]
    with pytest.raises(PasskeyRegistrationError, match="larger"):
        verify_registration({"id": "A" * 20_000}, **good)  # type: ignore[arg-type]


def test_key_id_is_the_public_keys_and_a_credential_is_enrolled_once(tmp_path: Path) -> None:
    first, second = enroll(SoftAuthenticator()), enroll(SoftAuthenticator(), "bob")
    moved = first.model_dump() | {"key_id": second.key_id}
    with pytest.raises(ValidationError, match="not the id of its public key"):
        EnrolledKey.model_validate(moved)
    off_curve = cbor2.dumps({1: 2, 3: -7, -1: 1, -2: b"x" * 32, -3: b"y" * 32})
    garbage = first.model_dump() | {"public_key": base64.b64encode(off_curve).decode()}
    with pytest.raises(ValidationError, match="COSE"):
        EnrolledKey.model_validate(garbage)
    path = tmp_path / "approvers.json"
    ApproverRegistry(version=1, keys=[]).save(path)
    assert enroll_passkey(path, first).version == 2
    reg = enroll_passkey(path, second)
    assert reg.version == 3 and ApproverRegistry.load(path) == reg
    assert reg.passkeys_of("alice") == [first]
    with pytest.raises(RegistryError, match="already enrolled"):
        enroll_passkey(path, first)
    third = enroll(SoftAuthenticator(credential_id=b"c" * 32), "carol")
    assert first.passkey is not None and third.passkey is not None
    same_id = third.passkey.model_copy(update={"credential_id": first.passkey.credential_id})
    same_credential = third.model_dump() | {"passkey": same_id.model_dump()}
    with pytest.raises(RegistryError, match="enrolled twice"):
        ApproverRegistry.load(path).add(EnrolledKey.model_validate(same_credential))


def _other_challenge(device: SoftAuthenticator, key: EnrolledKey) -> dict[str, Any]:
    other = draft_for(key, reason="something else")
    raw = draft_for(key).action.model_dump(mode="json")
    assertion = passkey_signed(other, device.get(other.challenge, ORIGIN, RP)).passkey
    return raw | {"passkey": assertion.model_dump(mode="json")}  # type: ignore[union-attr]


def _field(name: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(raw: dict[str, Any]) -> None:
        raw["passkey"][name] = value

    return edit


def _client_data(data: bytes) -> Callable[[SoftAuthenticator, EnrolledKey], dict[str, Any]]:
    def make(device: SoftAuthenticator, key: EnrolledKey) -> dict[str, Any]:
        return body(device, key, client_data=data)

    return make


def _signed_client_json(
    write: Callable[[str], str],
) -> Callable[[SoftAuthenticator, EnrolledKey], dict[str, Any]]:
    """An assertion the device really signs over the clientDataJSON text `write` makes of
    the statement's challenge: every check before the one aimed at passes."""

    def make(device: SoftAuthenticator, key: EnrolledKey) -> dict[str, Any]:
        challenge = draft_options(draft_for(key), key)["challenge"]
        text = challenge if isinstance(challenge, str) else b64url(challenge)
        return body(device, key, client_data=write(text).encode())

    return make


CROSS_ORIGIN_TEXT = _signed_client_json(
    lambda c: (
        f'{{"type":"webauthn.get","challenge":"{c}","origin":"{ORIGIN}","crossOrigin":"true"}}'
    )
)
DUPLICATE_TYPE = _signed_client_json(
    lambda c: (
        f'{{"type":"webauthn.create","challenge":"{c}","origin":"{ORIGIN}","type":"webauthn.get"}}'
    )
)
DUPLICATE_NESTED = _signed_client_json(
    lambda c: (
        f'{{"type":"webauthn.get","challenge":"{c}","origin":"{ORIGIN}",'
        f'"tokenBinding":{{"status":"present","status":"absent"}}}}'
    )
)
HONEST_SPELLED = _signed_client_json(
    lambda c: f'{{"type":"webauthn.get","challenge":"{c}","origin":"{ORIGIN}","crossOrigin":false}}'
)


def _flip_signature(raw: dict[str, Any]) -> None:
    sig = raw["passkey"]["signature"]
    raw["passkey"]["signature"] = ("A" if sig[4] != "A" else "B").join([sig[:4], sig[5:]])


HOSTILE: list[tuple[str, Any, RefusalReason]] = [
    ("oversized-field", _field("client_data_json", "A" * 10_000), RefusalReason.MALFORMED),
    ("garbage-base64", _field("signature", "++//=="), RefusalReason.MALFORMED),
    ("padded-base64", _field("signature", "AAAAAAAAAAA="), RefusalReason.MALFORMED),
    ("short-authdata", _field("authenticator_data", b64url(b"\x00" * 10)), RefusalReason.MALFORMED),
    ("number-not-text", _field("signature", 12345), RefusalReason.MALFORMED),
    ("extra-field", _field("admin", True), RefusalReason.MALFORMED),
    ("client-data-not-json", _client_data(b"\xff\xfenot json"), RefusalReason.PASSKEY_MALFORMED),
    ("client-data-deep", _client_data(b"[" * 2_000), RefusalReason.PASSKEY_MALFORMED),
    ("client-data-array", _client_data(b"[1,2]"), RefusalReason.PASSKEY_MALFORMED),
    (
        "extensions-not-cbor",
        {"extra_flags": 0x80, "tail": b"\xff\x00garbage"},
        RefusalReason.PASSKEY_MALFORMED,
    ),
    ("trailing-bytes", {"tail": b"\xa0"}, RefusalReason.PASSKEY_MALFORMED),
    ("attested-data", {"extra_flags": 0x40, "tail": bytes(18)}, RefusalReason.PASSKEY_MALFORMED),
    ("create-ceremony", {"kind": "webauthn.create"}, RefusalReason.WRONG_CEREMONY),
    ("other-statement", _other_challenge, RefusalReason.WRONG_CHALLENGE),
    ("cross-origin-site", {"origin": "https://evil.example"}, RefusalReason.WRONG_ORIGIN),
    ("cross-origin-iframe", {"cross_origin": True}, RefusalReason.WRONG_ORIGIN),
    ("cross-origin-as-text", CROSS_ORIGIN_TEXT, RefusalReason.PASSKEY_MALFORMED),
    ("client-data-duplicate-type", DUPLICATE_TYPE, RefusalReason.PASSKEY_MALFORMED),
    ("client-data-duplicate-nested", DUPLICATE_NESTED, RefusalReason.PASSKEY_MALFORMED),
    ("other-rp", {"rp": "evil.example"}, RefusalReason.WRONG_RP),
    ("user-not-present", {"present": False}, RefusalReason.USER_NOT_PRESENT),
    (
        "other-credential",
        _field("credential_id", b64url(b"x" * 32)),
        RefusalReason.WRONG_CREDENTIAL,
    ),
    ("flipped-signature", _flip_signature, RefusalReason.BAD_SIGNATURE),
    (
        "also-ed25519-signature",
        lambda raw: raw.update(signature="A" * 86 + "=="),
        RefusalReason.BAD_SIGNATURE,
    ),
]


@pytest.mark.parametrize(
    ("attack", "reason"), [(a, r) for _, a, r in HOSTILE], ids=[n for n, _, _ in HOSTILE]
)
def test_a_hostile_assertion_is_refused_with_its_reason(attack: Any, reason: RefusalReason) -> None:
    device = SoftAuthenticator()
    key = enroll(device)
    if isinstance(attack, dict):
        raw = body(device, key, **attack)
    elif attack.__code__.co_argcount == 2:
        raw = attack(device, key)
    else:
        raw = body(device, key)
        attack(raw)
    got = verdict(raw, key)
    assert not got.accepted and got.refusal is not None
    assert got.refusal.reason is reason, got.refusal.detail
    # The untouched assertion of the same device is accepted: the attack is what failed.
    assert verdict(body(device, key), key).accepted


def test_an_assertion_replayed_onto_another_saga_step_or_payload_is_refused() -> None:
    device = SoftAuthenticator()
    key = enroll(device)
    raw = body(device, key)
    other = ApprovalRequest.for_call("saga-b", 3, "pay", {"iban": "GB33", "amount": 9}, NOW)
    for name, value in [
        ("saga_id", "saga-b"),
        ("step", 3),
        ("payload_sha256", other.payload_sha256),
    ]:
        moved = raw | {name: value}
        parsed = parse_decision(moved, approve=None)
        target = ApprovalRequest.for_call(
            moved["saga_id"], moved["step"], "pay",
            {"iban": "GB33", "amount": 9} if name == "payload_sha256" else REQUEST.payload,
            NOW,
        )  # fmt: skip
        lookup = KeyLookup(configured=True, version=1, sha256="0" * 64, key=key)
        got = judge(
            target, parsed, context=JudgeContext(now=NOW + timedelta(seconds=10), lookup=lookup)
        )  # type: ignore[arg-type]
        assert got.refusal is not None and got.refusal.reason is RefusalReason.WRONG_CHALLENGE, name


def test_the_key_kind_approver_validity_and_policy_still_apply() -> None:
    device = SoftAuthenticator()
    key = enroll(device)
    ed = SigningKey.generate("alice")
    ed_key = (
        ApproverRegistry(version=1, keys=[])
        .enroll("alice", ed.public_key, valid_from=NOW - timedelta(days=1))
        .keys[0]
    )
    # An Ed25519 signature under a passkey's key id, and an assertion naming an Ed25519 key.
    ed_body = sign_action(ed, approving(), NOW).body()
    assert (
        verdict(ed_body | {"key_id": key.key_id}, key).refusal.reason
        is RefusalReason.WRONG_KEY_KIND
    )  # type: ignore[union-attr]
    naming_ed = PasskeyDraft(draft_for(key).action.model_copy(update={"key_id": ed_key.key_id}))
    raw = passkey_signed(naming_ed, device.get(naming_ed.challenge, ORIGIN, RP)).model_dump(
        mode="json"
    )
    assert verdict(raw, ed_key).refusal.reason is RefusalReason.WRONG_KEY_KIND  # type: ignore[union-attr]
    # A statement naming bob, signed with alice's passkey.
    draft = draft_for(key)
    as_bob = PasskeyDraft(draft.action.model_copy(update={"approver": "bob"}))
    raw = passkey_signed(as_bob, device.get(as_bob.challenge, ORIGIN, RP)).model_dump(mode="json")
    assert verdict(raw, key).refusal.reason is RefusalReason.APPROVER_MISMATCH  # type: ignore[union-attr]
    revoked = key.model_copy(update={"revoked_at": NOW})
    assert verdict(body(device, key), revoked).refusal.reason is RefusalReason.KEY_NOT_VALID  # type: ignore[union-attr]
    assert verdict(body(device, key), None).refusal.reason is RefusalReason.UNKNOWN_KEY  # type: ignore[union-attr]
    need = ApprovalRequirement(groups=frozenset({"treasury"}))
    assert (
        verdict(body(device, key), key, requirement=need).refusal.reason
        is RefusalReason.NOT_IN_GROUP
    )  # type: ignore[union-attr]
    as_requester = verdict(body(device, key), key, requester="alice")
    assert as_requester.refusal.reason is RefusalReason.REQUESTER_CANNOT_APPROVE  # type: ignore[union-attr]


def test_flags_record_user_verification_and_the_counter() -> None:
    device = SoftAuthenticator(user_verified=False, counter=41)
    key = enroll(device)
    raw = body(device, key)
    assert verdict(raw, key).accepted  # UV is recorded, not required
    flags = parse_decision(raw, approve=None).passkey.flags()  # type: ignore[union-attr]
    assert (flags.user_present, flags.user_verified, flags.sign_count) == (True, False, 42)


def test_keys_list_names_a_passkey_and_its_rp(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from sagacity.worker.cli._main import app

    path = tmp_path / "approvers.json"
    ed = SigningKey.generate("bob")
    ApproverRegistry(version=1, keys=[]).enroll("bob", ed.public_key, valid_from=NOW).save(path)
    key = enroll(SoftAuthenticator())
    enroll_passkey(path, key)
    out = CliRunner().invoke(app, ["keys", "list", "--registry", str(path)])
    assert out.exit_code == 0, out.output
    lines = {line.split()[0]: line for line in out.output.splitlines()[1:]}
    assert "passkey rp=localhost" in lines[key.key_id]
    assert "passkey" not in lines[ed.key_id]


def test_an_assertion_with_well_formed_extensions_is_accepted() -> None:
    device = SoftAuthenticator()
    key = enroll(device)
    raw = body(device, key, extra_flags=0x80, tail=cbor2.dumps({"credProtect": 1}))
    assert verdict(raw, key).accepted


def test_clientdata_written_by_hand_but_well_formed_is_accepted() -> None:
    """The strict reading refuses the odd spellings above, not hand-written JSON: the same
    members, each once, crossOrigin a JSON false, signed by the device, is accepted."""
    device = SoftAuthenticator()
    key = enroll(device)
    assert verdict(HONEST_SPELLED(device, key), key).accepted


@pytest.mark.parametrize(
    ("make", "says"),
    [(CROSS_ORIGIN_TEXT, "crossOrigin"), (DUPLICATE_TYPE, "'type' twice")],
    ids=["cross-origin-as-text", "duplicate-type"],
)
def test_the_offline_check_refuses_the_same_clientdata(make: Any, says: str) -> None:
    """verify-file re-checks a journaled assertion with check_assertion (sagacity.
    decision_audit), the function the saga judges with: the same bytes, the same refusal."""
    device = SoftAuthenticator()
    key = enroll(device)
    raw = make(device, key)
    parsed = parse_decision(raw, approve=None)
    assert not isinstance(parsed, Refusal) and parsed.passkey is not None
    got = check_assertion(parsed.passkey, key, parsed.statement())
    assert isinstance(got, PasskeyFailure), got
    assert got.reason is RefusalReason.PASSKEY_MALFORMED and says in got.detail
