"""Passkey-signed resolutions of dirty state without servers: a software authenticator
signs the resolution statement's SHA-256, and the same pure judge the workflow runs
accepts it, or refuses it with a typed reason (another statement's assertion, another
saga, a person the policy does not allow, the requester, a body signed twice over)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from sagacity.approval._models import RefusalReason, Verdict
from sagacity.approval._passkey_check import statement_challenge
from sagacity.approval._passkey_models import b64url
from sagacity.approval._passkeys import (
    PasskeyAssertionError,
    PasskeyDraft,
    draft_options,
    passkey_draft,
    passkey_signed,
)
from sagacity.approval._registry import ApproverRegistry, EnrolledKey
from sagacity.approval._registry_file import KeyLookup
from sagacity.approval._resolutions import (
    DeskView,
    DirtyKind,
    Resolution,
    ResolutionContext,
    ResolutionPolicy,
)
from sagacity.approval._signed_action import sign_action
from sagacity.approval._signing import SigningKey
from tests.integration.approval.passkeys.test_passkey_checks import NOW, ORIGIN, RP, enroll
from tests.support.resolutions import judged
from tests.support.soft_authenticator import SoftAuthenticator

SAGA = "refund-saga-1"
VIEW = DeskView(
    saga_id=SAGA,
    waiting_since=NOW,
    dirty={2: DirtyKind.UNKNOWN_OUTCOME, 3: DirtyKind.COMPENSATION_FAILED},
)
OPS = ResolutionPolicy(groups=["ops"])


def signed_body(
    device: SoftAuthenticator, key: EnrolledKey, *, origin: str = ORIGIN, **fields: Any
) -> dict[str, Any]:
    """What the inbox sends: the draft, the options' challenge, the device's assertion."""
    action = Resolution(**{"saga_id": SAGA, "action": "happened", "step": 2,
                           "result": {"psp": "paid 250"}, "reason": "the PSP shows it",
                           **fields})  # fmt: skip
    draft = passkey_draft(action, key, NOW + timedelta(seconds=5))
    options = draft_options(draft, key)
    assert options["challenge"] == b64url(statement_challenge(draft.statement))
    return passkey_signed(draft, device.get(options["challenge"], origin, RP)).body()


def verdict(
    raw: Any,
    key: EnrolledKey | None,
    *,
    policy: ResolutionPolicy = OPS,
    requester: str | None = "rita",
) -> Verdict:
    lookup = KeyLookup(configured=True, version=3, sha256="0" * 64, key=key)
    context = ResolutionContext(
        now=NOW + timedelta(seconds=10), policy=policy, lookup=lookup, requester=requester
    )
    return judged(raw, VIEW, context)


def refused_as(got: Verdict) -> str:
    assert not got.accepted and got.refusal is not None, "accepted, but it must be refused"
    return got.refusal.reason.value


@pytest.fixture(params=[-7, -8], ids=["es256", "eddsa"])
def device(request: pytest.FixtureRequest) -> SoftAuthenticator:
    return SoftAuthenticator(algorithm=request.param)


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"action": "did_not_happen", "result": None},
        {"action": "retry_compensation", "step": 3, "result": None},
        {"action": "accept", "step": None, "steps": [2, 3], "result": None},
    ],
    ids=["happened", "did-not-happen", "retry-compensation", "accept"],
)
def test_a_passkey_resolution_is_accepted_as_its_owner(
    device: SoftAuthenticator, fields: dict[str, Any]
) -> None:
    olivia = enroll(device, "olivia", ("ops",))
    raw = signed_body(device, olivia, **fields)
    assert raw["key_id"] == olivia.key_id and "signature" not in raw
    assert set(raw["passkey"]) >= {"authenticator_data", "client_data_json", "signature"}
    got = verdict(raw, olivia)
    assert got.accepted, got.refusal
    assert got.approver == "olivia" and got.key == olivia


def test_another_statements_assertion_is_refused(device: SoftAuthenticator) -> None:
    """The assertion signs one statement: moved onto another action, step, result,
    reason or time, its challenge is another statement's."""
    olivia = enroll(device, "olivia", ("ops",))
    raw = signed_body(device, olivia)
    moved = {
        "action": {**raw, "action": "did_not_happen", "result": None},
        "result": {**raw, "result": {"psp": "paid 2500"}},
        "reason": {**raw, "reason": "rita said so"},
        "issued_at": {**raw, "issued_at": raw["issued_at"].replace("12:00:05", "12:00:06")},
        "step": {**raw, "action": "retry_compensation", "step": 3, "result": None},
    }
    for name, body in moved.items():
        assert body != raw, name
        assert refused_as(verdict(body, olivia)) == "WRONG_CHALLENGE", name
    assert verdict(raw, olivia).accepted  # the body as signed still counts


def test_another_sagas_resolution_is_refused(device: SoftAuthenticator) -> None:
    olivia = enroll(device, "olivia", ("ops",))
    elsewhere = signed_body(device, olivia, saga_id="another-saga")
    assert refused_as(verdict(elsewhere, olivia)) == "WRONG_SAGA"
    # Its saga_id rewritten to this saga: the assertion still signs the other one.
    assert refused_as(verdict({**elsewhere, "saga_id": SAGA}, olivia)) == "WRONG_CHALLENGE"


