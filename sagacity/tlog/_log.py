"""The checkpoint log: an append-only Merkle log (RFC 6962) of saga checkpoints.

Every saga checkpoint the worker signs (sagacity.tlog._checkpoint) becomes a leaf; after each
leaf the worker signs a tree head over all leaves so far, in the same transaction. An
auditor who once kept a tree head can later ask for a consistency proof that the log
only grew since, and for an inclusion proof that a saga's checkpoint is in it; neither
needs the database's cooperation to check, only the worker's public key.

The log lives in three append-only tables beside the journal (never in it): the leaves
(`checkpoints`: index, saga, entry count, head hash, the signed note), the hashes of
every complete subtree (`log_nodes`: level, index, hash; what makes a root or a proof
O(log n) lookups instead of a re-read of every leaf) and the signed tree heads
(`log_heads`). Appends are serialized by one lock for the whole log (an advisory lock on
PostgreSQL, the write lock on SQLite): one short transaction per checkpoint.

The SQL is written once with `?` placeholders and table names filled in per backend
(sagacity.stores._checkpoint_tables).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager

from sagacity._errors import JournalError, JournalWriteError
from sagacity.journal._entry import Clock, JournalEntry, utc_now
from sagacity.tlog._checkpoint import TreeHead, open_tree_head, sign_saga_checkpoint, sign_tree_head
from sagacity.tlog._merkle import (
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    nodes_completed,
    tree_root,
)
from sagacity.tlog._note_keys import NoteSigner
from sagacity.tlog._rows import (
    LoggedCheckpoint,
    LogNodeMissingError,
    LogRowError,
    checkpoint_row,
    head_row,
    int_column,
    missing_node,
    node_column,
)

__all__ = [
    "CheckpointConflictError",
    "CheckpointLog",
    "CheckpointLogUnavailableError",
    "Execute",
    "LogNodeMissingError",
    "LogProofError",
    "LogRowError",
    "LoggedCheckpoint",
    "Rows",
]

Rows = list[tuple[object, ...]]
Execute = Callable[[str, Sequence[object]], Rows]
"""Run one statement inside the log's locked transaction; returns its rows."""

_PAGE = 1000
_CP_COLUMNS = "log_index, saga_id, entries, head_hash, note"


class CheckpointConflictError(JournalError):
    """The log already holds a checkpoint of this saga at this entry count with another
    head: the journal changed after it was checkpointed. The first checkpoint stands."""


class CheckpointLogUnavailableError(JournalWriteError):
    """The checkpoint log could not be written (retry: the entry it checkpoints is
    already journaled, and appends are idempotent), or this process has no log key."""


class LogProofError(JournalError, ValueError):
    """A proof asked for between sizes no proof relates (an older tree larger than the
    newer, a leaf outside its tree): the sizes came from somewhere the log's signed notes
    do not say, such as a stored row's edited size column."""


def _perfect_pieces(size: int) -> list[tuple[int, int]]:
    """The (level, index) of the perfect subtrees whose roots make up a tree of `size`
    leaves, left to right (one per set bit of `size`)."""
    pieces: list[tuple[int, int]] = []
    start = 0
    for level in range(size.bit_length() - 1, -1, -1):
        if size >> level & 1:
            pieces.append((level, start >> level))
            start += 1 << level
    return pieces


def _left_siblings(index: int) -> list[tuple[int, int]]:
    """The stored subtrees a leaf appended at `index` combines with (one per trailing 1)."""
    keys: list[tuple[int, int]] = []
    level = 0
    while index >> level & 1:
        keys.append((level, (index >> level) - 1))
        level += 1
    return keys


