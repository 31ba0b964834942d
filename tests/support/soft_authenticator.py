"""A software WebAuthn authenticator for tests: an EC P-256 (or Ed25519) key made with
`cryptography`, and the authenticatorData, clientDataJSON and attestation object ('none')
built byte for byte as a browser and a platform authenticator build them."""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from sagacity.approval._passkey_models import b64url
from sagacity.approval._passkeys import (
    PasskeyDraft,
    draft_options,
    new_challenge,
    passkey_signed,
    registration_options,
    verify_registration,
)
from sagacity.approval._registry import EnrolledKey

FLAG_UP, FLAG_UV, FLAG_AT = 0x01, 0x04, 0x40

A = TypeVar("A")


@dataclass
class SoftAuthenticator:
    """One credential on one device. `flags` and `counter` are what it reports."""

    algorithm: int = -7
    credential_id: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    counter: int = 0
    user_verified: bool = True
    _key: Any = None

    def __post_init__(self) -> None:
        if self._key is None:
            self._key = (
                ec.generate_private_key(ec.SECP256R1())
                if self.algorithm == -7
                else ed25519.Ed25519PrivateKey.generate()
            )

    @property
    def cose_key(self) -> bytes:
        public = self._key.public_key()
        if self.algorithm == -7:
            numbers = public.public_numbers()
            return cbor2.dumps(
                {
                    1: 2,
                    3: -7,
                    -1: 1,
                    -2: numbers.x.to_bytes(32, "big"),
                    -3: numbers.y.to_bytes(32, "big"),
                }
            )
        return cbor2.dumps({1: 1, 3: -8, -1: 6, -2: public.public_bytes_raw()})

    def _flags(self, present: bool = True) -> int:
        return (FLAG_UP if present else 0) | (FLAG_UV if self.user_verified else 0)

    def _sign(self, data: bytes) -> bytes:
        if self.algorithm == -7:
            return bytes(self._key.sign(data, ec.ECDSA(hashes.SHA256())))
        return bytes(self._key.sign(data))

    def create(self, options: dict[str, Any], origin: str) -> dict[str, Any]:
        """navigator.credentials.create(options).toJSON(), attestation 'none'."""
        rp_id = options["rp"]["id"]
        client_data = json.dumps(
            {
                "type": "webauthn.create",
                "challenge": options["challenge"],
                "origin": origin,
                "crossOrigin": False,
            },
            separators=(",", ":"),
        ).encode()
        attested = (
            bytes(16)  # AAGUID: none
            + len(self.credential_id).to_bytes(2, "big")
            + self.credential_id
            + self.cose_key
        )
        auth_data = (
            hashlib.sha256(rp_id.encode()).digest()
            + bytes([self._flags() | FLAG_AT])
            + self.counter.to_bytes(4, "big")
            + attested
        )
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})
        return self._credential(
            {
                "clientDataJSON": b64url(client_data),
                "attestationObject": b64url(attestation),
                "transports": ["internal"],
            }
        )

    def get(
        self,
        challenge: bytes | str,
        origin: str,
        rp_id: str,
        *,
        kind: str = "webauthn.get",
        present: bool = True,
        cross_origin: bool = False,
        client_data: bytes | None = None,
        extra_flags: int = 0,
        tail: bytes = b"",
    ) -> dict[str, Any]:
        """navigator.credentials.get(...).toJSON() over `challenge` (bytes, or the
        base64url text of the options). The keyword arguments make what a broken or
        hostile client would: another ceremony, origin or RP, no user presence, other
        flags and bytes in authenticatorData, a clientDataJSON of its own."""
        text = challenge if isinstance(challenge, str) else b64url(challenge)
        if client_data is None:
            client_data = json.dumps(
                {"type": kind, "challenge": text, "origin": origin, "crossOrigin": cross_origin},
                separators=(",", ":"),
            ).encode()
        if self.counter:
            self.counter += 1
        auth_data = (
            hashlib.sha256(rp_id.encode()).digest()
            + bytes([self._flags(present) | extra_flags])
            + self.counter.to_bytes(4, "big")
            + tail  # extensions (flag 0x80) or whatever a forger appends, signed all the same
        )
        signature = self._sign(auth_data + hashlib.sha256(client_data).digest())
        return self._credential(
            {
                "clientDataJSON": b64url(client_data),
                "authenticatorData": b64url(auth_data),
                "signature": b64url(signature),
                "userHandle": None,
            }
        )

    def _credential(self, response: dict[str, Any]) -> dict[str, Any]:
        """The PublicKeyCredential JSON around a ceremony's `response`, as a platform
        authenticator's browser gives it for create and get alike."""
        cid = b64url(self.credential_id)
        return {
            "id": cid,
            "rawId": cid,
            "type": "public-key",
            "response": response,
            "clientExtensionResults": {},
            "authenticatorAttachment": "platform",
        }


def enrolled_key(
    device: SoftAuthenticator,
    approver: str,
    *,
    rp_id: str,
    rp_name: str,
    origin: str,
    valid_from: datetime,
    groups: Sequence[str],
) -> EnrolledKey:
    """`device`'s credential as `approver` enrolls it: registration options for a fresh
    challenge, the device's answer from `origin`, checked by verify_registration."""
    challenge = new_challenge()
    options = registration_options(
        approver=approver, rp_id=rp_id, rp_name=rp_name, challenge=challenge
    )
    return verify_registration(
        device.create(options, origin), approver=approver, challenge=challenge, rp_id=rp_id,
        origins=[origin], valid_from=valid_from, groups=groups,
    )  # fmt: skip


def signed_with(
    device: SoftAuthenticator,
    draft: PasskeyDraft[A],
    key: EnrolledKey,
    origin: str,
    rp_id: str,
    **get: Any,
) -> A:
    """The draft's action carrying `device`'s assertion over the draft's challenge, made
    from `origin` for `rp_id` (`get` as SoftAuthenticator.get takes it)."""
    options = draft_options(draft, key)
    return passkey_signed(draft, device.get(options["challenge"], origin, rp_id, **get))
