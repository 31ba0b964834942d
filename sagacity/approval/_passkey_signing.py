"""Signing any human action with a passkey: the draft of the action (every field but
the assertion), its WebAuthn challenge and authentication options, and the action built
from what the browser's `navigator.credentials.get()` returns.

One path for every kind of signed action (a decision, a resolution of dirty state, and
whatever comes next): the statement is the action's (SignedAction.statement) naming the
passkey's key id, so it is one statement per passkey, and the challenge is
SHA-256(statement_bytes(statement)). The page picks the person's passkey before asking
the browser, and the options allow exactly that credential. The draft is plain data
(`to_json`/`from_json`), so a web page can keep it in its session between showing the
request and receiving the assertion; `issued_at` is fixed when the draft is made.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import ValidationError as PydanticValidationError

from sagacity._errors import SagacityError
from sagacity.approval._judge import parse_decision
from sagacity.approval._models import ApprovalDecision, Refusal, RefusalReason
from sagacity.approval._passkey_check import PasskeyFailure, check_assertion, statement_challenge
from sagacity.approval._passkey_models import CREDENTIAL_ID_MAX_BYTES, PasskeyAssertion, unb64url
from sagacity.approval._registry import EnrolledKey
from sagacity.approval._resolutions import Resolution, parse_resolution
from sagacity.approval._signed_action import SignedAction
from sagacity.approval._statements import now_text

CREDENTIAL_MAX_BYTES = 16_384
"""A browser's credential JSON larger than this is refused before it is parsed."""

A = TypeVar("A", bound=SignedAction)


class PasskeyAssertionError(SagacityError, ValueError):
    """The browser's assertion cannot make this action: malformed, or (when checked
    before sending) refused for `reason`, the RefusalReason the saga would journal."""

    def __init__(self, message: str, reason: RefusalReason = RefusalReason.PASSKEY_MALFORMED):
        super().__init__(message)
        self.reason = reason


_PARSERS: dict[type[SignedAction], Callable[[object], SignedAction | Refusal]] = {
    ApprovalDecision: lambda raw: parse_decision(raw, approve=None),
    Resolution: parse_resolution,
}
"""How the saga parses each kind of action: a draft is parsed the same way, so a
malformed action is refused here with the reason the saga would give."""


def _parse(kind: type[A], raw: object) -> A:
    parser = _PARSERS.get(kind)
    if parser is None:
        raise PasskeyAssertionError(f"no passkey signing for actions of kind {kind.__name__}")
    parsed = parser(raw)
    if isinstance(parsed, Refusal):
        raise PasskeyAssertionError(parsed.detail, parsed.reason)
    assert isinstance(parsed, kind)
    return parsed


