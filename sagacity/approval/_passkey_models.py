"""Passkeys (WebAuthn credentials) as data: the enrolled credential and a decision's
assertion, with every field bounded and spelled one way.

A passkey is the second kind of key the approver registry enrolls (sagacity.approval._registry):
besides the owner, groups and validity every key has, it carries the credential id the
browser names it by, the relying party (RP id) it was made for and the origins a
signature may come from. Its public key (COSE, as the authenticator reported it at
enrollment) is the key's `public_key`, and its key id is derived from that public key
(`passkey_key_id`), so an enrolled id cannot be moved to another key.

An assertion is what `navigator.credentials.get()` returns, base64url fields without
padding: it travels inside a decision (`ApprovalDecision.passkey`) and is journaled
with it, so an auditor re-checks it offline. Everything here is pure.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from sagacity._errors import SagacityError

ES256: Literal[-7] = -7
EDDSA: Literal[-8] = -8
PASSKEY_ALGORITHMS = (ES256, EDDSA)
"""COSE algorithms a passkey may use: ECDSA P-256 with SHA-256 (what every platform
authenticator offers) and Ed25519."""

CREDENTIAL_ID_MAX_BYTES = 1_023  # WebAuthn Level 3: a credential id is at most 1023 bytes
AUTHENTICATOR_DATA_MAX_BYTES = 1_024
CLIENT_DATA_MAX_BYTES = 2_048
SIGNATURE_MAX_BYTES = 128
USER_HANDLE_MAX_BYTES = 64
COSE_KEY_MAX_BYTES = 256
MAX_ORIGINS = 16

_B64URL = re.compile(r"[A-Za-z0-9_-]*")


class PasskeyMaterialError(SagacityError, ValueError):
    """Passkey material (a COSE key, base64url text) that is not well-formed."""


def b64url(data: bytes) -> str:
    """base64url without padding, as WebAuthn's JSON spells binary fields."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64url(text: str, what: str, max_bytes: int) -> bytes:
    """Decode base64url (no padding) spelled one way only, at most `max_bytes` bytes."""
    if not isinstance(text, str) or len(text) > _chars(max_bytes):
        raise PasskeyMaterialError(f"{what} is longer than {max_bytes} bytes of base64url")
    if _B64URL.fullmatch(text) is None or len(text) % 4 == 1:
        raise PasskeyMaterialError(f"{what} is not base64url (A-Z a-z 0-9 - _, no padding)")
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise PasskeyMaterialError(f"{what} is not valid base64url ({exc})") from None
    if b64url(data) != text:  # unused trailing bits set: another spelling of the same bytes
        raise PasskeyMaterialError(f"{what} is not canonical base64url")
    return data


def _checked(what: str, max_bytes: int, min_bytes: int = 0) -> AfterValidator:
    def check(value: str) -> str:
        if len(unb64url(value, what, max_bytes)) < min_bytes:
            raise ValueError(f"{what} is shorter than {min_bytes} bytes")
        return value

    return AfterValidator(check)


def _chars(max_bytes: int) -> int:
    return (max_bytes * 4 + 2) // 3


CredentialId = Annotated[
    str,
    Field(max_length=_chars(CREDENTIAL_ID_MAX_BYTES)),
    _checked("credential id", CREDENTIAL_ID_MAX_BYTES, 1),
]
_AuthenticatorData = Annotated[
    str,
    Field(max_length=_chars(AUTHENTICATOR_DATA_MAX_BYTES)),
    _checked("authenticator_data", AUTHENTICATOR_DATA_MAX_BYTES, 37),
]
_ClientData = Annotated[
    str,
    Field(max_length=_chars(CLIENT_DATA_MAX_BYTES)),
    _checked("client_data_json", CLIENT_DATA_MAX_BYTES, 2),
]
_Signature = Annotated[
    str,
    Field(max_length=_chars(SIGNATURE_MAX_BYTES)),
    _checked("signature", SIGNATURE_MAX_BYTES, 8),
]
_UserHandle = Annotated[
    str,
    Field(max_length=_chars(USER_HANDLE_MAX_BYTES)),
    _checked("user_handle", USER_HANDLE_MAX_BYTES),
]


