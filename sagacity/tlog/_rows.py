"""The checkpoint log's rows as read back (sagacity.tlog._log).

The columns beside each signed note are an index: the note is the evidence, and
verification checks the columns against it. A row holding something no sagacity writes
there (text where an integer belongs, a node that is not a 32-byte hash) was written by
hand, and is refused here with the command that finds out more.
"""

from __future__ import annotations

from dataclasses import dataclass

from sagacity._errors import JournalError
from sagacity.tlog._checkpoint import TreeHead
from sagacity.tlog._merkle import HASH_SIZE

__all__ = [
    "LogNodeMissingError",
    "LogRowError",
    "LoggedCheckpoint",
    "checkpoint_row",
    "head_row",
    "int_column",
    "missing_node",
    "node_column",
]


class LogNodeMissingError(JournalError, KeyError):
    """A subtree hash a root or a proof needs is not in the log's nodes table: the table
    was changed (the leaves and the signed heads are the evidence, and `sagacity verify`
    recomputes the roots from the leaves alone). A KeyError too, as merkle's subtree
    lookups expect; its message is a sentence, not a key's repr."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "a log node is missing"


class LogRowError(JournalError):
    """A row of the checkpoint log says something else than its signed note: it was
    edited (the note is the evidence; the columns are an index)."""


def missing_node(level: int, index: int) -> LogNodeMissingError:
    return LogNodeMissingError(
        f"the checkpoint log's stored node at level {level}, index {index} is missing: its "
        "nodes table was changed; run `sagacity verify --all`"
    )


@dataclass(frozen=True, slots=True)
class LoggedCheckpoint:
    """A leaf of the log as stored. The columns are an index: the signed note is the
    evidence, and verification checks the columns against it."""

    index: int
    saga_id: str
    entries: int
    head_hash: str
    note: str


def int_column(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise LogRowError(
            f"a checkpoint log row holds {type(value).__name__} where an integer belongs: "
            "the log's tables were changed; run `sagacity verify --all`"
        )
    return value


def bytes_column(value: object) -> bytes:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise LogRowError(
            f"a checkpoint log row holds {type(value).__name__} where a hash belongs: the "
            "log's tables were changed; run `sagacity verify --all`"
        )
    return bytes(value)


def node_column(level: object, index: object, value: object) -> bytes:
    """A stored subtree hash, which must be one: a node of another length was written by
    hand (merkle would refuse it deep inside a proof, as a bare ValueError)."""
    digest = bytes_column(value)
    if len(digest) != HASH_SIZE:
        raise LogRowError(
            f"the checkpoint log's stored node at level {level}, index {index} is not a "
            f"{HASH_SIZE}-byte hash: its nodes table was changed; run `sagacity verify --all`"
        )
    return digest


def checkpoint_row(row: tuple[object, ...]) -> LoggedCheckpoint:
    index, saga_id, entries, head_hash, note = row
    return LoggedCheckpoint(
        int_column(index), str(saga_id), int_column(entries), str(head_hash), str(note)
    )


def head_row(row: tuple[object, ...]) -> TreeHead:
    size, root, note = row
    return TreeHead(int_column(size), bytes_column(root), str(note))
