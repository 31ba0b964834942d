"""C2SP tlog-checkpoint bodies (https://c2sp.org/tlog-checkpoint) inside signed notes:
origin, tree size, root hash and extension lines, each with exactly one spelling."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sagacity.tlog._note_keys import NoteSigner, NoteVerifier, open_note
from sagacity.tlog._signed_note import (
    _DECIMAL,
    MAX_TREE_SIZE,
    NoteError,
    _b64,
    _unb64,
    check_note_text,
)


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


__all__ = ["Checkpoint", "open_checkpoint", "sign_checkpoint"]