def _origin(value: str) -> str:
    # An origin is scheme://host[:port], nothing else; http only for localhost (a secure
    # context browsers allow WebAuthn on), https everywhere else.
    if re.fullmatch(r"https://[a-z0-9.-]+(:[0-9]{1,5})?", value) is None and (
        re.fullmatch(r"http://localhost(:[0-9]{1,5})?", value) is None
    ):
        raise ValueError(
            "an origin is https://HOST[:PORT] in lowercase (http only for localhost), with no path"
        )
    return value


_RpId = Annotated[
    str, Field(min_length=1, max_length=253, pattern=r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$")
]
_Origin = Annotated[str, Field(max_length=300), AfterValidator(_origin)]


class PasskeyCredential(BaseModel):
    """What the registry knows about a passkey beyond its public key: how the browser
    names it, for which relying party it was made, and where a signature may come from."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    credential_id: CredentialId
    algorithm: Literal[-7, -8]
    rp_id: _RpId
    origins: Annotated[list[_Origin], Field(min_length=1, max_length=MAX_ORIGINS)]


class PasskeyAssertion(BaseModel):
    """A WebAuthn assertion as a decision carries it (base64url fields of the browser's
    `AuthenticatorAssertionResponse`). Bounded, strict, no other field."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    credential_id: CredentialId
    authenticator_data: _AuthenticatorData
    client_data_json: _ClientData
    signature: _Signature
    user_handle: _UserHandle | None = None

    def flags(self) -> AssertionFlags:
        """The authenticator's flags and counter (authenticatorData bytes 32..36)."""
        data = unb64url(self.authenticator_data, "authenticator_data", AUTHENTICATOR_DATA_MAX_BYTES)
        return AssertionFlags(
            user_present=bool(data[32] & 0x01),
            user_verified=bool(data[32] & 0x04),
            sign_count=int.from_bytes(data[33:37], "big"),
        )


class AssertionFlags(BaseModel):
    """What an assertion says about the person and the authenticator: user present (UP),
    user verified (UV: a PIN or biometric), and its signature counter (often 0)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    user_present: bool
    user_verified: bool
    sign_count: int


def cose_public_key(cose: bytes) -> tuple[Literal[-7, -8], Any]:
    """(COSE algorithm, `cryptography` public key) of a COSE_Key an authenticator
    reported, for the algorithms a passkey may use; PasskeyMaterialError otherwise."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519
    from webauthn.helpers import decode_credential_public_key, decoded_public_key_to_cryptography
    from webauthn.helpers.decode_credential_public_key import (
        DecodedEC2PublicKey,
        DecodedOKPPublicKey,
    )

    if not cose or len(cose) > COSE_KEY_MAX_BYTES or cose[0] == 0x04:
        raise PasskeyMaterialError("the passkey's public key is not a COSE_Key of its size")
    try:
        decoded = decode_credential_public_key(cose)
        public = decoded_public_key_to_cryptography(decoded)
    except Exception as exc:  # the library raises many kinds on garbage CBOR: all a refusal
        raise PasskeyMaterialError(f"the passkey's public key is not a COSE_Key ({exc})") from None
    ec2 = isinstance(decoded, DecodedEC2PublicKey) and decoded.alg == ES256
    if ec2 and isinstance(public, ec.EllipticCurvePublicKey) and public.curve.name == "secp256r1":
        return ES256, public
    okp = isinstance(decoded, DecodedOKPPublicKey) and decoded.alg == EDDSA
    if okp and isinstance(public, ed25519.Ed25519PublicKey):
        return EDDSA, public
    raise PasskeyMaterialError(
        "the passkey's public key is neither ES256 (P-256) nor EdDSA (Ed25519); enroll a "
        "passkey made with one of those"
    )


def passkey_key_id(cose: bytes) -> str:
    """The key id of a passkey: the first 16 hex digits of the SHA-256 of its public key
    as DER SubjectPublicKeyInfo (one encoding per key, whatever CBOR the authenticator
    used; never 32 bytes, so never an Ed25519 approver key's input)."""
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    _, public = cose_public_key(cose)
    spki = public.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(spki).hexdigest()[:16]


__all__ = [
    "EDDSA",
    "ES256",
    "PASSKEY_ALGORITHMS",
    "AssertionFlags",
    "PasskeyAssertion",
    "PasskeyCredential",
    "PasskeyMaterialError",
    "b64url",
    "cose_public_key",
    "passkey_key_id",
    "unb64url",
]
