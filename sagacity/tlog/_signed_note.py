"""Signed notes in the C2SP format, so anyone can check our log heads: the text rules,
signature lines, and strict parsing. Keys are sagacity.tlog._note_keys; checkpoint bodies are
sagacity.tlog._checkpoint_body.

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
import re
import unicodedata
from dataclasses import dataclass

from sagacity._errors import SagacityError

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


__all__ = [
    "ALG_ED25519",
    "KEY_FILE_TYPE",
    "MAX_NOTE_BYTES",
    "MAX_SIGNATURES",
    "MAX_TEXT_BYTES",
    "NoteError",
    "NoteKeyFileError",
    "NoteSignature",
    "SignedNote",
    "check_key_name",
    "check_note_text",
    "key_hash",
    "parse_note",
]
