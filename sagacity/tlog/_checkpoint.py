"""Signed checkpoints: a saga chain's head, and the checkpoint log's tree head, as C2SP notes.

A hash chain kept beside its rows proves only that the rows agree with each other: whoever
can write them can recompute every hash. A checkpoint is the worker's signed statement
"saga S had N entries and its N-th entry hashed to H, at time T", in the C2SP
tlog-checkpoint text format (sagacity.tlog._signed_note), so it can be checked with the worker's
public key alone, by sagacity or by any signed-note tool. The database's owner cannot make
one without the key.

Two kinds share the format and are told apart by their origin line, so one can never be
passed off as the other:

- a saga checkpoint: origin ``<log name>/saga/<saga id, percent-encoded>``, size = the
  chain's entry count, root hash = the chain's head hash, extension ``time <UTC instant>``;
- a tree head of the checkpoint log: origin ``<log name>``, size = the number of saga
  checkpoints in the log, root hash = the RFC 6962 Merkle root over them (the leaves are
  the saga checkpoints' signed notes, byte for byte).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import quote, unquote

from sagacity._errors import SagacityError
from sagacity.journal._entry import parse_timestamp, render_timestamp
from sagacity.tlog._checkpoint_body import Checkpoint, sign_checkpoint
from sagacity.tlog._note_keys import NoteSigner, NoteVerifier, open_note
from sagacity.tlog._signed_note import NoteError, parse_note

SAGA_ORIGIN_PART = "/saga/"
TIME_PREFIX = "time "


class CheckpointError(SagacityError, ValueError):
    """A checkpoint or tree head that is not what it claims: malformed, signed by no known
    key, or naming another log or saga. The message says which."""


@dataclass(frozen=True, slots=True)
class LogKey:
    """The key that signed a checkpoint or tree head: its name and 4-byte key hash.

    A log is its key, not its name: two deployments can give their keys the same name
    (older versions named every key `sagacity.local/journal`), and an auditor who trusts
    both must not take one log's checkpoint for the other's. The key hash covers the
    name and the public key, so equal LogKeys are one key."""

    name: str
    key_hash: bytes

    def __str__(self) -> str:
        return f"{self.name} (key {self.key_hash.hex()})"


@dataclass(frozen=True, slots=True)
class SagaCheckpoint:
    """What a saga checkpoint says, once its signature has been checked."""

    saga_id: str
    entries: int
    head_hash: str
    """Hex SHA-256 of the chain's entry at seq `entries`."""
    signed_at: datetime
    note: str
    """The signed note itself: the leaf of the checkpoint log."""
    signers: tuple[LogKey, ...] = field(default=(), compare=False)
    """The keys whose signatures were checked (or, read with no key, that it claims)."""


@dataclass(frozen=True, slots=True)
class TreeHead:
    """A signed tree head of the checkpoint log: `size` leaves, Merkle root `root`."""

    size: int
    root: bytes
    note: str
    signers: tuple[LogKey, ...] = field(default=(), compare=False)
    """As SagaCheckpoint.signers; empty for a head read from the store, not opened."""

    @property
    def log(self) -> LogKey | None:
        """The key of the log this head is of, once opened: its one trusted signer
        (`open_tree_head` refuses a head that two trusted keys signed)."""
        return self.signers[0] if self.signers else None


def same_log(note: tuple[LogKey, ...], head: tuple[LogKey, ...]) -> bool:
    """Whether a note (a checkpoint, or another head) is of the log of the tree head
    signed by `head`: the head's key signed it. A log is one key, so sharing some other
    signer says nothing: an auditor who trusts staging and production, facing an
    attacker who holds staging's key, would otherwise take a production head that
    staging's key also signed as a head of both, and staging's checkpoints as its own.
    The name alone says nothing either (see LogKey)."""
    return bool(head) and head[0] in note


def saga_origin(log_name: str, saga_id: str) -> str:
    """The origin line of a saga's checkpoints: the log's name, then the saga id with
    every character outside [A-Za-z0-9_.~-] percent-encoded (no space, no "+")."""
    return f"{log_name}{SAGA_ORIGIN_PART}{quote(saga_id, safe='')}"


