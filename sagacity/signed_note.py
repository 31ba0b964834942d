"""Signed notes and checkpoints in the C2SP formats, so anyone can check our log heads.

The worker signs the heads of its hash chains and Merkle trees as C2SP checkpoints
(https://c2sp.org/tlog-checkpoint) inside C2SP signed notes (https://c2sp.org/signed-note)
with Ed25519 keys (signature type 0x01). A note signed here verifies with standard tooling
(golang.org/x/mod/sumdb/note, witnesses, monitors), and a verifier key is written in the
same text form Go uses, `<name>+<8 hex key hash>+<base64(0x01 || public key)>`, so one
line of configuration serves both.

Everything here is pure and deterministic except key generation and key files. Parsing is
strict on purpose: a note is evidence, and evidence with two spellings (padded base64,
upper-case hex, CRLF line ends, a leading zero in a tree size) invites two readers to
disagree about what was signed. Every refusal is a `NoteError` that says what is wrong;
`NoteVerifier.verify` answers False instead of raising, because a refusal must not raise.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from sagacity.errors import SagacityError

ALG_ED25519 = 0x01
"""The signed-note signature type byte of Ed25519 (c2sp.org/signed-note)."""

KEY_FILE_TYPE = "sagacity/log-key/v1"
KEY_HASH_BYTES = 4
ED25519_PUBLIC_BYTES = 32
ED25519_SIGNATURE_BYTES = 64

MAX_TEXT_BYTES = 16 * 1024
"""The largest note text (UTF-8 bytes) signed or accepted. A checkpoint is about a hundred
bytes; the bound keeps a hostile text from costing more than a glance."""
MAX_NOTE_BYTES = 128 * 1024
"""The largest whole note accepted: the text plus room for the signatures of others, who
may cosign with post-quantum signatures of several kilobytes (the spec asks verifiers to
take at least 16 signatures). Checked before anything else is done with the input."""
MAX_SIGNATURES = 100
"""The most signature lines a note may carry (Go's sumdb/note refuses more than 100)."""
MAX_TREE_SIZE = 2**63 - 1
"""Tree sizes are int64 in Go tooling; a larger size would not round-trip there."""

SIGNATURE_PREFIX = "\u2014 "
"""EM DASH and a space open every signature line."""

_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f]")
_HEX8 = re.compile(r"[0-9a-f]{8}")
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,18}")


class NoteError(SagacityError, ValueError):
    """A note, checkpoint, verifier key or signature that is malformed or does not verify.
    The message says what is wrong."""


