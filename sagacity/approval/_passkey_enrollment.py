"""Enrolling a passkey for an approver: the options a browser's
`navigator.credentials.create()` takes, the check of what it returns (the `webauthn`
package's registration verification), and the registry change that enrolls it.

The caller (the web inbox) keeps the challenge between the two requests (in its
session): a registration response is checked against the challenge it was made for,
the RP id and the origins the passkey will be allowed to sign on. Attestation is 'none':
the registry's administrator decides who a passkey belongs to, not its vendor.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import secrets
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError as PydanticValidationError

from sagacity._errors import SagacityError
from sagacity.approval._passkey_models import (
    PASSKEY_ALGORITHMS,
    PasskeyCredential,
    PasskeyMaterialError,
    b64url,
    passkey_key_id,
)
from sagacity.approval._registry import ApproverRegistry, EnrolledKey, RegistryError

CHALLENGE_BYTES = 32
RESPONSE_MAX_BYTES = 16_384
"""A registration response larger than this (as JSON) is refused before it is parsed."""


class PasskeyRegistrationError(SagacityError, ValueError):
    """A registration response that does not enroll: its challenge, origin, RP, format or
    key is not what was asked for. The message says what and what to do."""


def new_challenge() -> bytes:
    """A fresh random challenge for a registration ceremony (keep it until the answer)."""
    return secrets.token_bytes(CHALLENGE_BYTES)


def user_handle(approver: str) -> bytes:
    """The WebAuthn user.id of an approver: stable, and not their name in clear."""
    return hashlib.sha256(b"sagacity/approver\x00" + approver.encode("utf-8")).digest()


def registration_options(
    *,
    approver: str,
    rp_id: str,
    rp_name: str,
    challenge: bytes,
    exclude: Sequence[EnrolledKey] = (),
    user_verification: str = "preferred",
    timeout_ms: int = 120_000,
) -> dict[str, Any]:
    """PublicKeyCredentialCreationOptions as JSON (binary fields base64url), for the
    page's `PublicKeyCredential.parseCreationOptionsFromJSON`. `exclude`: passkeys the
    approver already has (the authenticator then refuses to make a second one)."""
    from webauthn import generate_registration_options, options_to_json
    from webauthn.helpers.cose import COSEAlgorithmIdentifier
    from webauthn.helpers.structs import (
        AttestationConveyancePreference,
        AuthenticatorSelectionCriteria,
        PublicKeyCredentialDescriptor,
        ResidentKeyRequirement,
        UserVerificationRequirement,
    )

    if len(challenge) < 16:
        raise PasskeyRegistrationError("a challenge is at least 16 random bytes")
    try:
        options = generate_registration_options(
            rp_id=rp_id,
            rp_name=rp_name,
            user_name=approver,
            user_id=user_handle(approver),
            user_display_name=approver,
            challenge=challenge,
            timeout=timeout_ms,
            attestation=AttestationConveyancePreference.NONE,
            authenticator_selection=AuthenticatorSelectionCriteria(
                resident_key=ResidentKeyRequirement.PREFERRED,
                user_verification=UserVerificationRequirement(user_verification),
            ),
            exclude_credentials=[
                PublicKeyCredentialDescriptor(id=_raw_id(k)) for k in exclude if k.passkey
            ],
            supported_pub_key_algs=[COSEAlgorithmIdentifier(a) for a in PASSKEY_ALGORITHMS],
        )
    except ValueError as exc:
        raise PasskeyRegistrationError(f"cannot make registration options: {exc}") from None
    result: dict[str, Any] = json.loads(options_to_json(options))
    return result


def verify_registration(
    response: Mapping[str, Any] | str,
    *,
    approver: str,
    challenge: bytes,
    rp_id: str,
    origins: Sequence[str],
    valid_from: datetime,
    groups: Sequence[str] = (),
    valid_until: datetime | None = None,
    require_user_verification: bool = False,
) -> EnrolledKey:
    """The key to enroll from the browser's answer to `navigator.credentials.create()`
    (its `toJSON()`: id, rawId, type, response.clientDataJSON and attestationObject in
    base64url). Checks, by the `webauthn` package: the challenge, type webauthn.create,
    one of `origins`, the RP id's hash, user present (and verified if required), the
    attestation 'none' or a verifiable one, an ES256 or EdDSA key. Raises
    PasskeyRegistrationError naming what failed."""
    from webauthn import verify_registration_response
    from webauthn.helpers.cose import COSEAlgorithmIdentifier

    text = response if isinstance(response, str) else _json(response)
    if len(text.encode("utf-8")) > RESPONSE_MAX_BYTES:
        raise PasskeyRegistrationError(
            f"the registration response is larger than {RESPONSE_MAX_BYTES} bytes"
        )
    try:
        verified = verify_registration_response(
            credential=text,
            expected_challenge=challenge,
            expected_rp_id=rp_id,
            expected_origin=list(origins),
            require_user_verification=require_user_verification,
            supported_pub_key_algs=[COSEAlgorithmIdentifier(a) for a in PASSKEY_ALGORITHMS],
        )
    except Exception as exc:  # the library raises many kinds on hostile input
        raise PasskeyRegistrationError(
            f"the passkey registration does not verify ({type(exc).__name__}: "
            f"{str(exc)[:300]}); start the enrollment again"
        ) from None
    cose = verified.credential_public_key
    try:
        key_id = passkey_key_id(cose)
        import base64

        return EnrolledKey(
            approver=approver,
            key_id=key_id,
            public_key=base64.b64encode(cose).decode("ascii"),
            groups=sorted(set(groups)),
            valid_from=valid_from,
            valid_until=valid_until,
            passkey=PasskeyCredential(
                credential_id=b64url(verified.credential_id),
                algorithm=_algorithm(cose),
                rp_id=rp_id,
                origins=list(origins),
            ),
        )
    except (PasskeyMaterialError, PydanticValidationError) as exc:
        raise PasskeyRegistrationError(f"cannot enroll this passkey: {exc}") from None


def enroll_passkey(path: Path, key: EnrolledKey) -> ApproverRegistry:
    """Add `key` to the registry file at `path` (the next version), under an exclusive
    lock so two enrollments at once do not lose one; the file is replaced atomically
    (a worker re-reads it for the next decision). Raises RegistryError."""
    if key.passkey is None:
        raise RegistryError(f"key {key.key_id} is not a passkey; use `sagacity keys enroll`")
    lock_path = path.with_name(f".{path.name}.lock")
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            registry = ApproverRegistry.load(path).add(key)
            registry.save(path)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return registry


def _algorithm(cose: bytes) -> Literal[-7, -8]:
    from sagacity.approval._passkey_models import cose_public_key

    return cose_public_key(cose)[0]


def _raw_id(key: EnrolledKey) -> bytes:
    from sagacity.approval._passkey_models import CREDENTIAL_ID_MAX_BYTES, unb64url

    assert key.passkey is not None
    return unb64url(key.passkey.credential_id, "credential id", CREDENTIAL_ID_MAX_BYTES)


def _json(value: Mapping[str, Any]) -> str:
    try:
        return json.dumps(dict(value))
    except (TypeError, ValueError, RecursionError) as exc:
        raise PasskeyRegistrationError(f"the registration response is not JSON ({exc})") from None


__all__ = [
    "PasskeyRegistrationError",
    "enroll_passkey",
    "new_challenge",
    "registration_options",
    "user_handle",
    "verify_registration",
]