def sign_saga_checkpoint(
    signer: NoteSigner, *, saga_id: str, entries: int, head_hash: str, now: datetime
) -> str:
    """The signed note for a chain of `entries` entries whose last hashes to `head_hash`."""
    body = Checkpoint(
        origin=saga_origin(signer.name, saga_id),
        size=entries,
        root_hash=bytes.fromhex(head_hash),
        extensions=(TIME_PREFIX + render_timestamp(now),),
    )
    return sign_checkpoint(signer, body)


def sign_tree_head(signer: NoteSigner, *, size: int, root: bytes) -> TreeHead:
    note = sign_checkpoint(signer, Checkpoint(origin=signer.name, size=size, root_hash=root))
    return TreeHead(size, root, note, (LogKey(signer.name, signer.key_hash),))


def _open(
    note: str, verifiers: Iterable[NoteVerifier] | None, what: str
) -> tuple[Checkpoint, str, tuple[LogKey, ...]]:
    """The checkpoint body of a note signed by one of `verifiers`, that key's name (the
    log it belongs to) and the keys that signed it. With `verifiers` None the signature
    is not checked (no key is known): the body is read as its first signer names it, and
    callers say so."""
    try:
        signed = parse_note(note) if verifiers is None else open_note(note, verifiers)
        checkpoint = Checkpoint.parse(signed.text)
    except NoteError as exc:
        raise CheckpointError(f"{what}: {exc}") from None
    signers = tuple(LogKey(s.name, s.key_hash) for s in signed.signatures)
    return checkpoint, signed.signatures[0].name, signers


def open_saga_checkpoint(note: str, verifiers: Iterable[NoteVerifier] | None) -> SagaCheckpoint:
    """Check a saga checkpoint's signature and read it; CheckpointError says what is wrong
    (a tree head offered as a saga checkpoint is refused by its origin)."""
    checkpoint, log_name, signers = _open(note, verifiers, "saga checkpoint")
    prefix = log_name + SAGA_ORIGIN_PART
    encoded = checkpoint.origin[len(prefix) :]
    saga_id = unquote(encoded, errors="strict")
    if (
        not checkpoint.origin.startswith(prefix)
        or not encoded
        or quote(saga_id, safe="") != encoded
    ):
        raise CheckpointError(
            f"saga checkpoint: origin {checkpoint.origin!r} is not {prefix}<saga id>"
        )
    times = [e for e in checkpoint.extensions if e.startswith(TIME_PREFIX)]
    if len(times) != 1 or len(checkpoint.extensions) != 1:
        raise CheckpointError("saga checkpoint: expected exactly one 'time' extension line")
    try:
        signed_at = parse_timestamp(times[0][len(TIME_PREFIX) :])
    except ValueError:
        raise CheckpointError(f"saga checkpoint: bad time {times[0]!r}") from None
    if checkpoint.size < 1:
        raise CheckpointError("saga checkpoint: a chain checkpoint covers at least one entry")
    return SagaCheckpoint(
        saga_id, checkpoint.size, checkpoint.root_hash.hex(), signed_at, note, signers
    )


def open_tree_head(note: str, verifiers: Iterable[NoteVerifier] | None) -> TreeHead:
    """Check a tree head's signature and read it (a saga checkpoint is refused).

    A head names its log by its key, so it must be signed by exactly one of the keys
    trusted here: a head that two trusted keys signed could be taken for either log's
    (and a checkpoint of either for one of it), so it is refused, naming both. Keys not
    trusted here (a witness's cosignature) are ignored, as `open_note` ignores them."""
    checkpoint, log_name, signers = _open(note, verifiers, "tree head")
    if verifiers is not None and len(signers) > 1:
        raise CheckpointError(
            f"tree head: signed by {len(signers)} keys you trust "
            f"({', '.join(str(key) for key in signers)}), but a log's head is signed by "
            "its own key alone, so it cannot say which log it is of: a key of one log "
            "cosigned another's head; give only the key of the log you audit"
        )
    if checkpoint.origin != log_name or checkpoint.extensions:
        raise CheckpointError(
            f"tree head: origin {checkpoint.origin!r} is not the log {log_name!r} itself"
        )
    return TreeHead(checkpoint.size, checkpoint.root_hash, note, signers)