class NoteKeyFileError(NoteError):
    """A log key file that cannot be written or read as a sagacity log key."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    """Decode standard base64, refusing every spelling but the canonical one (padding
    present, unused bits zero): one value, one text."""
    if not isinstance(text, str) or not text or not text.isascii():
        raise NoteError(f"{what} must be non-empty standard base64 text")
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise NoteError(f"{what} is not valid base64 ({exc})") from None
    if _b64(data) != text:
        raise NoteError(f"{what} is not in canonical standard base64")
    return data


def _utf8(text: str, what: str) -> bytes:
    """The UTF-8 bytes of `text`; a lone surrogate (which no UTF-8 spells) is refused."""
    if not isinstance(text, str):
        raise NoteError(f"{what} must be text, not {type(text).__name__}")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise NoteError(f"{what} is not valid Unicode (it contains a lone surrogate)") from None


def _check_no_control(text: str, what: str) -> None:
    found = _CONTROL.search(text)
    if found:
        raise NoteError(
            f"{what} contains control character U+{ord(found.group()):04X} at offset "
            f"{found.start()} (only newline is allowed)"
        )


def check_key_name(name: str) -> str:
    """Return `name` if it may name a note key: non-empty, no Unicode space, no "+"
    (it separates the parts of a verifier key) and no control character. Names are
    compared byte for byte, so nothing is normalised."""
    _utf8(name, "key name")
    if not name:
        raise NoteError("key name is empty")
    for ch in name:
        if ch == "+":
            raise NoteError(f"key name {name!r} contains '+'")
        if ch.isspace() or unicodedata.category(ch) in {"Zs", "Zl", "Zp"}:
            raise NoteError(f"key name {name!r} contains a space (U+{ord(ch):04X})")
        if unicodedata.category(ch) == "Cc":
            raise NoteError(f"key name {name!r} contains control character U+{ord(ch):04X}")
    return name


def key_hash(name: str, public_key: bytes) -> bytes:
    """The 4-byte key ID of an Ed25519 key: SHA-256(name || "\\n" || 0x01 || key)[:4].
    The name and type are hashed in so the same key under another name or algorithm
    gets another ID."""
    check_key_name(name)
    if not isinstance(public_key, bytes) or len(public_key) != ED25519_PUBLIC_BYTES:
        raise NoteError(f"an Ed25519 public key is {ED25519_PUBLIC_BYTES} bytes")
    material = name.encode("utf-8") + b"\n" + bytes([ALG_ED25519]) + public_key
    return hashlib.sha256(material).digest()[:KEY_HASH_BYTES]


def check_note_text(text: str) -> None:
    """Refuse a text that cannot be the text of a signed note, so nothing is signed that
    a verifier would refuse or read differently.

    The spec's rules: valid UTF-8 (no lone surrogate), ending in a newline, no control
    character below U+0020 but newline (so no tab and no carriage return). Two of ours:
    at most MAX_TEXT_BYTES, and no empty last line (a text ending in a blank line, or only
    a newline). The spec allows the latter, but then the separating blank line is not the
    only one before the signatures, which careless readers split wrongly; no sagacity text
    needs one.
    """
    if isinstance(text, str) and len(text) > MAX_TEXT_BYTES:
        raise NoteError(f"note text is over {MAX_TEXT_BYTES} bytes")
    raw = _utf8(text, "note text")
    if len(raw) > MAX_TEXT_BYTES:
        raise NoteError(f"note text is {len(raw)} bytes, over {MAX_TEXT_BYTES}")
    if not text.endswith("\n"):
        raise NoteError("note text does not end with a newline")
    if text == "\n" or text.endswith("\n\n"):
        raise NoteError("note text ends with an empty line")
    _check_no_control(text, "note text")


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


def _hex(value: object) -> str:
    return value.hex() if isinstance(value, bytes) else repr(value)


@dataclass(frozen=True)
class NoteSignature:
    """One signature line: the signer's name, its 4-byte key hash and the raw signature."""

    name: str
    key_hash: bytes
    signature: bytes

    def __post_init__(self) -> None:
        check_key_name(self.name)
        if not isinstance(self.key_hash, bytes) or len(self.key_hash) != KEY_HASH_BYTES:
            raise NoteError(f"signature key hash must be {KEY_HASH_BYTES} bytes")
        if not isinstance(self.signature, bytes) or not self.signature:
            raise NoteError("signature is empty")

    def encode(self) -> str:
        """The signature line `— name base64(key hash || signature)` with its newline."""
        return f"{SIGNATURE_PREFIX}{self.name} {_b64(self.key_hash + self.signature)}\n"