class CheckpointLog(ABC):
    """The log of one journal database. Readers need no key; `record` needs the signer."""

    url: str

    def __init__(self, signer: NoteSigner | None = None, clock: Clock | None = None) -> None:
        self.signer = signer
        self.clock: Clock = clock or utc_now

    # ---- backend ----------------------------------------------------------------------

    @abstractmethod
    def _locked(self) -> AbstractContextManager[Execute]:
        """A transaction holding the log's lock; commits on exit, rolls back on error."""

    @abstractmethod
    def _read(self, sql: str, params: Sequence[object]) -> Rows:
        """One read outside any transaction of ours."""

    @abstractmethod
    def _sql(self, template: str) -> str:
        """`template` with {cp}, {nodes}, {heads} and placeholders for this backend."""

    # ---- writing ----------------------------------------------------------------------

    def record(self, entry: JournalEntry) -> LoggedCheckpoint:
        """Sign a checkpoint of the chain ending at `entry` and append it, with the new
        tree head. Idempotent: the same saga and entry count returns the stored leaf (an
        activity retried after its commit); another head for them raises
        CheckpointConflictError."""
        signer = self.signer
        if signer is None:
            raise CheckpointLogUnavailableError(
                "this process has no log key, so it cannot sign checkpoints"
            )
        with self._locked() as execute:
            found = execute(
                self._sql(f"SELECT {_CP_COLUMNS} FROM {{cp}} WHERE saga_id=? AND entries=?"),
                (entry.saga_id, entry.seq),
            )
            if found:
                existing = checkpoint_row(found[0])
                if existing.head_hash != entry.hash:
                    raise CheckpointConflictError(
                        f"saga {entry.saga_id!r}: the checkpoint log already holds its head at "
                        f"{entry.seq} entries as {existing.head_hash[:16]}…, the journal now "
                        f"says {entry.hash[:16]}…: the journal changed after it was "
                        "checkpointed (run `sagacity verify`)"
                    )
                return existing
            size_rows = execute(self._sql("SELECT COALESCE(MAX(log_index) + 1, 0) FROM {cp}"), ())
            index = int_column(size_rows[0][0])
            note = sign_saga_checkpoint(
                signer,
                saga_id=entry.saga_id,
                entries=entry.seq,
                head_hash=entry.hash,
                now=self.clock(),
            )
            known = self._fetch_nodes(execute, _left_siblings(index) + _perfect_pieces(index + 1))
            new_nodes = nodes_completed(index, leaf_hash(note.encode("utf-8")), _lookup(known))
            known.update({(level, idx): digest for level, idx, digest in new_nodes})
            head = sign_tree_head(signer, size=index + 1, root=tree_root(index + 1, _lookup(known)))
            logged = LoggedCheckpoint(index, entry.saga_id, entry.seq, entry.hash, note)
            execute(
                self._sql(f"INSERT INTO {{cp}} ({_CP_COLUMNS}) VALUES (?, ?, ?, ?, ?)"),
                (index, entry.saga_id, entry.seq, entry.hash, note),
            )
            for level, idx, digest in new_nodes:
                execute(
                    self._sql("INSERT INTO {nodes} (level, idx, hash) VALUES (?, ?, ?)"),
                    (level, idx, digest),
                )
            execute(
                self._sql("INSERT INTO {heads} (size, root, note) VALUES (?, ?, ?)"),
                (head.size, head.root, head.note),
            )
            return logged

    def _fetch_nodes(
        self, execute: Execute, keys: list[tuple[int, int]]
    ) -> dict[tuple[int, int], bytes]:
        wanted = sorted(set(keys))
        if not wanted:
            return {}
        where = " OR ".join("(level=? AND idx=?)" for _ in wanted)
        params = [value for key in wanted for value in key]
        rows = execute(self._sql(f"SELECT level, idx, hash FROM {{nodes}} WHERE {where}"), params)
        return {(int_column(r[0]), int_column(r[1])): node_column(r[0], r[1], r[2]) for r in rows}

    # ---- reading ----------------------------------------------------------------------

    def head(self) -> TreeHead | None:
        """The newest signed tree head, or None for an empty log. Its row's size and root
        columns must be what its note says (LogRowError): an export proves every leaf
        against this head, and a size column edited upwards once sent it looking for
        nodes no tree of that size has. (`LogAudit` checks every head's row the same way
        and reports, rather than raises.)"""
        rows = self._read(
            self._sql("SELECT size, root, note FROM {heads} ORDER BY size DESC LIMIT 1"), ()
        )
        if not rows:
            return None
        stored = head_row(rows[0])
        said = open_tree_head(stored.note, None)
        if (said.size, said.root) != (stored.size, stored.root):
            raise LogRowError(
                f"the checkpoint log's newest tree head row says size {stored.size}, root "
                f"{stored.root.hex()[:16]}…, but its signed note says size {said.size}, root "
                f"{said.root.hex()[:16]}…: the row was edited; run `sagacity verify --all`"
            )
        return stored

    def in_use(self) -> bool:
        """Whether the log holds any leaf or tree head: its checkpoints then need the log
        key to mean anything, and verification refuses to pass them unchecked."""
        return bool(self._read(self._sql("SELECT 1 FROM {cp} LIMIT 1"), ())) or bool(
            self._read(self._sql("SELECT 1 FROM {heads} LIMIT 1"), ())
        )

    def _pages(
        self,
        template: str,
        first: tuple[object, ...],
        after: Callable[[tuple[object, ...]], tuple[object, ...]],
    ) -> Iterator[tuple[object, ...]]:
        """The rows of `template` a page at a time (keyset paging, so a page costs one
        index range however deep the log is): its parameters are a page's key, `first`
        for the first page and `after(last row)` for the next, then the page size."""
        query, key = self._sql(template), first
        while True:
            rows = self._read(query, (*key, _PAGE))
            yield from rows
            if len(rows) < _PAGE:
                return
            key = after(rows[-1])

    def heads(self) -> Iterator[TreeHead]:
        """Every stored tree head, oldest first, streamed."""
        rows = self._pages(
            "SELECT size, root, note FROM {heads} WHERE size>? ORDER BY size LIMIT ?",
            (0,),
            lambda last: (int_column(last[0]),),
        )
        return map(head_row, rows)

    def leaves(self) -> Iterator[LoggedCheckpoint]:
        """Every leaf in log order, streamed."""
        rows = self._pages(
            f"SELECT {_CP_COLUMNS} FROM {{cp}} WHERE log_index>? ORDER BY log_index LIMIT ?",
            (-1,),
            lambda last: (int_column(last[0]),),
        )
        return map(checkpoint_row, rows)

    def by_saga(self) -> Iterator[LoggedCheckpoint]:
        """Every leaf ordered by saga id (code-point order, as `JournalStore.sagas()`) and
        entry count, streamed: verify merges it with the journal's sagas."""
        rows = self._pages(
            f"SELECT {_CP_COLUMNS} FROM {{cp}} WHERE saga_id>? OR (saga_id=? AND "
            "entries>?) ORDER BY saga_id, entries LIMIT ?",
            ("", "", 0),
            lambda last: (str(last[1]), str(last[1]), int_column(last[2])),
        )
        return map(checkpoint_row, rows)

    def of_saga(self, saga_id: str) -> list[LoggedCheckpoint]:
        """The saga's leaves by entry count (a handful: one per N entries and the close)."""
        rows = self._read(
            self._sql(f"SELECT {_CP_COLUMNS} FROM {{cp}} WHERE saga_id=? ORDER BY entries"),
            (saga_id,),
        )
        return [checkpoint_row(row) for row in rows]

    def subtree(self, level: int, index: int) -> bytes:
        rows = self._read(
            self._sql("SELECT hash FROM {nodes} WHERE level=? AND idx=?"), (level, index)
        )
        if not rows:
            raise missing_node(level, index)
        return node_column(level, index, rows[0][0])

    def subtrees(self, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
        """The stored nodes at (level, index) `keys`, in one query; missing ones absent."""
        unique = sorted(set(keys))
        if not unique:
            return {}
        where = " OR ".join(["(level=? AND idx=?)"] * len(unique))
        rows = self._read(
            self._sql(f"SELECT level, idx, hash FROM {{nodes}} WHERE {where}"),
            [value for key in unique for value in key],
        )
        return {
            (int_column(row[0]), int_column(row[1])): node_column(row[0], row[1], row[2])
            for row in rows
        }

    def prove_inclusion(self, index: int, size: int) -> list[bytes]:
        """The audit path of leaf `index` in the tree of `size` leaves, from stored nodes.
        The nodes it needs depend only on (index, size): they are named first and read in
        one query (an export proves every leaf; one query per node made it 6x slower)."""
        if not 0 <= index < size:
            raise LogProofError(
                f"no inclusion proof of leaf {index} in a tree of {size} leaves: the leaf is "
                "not in it"
            )
        wanted: list[tuple[int, int]] = []

        def name(level: int, at: int) -> bytes:
            wanted.append((level, at))
            return bytes(32)

        inclusion_proof(index, size, name)
        return inclusion_proof(index, size, _lookup(self.subtrees(wanted)))

    def prove_consistency(self, old_size: int, new_size: int) -> list[bytes]:
        if not 0 <= old_size <= new_size:
            raise LogProofError(
                f"no consistency proof from a tree of {old_size} leaves to one of {new_size}: "
                "the older is larger"
            )
        return consistency_proof(old_size, new_size, _cached(self.subtree))

    def root(self, size: int) -> bytes:
        return tree_root(size, _cached(self.subtree))

    def close(self) -> None:  # noqa: B027 - the store owns the connections
        """Nothing to release: the journal store owns the connections."""


def _lookup(known: dict[tuple[int, int], bytes]) -> Callable[[int, int], bytes]:
    def subtree(level: int, index: int) -> bytes:
        if (level, index) not in known:
            raise missing_node(level, index)
        return known[(level, index)]

    return subtree


def _cached(subtree: Callable[[int, int], bytes]) -> Callable[[int, int], bytes]:
    seen: dict[tuple[int, int], bytes] = {}

    def lookup(level: int, index: int) -> bytes:
        key = (level, index)
        if key not in seen:
            seen[key] = subtree(level, index)
        return seen[key]

    return lookup