@dataclass(frozen=True)
class PasskeyDraft(Generic[A]):
    """An action waiting for its passkey assertion: every field but the assertion."""

    action: A

    @property
    def statement(self) -> dict[str, Any]:
        return self.action.statement()

    @property
    def challenge(self) -> bytes:
        """SHA-256 of the statement's canonical bytes: the WebAuthn challenge."""
        return statement_challenge(self.statement)

    def to_json(self) -> str:
        return json.dumps(self.action.model_dump(mode="json"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str, kind: type[A]) -> PasskeyDraft[A]:
        """The draft of a `kind` action `to_json` wrote (PasskeyAssertionError when it
        is not one)."""
        try:
            raw = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise PasskeyAssertionError(f"not a passkey draft: {exc}") from None
        try:
            parsed = _parse(kind, raw)
        except PasskeyAssertionError as exc:
            raise PasskeyAssertionError(f"not a passkey draft: {exc}") from None
        if parsed.passkey is not None or parsed.signature is not None or not parsed.key_id:
            raise PasskeyAssertionError("not a passkey draft (signed, or no key id)")
        return cls(parsed)


def passkey_draft(action: A, key: EnrolledKey, now: datetime | None = None) -> PasskeyDraft[A]:
    """The draft of `key`'s owner's `action` (for a decision: the pending approval's
    saga_id, step, tool and payload_sha256 as the saga shows them; for a resolution: one
    `step`, or for `accept` the `steps` they saw dirty and a reason). The person and the
    key id come from `key`; a malformed action is refused with the saga's reason."""
    if key.passkey is None:
        raise PasskeyAssertionError(
            f"key {key.key_id} is not a passkey", RefusalReason.WRONG_KEY_KIND
        )
    if action.person and action.person != key.approver:
        raise PasskeyAssertionError(
            f"the action names {action.person!r}, but passkey {key.key_id} is enrolled to "
            f"{key.approver!r}: a key speaks only for its owner",
            RefusalReason.APPROVER_MISMATCH,
        )
    body = action.body()
    body.update({action.SIGNER: key.approver, "issued_at": now_text(now), "key_id": key.key_id})
    body.pop("signature", None)
    body.pop("passkey", None)
    return PasskeyDraft(_parse(type(action), body))


def authentication_options(
    *,
    keys: list[EnrolledKey],
    challenge: bytes,
    user_verification: str = "preferred",
    timeout_ms: int = 120_000,
) -> dict[str, Any]:
    """PublicKeyCredentialRequestOptions as JSON (binary fields base64url), for the
    page's `PublicKeyCredential.parseRequestOptionsFromJSON`: allowCredentials = `keys`
    (passkeys of one RP id), the challenge given (a draft's `challenge`)."""
    from webauthn import generate_authentication_options, options_to_json
    from webauthn.helpers.structs import (
        PublicKeyCredentialDescriptor,
        UserVerificationRequirement,
    )

    passkeys = [k.passkey for k in keys if k.passkey is not None]
    if not passkeys or len(passkeys) != len(keys):
        raise PasskeyAssertionError(
            "authentication options need at least one key, all passkeys",
            RefusalReason.WRONG_KEY_KIND,
        )
    rp_ids = {p.rp_id for p in passkeys}
    if len(rp_ids) != 1:
        raise PasskeyAssertionError(f"these passkeys belong to several RPs: {sorted(rp_ids)}")
    try:
        options = generate_authentication_options(
            rp_id=rp_ids.pop(),
            challenge=challenge,
            timeout=timeout_ms,
            allow_credentials=[
                PublicKeyCredentialDescriptor(
                    id=unb64url(p.credential_id, "credential id", CREDENTIAL_ID_MAX_BYTES)
                )
                for p in passkeys
            ],
            user_verification=UserVerificationRequirement(user_verification),
        )
    except ValueError as exc:  # an unknown user_verification, an empty challenge
        raise PasskeyAssertionError(f"cannot make authentication options: {exc}") from None
    result: dict[str, Any] = json.loads(options_to_json(options))
    return result


def draft_options(draft: PasskeyDraft[Any], key: EnrolledKey) -> dict[str, Any]:
    """The authentication options of a draft: its challenge, its one passkey."""
    if key.key_id != draft.action.key_id:
        raise PasskeyAssertionError(
            f"the draft names key {draft.action.key_id}, not {key.key_id}",
            RefusalReason.WRONG_CREDENTIAL,
        )
    return authentication_options(keys=[key], challenge=draft.challenge)


def assertion_from_browser(credential: Mapping[str, Any] | str) -> PasskeyAssertion:
    """The assertion of a browser's PublicKeyCredential as JSON (its `toJSON()`: id,
    rawId, type "public-key", response.authenticatorData, clientDataJSON, signature,
    userHandle, all base64url). Raises PasskeyAssertionError naming what is wrong."""
    if isinstance(credential, str):
        if len(credential.encode("utf-8")) > CREDENTIAL_MAX_BYTES:
            raise PasskeyAssertionError(
                f"the credential is larger than {CREDENTIAL_MAX_BYTES} bytes"
            )
        try:
            credential = json.loads(credential)
        except (ValueError, RecursionError) as exc:
            raise PasskeyAssertionError(f"the credential is not JSON ({exc})") from None
    if not isinstance(credential, Mapping):
        raise PasskeyAssertionError("the credential is not a JSON object")
    response = credential.get("response")
    if not isinstance(response, Mapping):
        raise PasskeyAssertionError("the credential has no response object")
    if credential.get("type") != "public-key":
        raise PasskeyAssertionError('the credential\'s type is not "public-key"')
    raw_id, cid = credential.get("rawId"), credential.get("id")
    if raw_id is not None and raw_id != cid:
        raise PasskeyAssertionError("the credential's id and rawId differ")
    try:
        return PasskeyAssertion.model_validate(
            {
                "credential_id": cid,
                "authenticator_data": response.get("authenticatorData"),
                "client_data_json": response.get("clientDataJSON"),
                "signature": response.get("signature"),
                "user_handle": response.get("userHandle") or None,
            }
        )
    except PydanticValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in exc.errors(include_url=False, include_input=False)[:5]
        )
        raise PasskeyAssertionError(f"the assertion is malformed: {problems}") from None


def passkey_signed(
    draft: PasskeyDraft[A],
    credential: Mapping[str, Any] | str | PasskeyAssertion,
    *,
    key: EnrolledKey | None = None,
) -> A:
    """The action to send (SagaClient.send, or its update/signal as `action.body()`):
    the draft with the browser's assertion. Given the enrolled `key`, the assertion is
    checked first, exactly as the saga will (PasskeyAssertionError with the
    RefusalReason it would journal)."""
    assertion = (
        credential
        if isinstance(credential, PasskeyAssertion)
        else assertion_from_browser(credential)
    )
    action = draft.action.model_copy(update={"passkey": assertion})
    if key is not None:
        if key.key_id != action.key_id:
            raise PasskeyAssertionError(
                f"the draft names key {action.key_id}, not {key.key_id}",
                RefusalReason.UNKNOWN_KEY,
            )
        checked = check_assertion(assertion, key, action.statement())
        if isinstance(checked, PasskeyFailure):
            raise PasskeyAssertionError(checked.detail, checked.reason)
    return action


__all__ = [
    "PasskeyAssertionError",
    "PasskeyDraft",
    "assertion_from_browser",
    "authentication_options",
    "draft_options",
    "passkey_draft",
    "passkey_signed",
]