@dataclass(frozen=True)
class SignedNote:
    """A note text with its signatures (1 to MAX_SIGNATURES): from `parse_note`, every
    signature present; from `open_note`, only those that verified."""

    text: str
    signatures: tuple[NoteSignature, ...]

    def __post_init__(self) -> None:
        check_note_text(self.text)
        if not isinstance(self.signatures, tuple) or not all(
            isinstance(s, NoteSignature) for s in self.signatures
        ):
            raise NoteError("signatures must be a tuple of NoteSignature")
        if not self.signatures:
            raise NoteError("a signed note has at least one signature")
        if len(self.signatures) > MAX_SIGNATURES:
            raise NoteError(f"a note has at most {MAX_SIGNATURES} signatures")

    def encode(self) -> str:
        """The note as text: the text, a blank line, one line per signature."""
        return self.text + "\n" + "".join(s.encode() for s in self.signatures)


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
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise NoteKeyFileError(f"key file {path} exists; it is never overwritten") from None
        except OSError as exc:
            raise NoteKeyFileError(f"cannot create key file {path}: {exc.strerror}") from None
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(record, out, indent=2)
            out.write("\n")

    @classmethod
    def from_file(cls, path: Path) -> NoteSigner:
        """Read a key written by `to_file`. Refuses a file others can read (as ssh does):
        a log key anyone on the machine could copy proves nothing about who signed."""
        try:
            mode = path.stat().st_mode & 0o077
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
            raise NoteKeyFileError(f"cannot read key file {path}: {reason}") from None
        if mode and os.name == "posix":
            raise NoteKeyFileError(
                f"key file {path} can be read by others (mode {oct(mode)}); run `chmod 600 {path}`"
            )
        try:
            record = json.loads(text)
            if not isinstance(record, dict) or record.get("type") != KEY_FILE_TYPE:
                raise ValueError(f"not a {KEY_FILE_TYPE} file")
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


def _note_text_of(note: str | bytes) -> str:
    """The note as checked text: bounded first, then valid UTF-8, then free of control
    characters. The size test comes before any decoding or copying."""
    if isinstance(note, bytes):
        if len(note) > MAX_NOTE_BYTES:
            raise NoteError(f"note is {len(note)} bytes, over {MAX_NOTE_BYTES}")
        try:
            note = note.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NoteError(f"note is not valid UTF-8 (at byte {exc.start})") from None
    elif not isinstance(note, str):
        raise NoteError(f"note must be text, not {type(note).__name__}")
    elif len(note) > MAX_NOTE_BYTES:
        raise NoteError(f"note is over {MAX_NOTE_BYTES} bytes")
    size = len(_utf8(note, "note"))
    if size > MAX_NOTE_BYTES:
        raise NoteError(f"note is {size} bytes, over {MAX_NOTE_BYTES}")
    _check_no_control(note, "note")
    return note


def _parse_signature_line(line: str, number: int) -> NoteSignature:
    where = f"signature line {number}"
    if not line.startswith(SIGNATURE_PREFIX):
        raise NoteError(f"{where} does not start with an em dash and a space")
    name, space, payload_b64 = line[len(SIGNATURE_PREFIX) :].partition(" ")
    if not space:
        raise NoteError(f"{where} is not of the form '— NAME SIGNATURE'")
    try:
        check_key_name(name)
    except NoteError as exc:
        raise NoteError(f"{where}: {exc}") from None
    payload = _unb64(payload_b64, f"{where} signature")
    if len(payload) < KEY_HASH_BYTES + 1:
        raise NoteError(f"{where} signature is {len(payload)} bytes, under a key hash and more")
    return NoteSignature(name, payload[:KEY_HASH_BYTES], payload[KEY_HASH_BYTES:])


def parse_note(note: str | bytes) -> SignedNote:
    """Split a signed note into its text and signatures without verifying any of them.
    The text ends at the last blank line; every line after it is a signature line
    `— NAME base64(key hash || signature)`, at least one and at most MAX_SIGNATURES.
    Bytes are decoded as strict UTF-8."""
    note = _note_text_of(note)
    split = note.rfind("\n\n")
    if split < 0:
        raise NoteError("note has no blank line before its signatures")
    text, block = note[: split + 1], note[split + 2 :]
    if not block:
        raise NoteError("note has no signature lines")
    if not block.endswith("\n"):
        raise NoteError("the last signature line does not end with a newline")
    lines = block[:-1].split("\n")  # not splitlines(): it also splits on U+2028 and others
    if len(lines) > MAX_SIGNATURES:
        raise NoteError(f"note has {len(lines)} signatures, over {MAX_SIGNATURES}")
    signatures = tuple(_parse_signature_line(line, i) for i, line in enumerate(lines, 1))
    return SignedNote(text, signatures)


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


