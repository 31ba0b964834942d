"""Ed25519 note keys: who signs a note (NoteSigner, and its key file) and who checks it
(NoteVerifier, in Go's `<name>+<key hash>+<key>` text form); `open_note` keeps only the
signatures of known keys that verify. The note format itself is sagacity.tlog._signed_note."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from sagacity.approval._key_files import read_private, write_private
from sagacity.tlog._signed_note import (
    _HEX8,
    ALG_ED25519,
    ED25519_PUBLIC_BYTES,
    ED25519_SIGNATURE_BYTES,
    KEY_FILE_TYPE,
    NoteError,
    NoteKeyFileError,
    NoteSignature,
    SignedNote,
    _b64,
    _hex,
    _unb64,
    check_key_name,
    check_note_text,
    key_hash,
    parse_note,
)


@dataclass(frozen=True)
class NoteVerifier:
    """A known Ed25519 note key: what `open_note` checks signatures against. Built only
    from consistent parts (the key hash is the name's and key's), so a verifier in hand is
    always well-formed."""

    name: str
    key_hash: bytes
    public_key: bytes

    def __post_init__(self) -> None:
        expected = key_hash(self.name, self.public_key)
        if self.key_hash != expected:
            raise NoteError(
                f"key hash {_hex(self.key_hash)} of {self.name} is not its key's ({expected.hex()})"
            )

    @classmethod
    def from_public_key(cls, name: str, public_key: bytes) -> NoteVerifier:
        """The verifier of a raw 32-byte Ed25519 public key under `name`."""
        return cls(name, key_hash(name, public_key), public_key)

    def encode(self) -> str:
        """The verifier key text `name+hash+base64(0x01 || key)`, as Go's note package
        writes it."""
        material = bytes([ALG_ED25519]) + self.public_key
        return f"{self.name}+{self.key_hash.hex()}+{_b64(material)}"

    @classmethod
    def parse(cls, vkey: str) -> NoteVerifier:
        """Read a verifier key text, strictly: a valid name, the key hash in 8 lower-case
        hex digits, canonical base64 of exactly 0x01 and 32 key bytes, and a key hash that
        is the name's and key's. Anything else is a NoteError."""
        if not isinstance(vkey, str):
            raise NoteError(f"verifier key must be text, not {type(vkey).__name__}")
        parts = vkey.split("+", 2)  # base64 may itself contain "+"; names and hex cannot
        if len(parts) != 3:
            raise NoteError("verifier key is not of the form NAME+HASH+KEY")
        name, hash_hex, material_b64 = parts
        check_key_name(name)
        if not _HEX8.fullmatch(hash_hex):
            raise NoteError(f"verifier key hash {hash_hex!r} is not 8 lower-case hex digits")
        material = _unb64(material_b64, "verifier public key")
        if material[0] != ALG_ED25519:
            raise NoteError(
                f"verifier key type 0x{material[0]:02x} is not Ed25519 (0x{ALG_ED25519:02x})"
            )
        if len(material) != 1 + ED25519_PUBLIC_BYTES:
            raise NoteError(
                f"verifier public key is {len(material) - 1} bytes, not {ED25519_PUBLIC_BYTES}"
            )
        public_key = material[1:]
        if bytes.fromhex(hash_hex) != key_hash(name, public_key):
            raise NoteError(f"verifier key hash {hash_hex} does not match name {name} and key")
        return cls(name, bytes.fromhex(hash_hex), public_key)

    def verify(self, text: bytes, signature: bytes) -> bool:
        """Whether `signature` (the raw Ed25519 signature, without the key hash) signs
        `text` under this key. Malformed input is False, never an exception."""
        try:
            if len(signature) != ED25519_SIGNATURE_BYTES:
                return False
            Ed25519PublicKey.from_public_bytes(self.public_key).verify(
                bytes(signature), bytes(text)
            )
        except (InvalidSignature, ValueError, TypeError):
            return False
        return True


class NoteSigner:
    """An Ed25519 note key: its repr never shows the private key."""

    __slots__ = ("_private", "name", "public_key", "verifier")

    name: str
    public_key: bytes
    verifier: NoteVerifier
    _private: Ed25519PrivateKey

    def __init__(self, name: str, private_key: Ed25519PrivateKey) -> None:
        check_key_name(name)
        if not isinstance(private_key, Ed25519PrivateKey):
            raise NoteError("a note signer needs an Ed25519 private key")
        self.name = name
        self._private = private_key
        self.public_key = private_key.public_key().public_bytes_raw()
        self.verifier = NoteVerifier.from_public_key(name, self.public_key)

    def __repr__(self) -> str:
        return f"NoteSigner({self.verifier.encode()!r})"

    @property
    def key_hash(self) -> bytes:
        return self.verifier.key_hash

    @classmethod
    def generate(cls, name: str) -> NoteSigner:
        """A new random key under `name`."""
        return cls(name, Ed25519PrivateKey.generate())

    @classmethod
    def from_private_bytes(cls, name: str, private_key: bytes) -> NoteSigner:
        """The signer of a raw 32-byte Ed25519 private key (RFC 8032 seed)."""
        if not isinstance(private_key, bytes) or len(private_key) != 32:
            raise NoteError("an Ed25519 private key is 32 bytes")
        return cls(name, Ed25519PrivateKey.from_private_bytes(private_key))

    def sign(self, text: str) -> str:
        """The whole signed note of `text`, which must be a valid note text
        (`check_note_text`). Ed25519 is deterministic: the same text, the same note."""
        check_note_text(text)
        signature = self._private.sign(text.encode("utf-8"))
        return SignedNote(text, (NoteSignature(self.name, self.key_hash, signature),)).encode()

    def to_file(self, path: Path) -> None:
        """Write the key to a new file readable by its owner only (0600). An existing file
        is never overwritten: a log key lost to a typo orphans every checkpoint it signed."""
        record = {
            "type": KEY_FILE_TYPE,
            "name": self.name,
            "public_key": _b64(self.public_key),
            "private_key": _b64(self._private.private_bytes_raw()),
            "vkey": self.verifier.encode(),
        }
        write_private(path, record, NoteKeyFileError)

    @classmethod
    def from_file(cls, path: Path) -> NoteSigner:
        """Read a key written by `to_file`. Refuses a file others can read (as ssh does):
        a log key anyone on the machine could copy proves nothing about who signed."""
        record = read_private(path, KEY_FILE_TYPE, NoteKeyFileError)
        try:
            signer = cls.from_private_bytes(
                record["name"], _unb64(record["private_key"], "private key")
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise NoteKeyFileError(f"{path} is not a sagacity log key file ({exc})") from None
        if (
            record.get("public_key") != _b64(signer.public_key)
            or record.get("vkey") != signer.verifier.encode()
        ):
            raise NoteKeyFileError(f"{path}: its public key or vkey is not its private key's")
        return signer


def _index(verifiers: Iterable[NoteVerifier]) -> dict[tuple[str, bytes], NoteVerifier]:
    """Verifiers by (name, key hash). Two different keys under one name and hash would
    make a signature's meaning depend on which is tried: refused, as Go does."""
    known: dict[tuple[str, bytes], NoteVerifier] = {}
    for verifier in verifiers:
        if not isinstance(verifier, NoteVerifier):
            raise NoteError(f"not a NoteVerifier: {type(verifier).__name__}")
        key = (verifier.name, verifier.key_hash)
        if key in known and known[key] != verifier:
            raise NoteError(f"ambiguous key {verifier.name}+{verifier.key_hash.hex()}")
        known[key] = verifier
    return known


