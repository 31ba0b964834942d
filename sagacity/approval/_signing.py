"""Ed25519 keys of people: what signs a decision, and how anyone checks it.

An approver's key pair is made on the approver's machine (`sagacity keys new`): the
private key is written to a file only its owner can read (mode 0600) and never leaves
that machine; the public key goes into the approver registry (sagacity.approval._registry). Keys are
named by their key id, the first 16 hex digits of the SHA-256 of the raw 32-byte public
key, so a key id cannot be moved to another key: a registry entry whose id is not its
key's is refused when the registry loads.

Verification is pure and deterministic (the same bytes, the same answer), so a workflow
can check a signature in its own code and replay the check.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from sagacity._errors import SagacityError
from sagacity.approval._key_files import read_private, write_private

KEY_FILE_TYPE = "sagacity/approver-key/v1"
KEY_ID_HEX = 16


class KeyFileError(SagacityError, ValueError):
    """A key file that cannot be read as a sagacity signing key."""


class KeyMaterialError(SagacityError, ValueError):
    """A public key or signature that is not well-formed Ed25519 material."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, size: int, what: str) -> bytes:
    if not isinstance(text, str) or not text.isascii():
        raise KeyMaterialError(f"{what} must be base64 text")
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise KeyMaterialError(f"{what} is not valid base64 ({exc})") from None
    if len(data) != size or _b64(data) != text:  # one spelling per value: no padding games
        raise KeyMaterialError(f"{what} must be {size} bytes in standard base64")
    return data


def key_id_of(public_key_b64: str) -> str:
    """The key id of a base64 raw Ed25519 public key."""
    raw = _unb64(public_key_b64, 32, "public key")
    return hashlib.sha256(raw).hexdigest()[:KEY_ID_HEX]


def verify_signature(public_key_b64: str, message: bytes, signature_b64: str) -> bool:
    """Whether `signature_b64` is an Ed25519 signature of `message` by that key. Malformed
    material is a False, never an exception: a refusal must not raise."""
    try:
        public = Ed25519PublicKey.from_public_bytes(_unb64(public_key_b64, 32, "public key"))
        public.verify(_unb64(signature_b64, 64, "signature"), message)
    except (InvalidSignature, KeyMaterialError, ValueError):
        return False
    return True


@dataclass(frozen=True)
class SigningKey:
    """An approver's private key, with the identity it was made for. Its repr never
    shows the key."""

    approver: str
    key_id: str
    public_key: str
    _private: Ed25519PrivateKey = field(repr=False)

    @classmethod
    def generate(cls, approver: str) -> SigningKey:
        private = Ed25519PrivateKey.generate()
        public = _b64(private.public_key().public_bytes_raw())
        return cls(approver, key_id_of(public), public, private)

    def sign(self, message: bytes) -> str:
        """The base64 Ed25519 signature of `message`."""
        return _b64(self._private.sign(message))

    def to_file(self, path: Path) -> None:
        """Write the key to a new file readable by its owner only (0600). An existing file
        is never overwritten: losing a key to a typo is not recoverable."""
        record = {
            "type": KEY_FILE_TYPE,
            "approver": self.approver,
            "key_id": self.key_id,
            "public_key": self.public_key,
            "private_key": _b64(self._private.private_bytes_raw()),
        }
        write_private(path, record, KeyFileError)

    @classmethod
    def from_file(cls, path: Path) -> SigningKey:
        """Read a key written by `to_file`. Refuses a file others can read (as ssh does):
        a key anyone on the machine could copy does not identify its owner."""
        record = read_private(path, KEY_FILE_TYPE, KeyFileError)
        try:
            private = Ed25519PrivateKey.from_private_bytes(
                _unb64(record["private_key"], 32, "private key")
            )
            approver = record["approver"]
            if not isinstance(approver, str) or not approver:
                raise ValueError("no approver")
        except (ValueError, KeyError, TypeError) as exc:
            raise KeyFileError(
                f"{path} is not a sagacity key file ({exc}); make one with "
                "`sagacity keys new --approver YOU`"
            ) from None
        public = _b64(private.public_key().public_bytes_raw())
        key = cls(approver, key_id_of(public), public, private)
        if record.get("key_id") != key.key_id or record.get("public_key") != public:
            raise KeyFileError(f"{path}: its key id or public key is not its private key's")
        return key


__all__ = [
    "KeyFileError",
    "KeyMaterialError",
    "SigningKey",
    "key_id_of",
    "verify_signature",
]