@dataclass(frozen=True)
class Checkpoint:
    """A tlog-checkpoint note body: the log's origin, its tree size and root hash, and
    optional extension lines. Only well-formed checkpoints can be built."""

    origin: str
    size: int
    root_hash: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.origin, str) or not self.origin.strip():
            raise NoteError("checkpoint origin is empty")
        if "\n" in self.origin:
            raise NoteError("checkpoint origin contains a newline")
        if type(self.size) is not int or not 0 <= self.size <= MAX_TREE_SIZE:
            raise NoteError(f"checkpoint size must be an integer from 0 to {MAX_TREE_SIZE}")
        if not isinstance(self.root_hash, bytes) or len(self.root_hash) != 32:
            raise NoteError("checkpoint root hash must be 32 bytes")
        if not isinstance(self.extensions, tuple):
            raise NoteError("checkpoint extensions must be a tuple of lines")
        for number, line in enumerate(self.extensions, 1):
            if not isinstance(line, str) or not line:
                raise NoteError(f"checkpoint extension line {number} is empty")
            if "\n" in line:
                raise NoteError(f"checkpoint extension line {number} contains a newline")
        check_note_text(self.body())

    def body(self) -> str:
        """The note text: origin, size, base64 root hash and extensions, one per line."""
        lines = [self.origin, str(self.size), _b64(self.root_hash), *self.extensions]
        return "".join(line + "\n" for line in lines)

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        """Read a checkpoint body strictly: a valid note text of at least three lines; a
        non-blank origin; a decimal size without sign, exponent or leading zero ("0" for
        the empty tree) below 2**63; the root hash in canonical base64 of 32 bytes; and
        non-empty extension lines."""
        check_note_text(text)
        lines = text[:-1].split("\n")
        if len(lines) < 3:
            raise NoteError(f"checkpoint has {len(lines)} lines, not origin, size and root hash")
        origin, size_text, root_b64, *extensions = lines
        if not origin.strip():
            raise NoteError("checkpoint origin is empty")
        if not _DECIMAL.fullmatch(size_text) or int(size_text) > MAX_TREE_SIZE:
            raise NoteError(
                f"checkpoint size {size_text[:32]!r} is not a decimal from 0 to {MAX_TREE_SIZE} "
                "without leading zeros"
            )
        root_hash = _unb64(root_b64, "checkpoint root hash")
        if len(root_hash) != 32:
            raise NoteError(f"checkpoint root hash is {len(root_hash)} bytes, not 32")
        return cls(origin, int(size_text), root_hash, tuple(extensions))


def sign_checkpoint(signer: NoteSigner, checkpoint: Checkpoint) -> str:
    """The checkpoint as a note signed by `signer`. The spec recommends (does not require)
    that the key name be the origin; that is the caller's choice of name."""
    return signer.sign(checkpoint.body())


def open_checkpoint(
    note: str | bytes, verifiers: Iterable[NoteVerifier], *, origin: str | None = None
) -> Checkpoint:
    """The checkpoint in a note signed by a known key (`open_note`), parsed strictly.
    With `origin`, a checkpoint of another log is refused too: a valid signature by a key
    that signs for several logs does not make one log's head another's."""
    checkpoint = Checkpoint.parse(open_note(note, verifiers).text)
    if origin is not None and checkpoint.origin != origin:
        raise NoteError(f"checkpoint is of {checkpoint.origin!r}, not {origin!r}")
    return checkpoint


__all__ = [
    "ALG_ED25519",
    "KEY_FILE_TYPE",
    "MAX_NOTE_BYTES",
    "MAX_SIGNATURES",
    "MAX_TEXT_BYTES",
    "Checkpoint",
    "NoteError",
    "NoteKeyFileError",
    "NoteSignature",
    "NoteSigner",
    "NoteVerifier",
    "SignedNote",
    "check_key_name",
    "check_note_text",
    "key_hash",
    "open_checkpoint",
    "open_note",
    "parse_note",
    "parse_verifiers",
    "sign_checkpoint",
]