def test_a_person_the_policy_does_not_allow_is_refused_with_the_reason(
    device: SoftAuthenticator,
) -> None:
    alice = enroll(device, "alice", ("finance",))
    olivia = enroll(SoftAuthenticator(), "olivia", ("ops",))
    assert refused_as(verdict(signed_body(device, alice), alice)) == "NOT_IN_GROUP"
    named = ResolutionPolicy(resolvers=["oscar"])
    got = verdict(signed_body(device, alice), alice, policy=named)
    assert refused_as(got) == "RESOLVER_NOT_ALLOWED" and "'alice'" in (got.refusal.detail or "")  # type: ignore[union-attr]
    rita_device = SoftAuthenticator(credential_id=b"r" * 32)
    rita = enroll(rita_device, "rita", ("ops",))
    assert refused_as(verdict(signed_body(rita_device, rita), rita)) == "REQUESTER_CANNOT_RESOLVE"
    # A passkey signs for its owner only: alice's assertion under olivia's name.
    body = signed_body(device, alice)
    assert refused_as(verdict({**body, "actor": "olivia"}, alice)) == "WRONG_CHALLENGE"
    # Alice's assertion presented under olivia's key: not olivia's credential.
    assert refused_as(verdict({**body, "key_id": olivia.key_id}, olivia)) == "WRONG_CREDENTIAL"


def test_hostile_bodies_are_refused_never_raised(device: SoftAuthenticator) -> None:
    olivia = enroll(device, "olivia", ("ops",))
    raw = signed_body(device, olivia)
    signer = SigningKey.generate("olivia")
    both = {
        **raw,
        "signature": sign_action(
            signer, Resolution(saga_id=SAGA, action="happened", step=2)
        ).body()["signature"],
    }
    assert refused_as(verdict(both, olivia)) == "BAD_SIGNATURE"
    wrong_origin = signed_body(device, olivia, origin="https://evil.example")
    assert refused_as(verdict(wrong_origin, olivia)) == "WRONG_ORIGIN"
    junk = {**raw, "passkey": {**raw["passkey"], "authenticator_data": "!!"}}
    assert refused_as(verdict(junk, olivia)) == "MALFORMED"
    extra = {**raw, "passkey": {**raw["passkey"], "rp_id": "localhost"}}
    assert refused_as(verdict(extra, olivia)) == "MALFORMED"
    [ed25519] = ApproverRegistry().enroll("olivia", signer.public_key, valid_from=NOW,
                                          groups=["ops"]).keys  # fmt: skip
    as_ed25519 = {**raw, "key_id": ed25519.key_id}  # an assertion naming an Ed25519 key
    assert refused_as(verdict(as_ed25519, ed25519)) == "WRONG_KEY_KIND"


def test_a_statement_acts_once_whatever_its_signature() -> None:
    """ECDSA signs one statement with ever new signatures: what is spent is the
    statement, so a second assertion over it is the same resolution again."""
    device = SoftAuthenticator()
    olivia = enroll(device, "olivia", ("ops",))
    draft = passkey_draft(
        Resolution(saga_id=SAGA, action="retry_compensation", step=3), olivia, NOW
    )
    challenge = draft_options(draft, olivia)["challenge"]
    first = passkey_signed(draft, device.get(challenge, ORIGIN, RP), key=olivia).body()
    second = passkey_signed(draft, device.get(challenge, ORIGIN, RP), key=olivia).body()
    assert first["passkey"]["signature"] != second["passkey"]["signature"]
    one, two = (Resolution.model_validate(b) for b in (first, second))
    assert one.acts_once_as() == two.acts_once_as() is not None
    signer = SigningKey.generate("olivia")
    ed = Resolution.model_validate(
        sign_action(signer, Resolution(saga_id=SAGA, action="happened", step=2)).body()
    )
    assert ed.acts_once_as() == ed.signature  # Ed25519 statements: as before


def test_the_draft_round_trips_and_refuses_what_is_not_one(device: SoftAuthenticator) -> None:
    olivia = enroll(device, "olivia", ("ops",))
    draft = passkey_draft(
        Resolution(saga_id=SAGA, action="accept", steps=[2, 3], reason="as is"), olivia, NOW
    )
    again = PasskeyDraft.from_json(draft.to_json(), Resolution)
    assert again.statement == draft.statement and again.challenge == draft.challenge
    with pytest.raises(PasskeyAssertionError, match="not a passkey draft"):
        PasskeyDraft.from_json('{"saga_id": 1}', Resolution)
    with pytest.raises(PasskeyAssertionError) as malformed:
        passkey_draft(Resolution(saga_id=SAGA, action="accept", steps=[2]), olivia)  # no reason
    assert malformed.value.reason is RefusalReason.MALFORMED
    with pytest.raises(PasskeyAssertionError) as not_passkey:
        passkey_draft(
            Resolution(saga_id=SAGA, action="happened", step=2),
            olivia.model_copy(update={"passkey": None}),
        )
    assert not_passkey.value.reason is RefusalReason.WRONG_KEY_KIND
    other = enroll(SoftAuthenticator(), "olivia", ("ops",))
    with pytest.raises(PasskeyAssertionError):
        draft_options(draft, other)
    challenge = draft_options(draft, olivia)["challenge"]
    # Checked before sending, as the saga will check it: another origin is refused here.
    with pytest.raises(PasskeyAssertionError) as early:
        passkey_signed(draft, device.get(challenge, "http://localhost:1", RP), key=olivia).body()
    assert early.value.reason is RefusalReason.WRONG_ORIGIN