def parse_verifiers(texts: Iterable[str]) -> list[NoteVerifier]:
    """Parse verifier key texts (say, lines of configuration), in order, without
    repeats. Two different keys with the same name and key hash are refused."""
    parsed: list[NoteVerifier] = []
    for number, text in enumerate(texts, 1):
        try:
            parsed.append(NoteVerifier.parse(text))
        except NoteError as exc:
            raise NoteError(f"verifier key {number}: {exc}") from None
    return list(_index(parsed).values())


def open_note(note: str | bytes, verifiers: Iterable[NoteVerifier]) -> SignedNote:
    """Parse a note and return it with only the signatures of known keys, all verified.

    A signature whose name and key hash match a known key must verify, or the whole note
    is refused ("bad signature by NAME"): a known key that signed something else is a
    forgery or a bug, either worth stopping for. Signatures of unknown keys are ignored
    (witnesses and rotated keys add them), but at least one known key must have signed
    ("no signature by a known key"). A key's repeated signatures are all checked and
    kept once.
    """
    known = _index(verifiers)
    parsed = parse_note(note)
    text = parsed.text.encode("utf-8")
    verified: list[NoteSignature] = []
    for signature in parsed.signatures:
        verifier = known.get((signature.name, signature.key_hash))
        if verifier is None:
            continue
        if not verifier.verify(text, signature.signature):
            raise NoteError(f"bad signature by {signature.name}+{signature.key_hash.hex()}")
        if all((s.name, s.key_hash) != (signature.name, signature.key_hash) for s in verified):
            verified.append(signature)
    if not verified:
        raise NoteError("no signature by a known key")
    return SignedNote(parsed.text, tuple(verified))


__all__ = ["NoteSigner", "NoteVerifier", "open_note", "parse_verifiers"]
