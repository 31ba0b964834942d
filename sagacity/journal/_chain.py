"""The hash chain: how an entry is sealed and how a chain is verified.

This is where an entry's hash is computed: `entry_hash`, the SHA-256 of the entry's
bytes (sagacity.journal._recipe builds them; docs/hash-chain.md has the full text and
known-answer vectors). Each entry's bytes hold the previous entry's hash, so the
entries of a saga form a chain from GENESIS: an entry changed, removed or inserted
breaks it at that seq. Verify also checks every field of an entry against its bytes
(`tampered`): a store's columns and an export line's fields are what the bytes say.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum

from sagacity.journal._entry import EntryDraft, JournalEntry, render_timestamp
from sagacity.journal._phases import Phase
from sagacity.journal._recipe import GENESIS, PREV_OFFSET, column_mismatch, encode_material

__all__ = [
    "GENESIS",
    "BreakReason",
    "ChainVerifier",
    "VerifyReport",
    "entry_hash",
    "reseal",
    "seal",
    "verify_chain",
]

_sha256 = hashlib.sha256
_PREV_AT, _PREV_END = PREV_OFFSET, PREV_OFFSET + 32
_GENESIS_RAW = bytes.fromhex(GENESIS)


def entry_hash(material: bytes) -> str:
    """An entry's hash: lowercase hex of the SHA-256 of its bytes."""
    return _sha256(material).hexdigest()


def _material_of(entry: JournalEntry | EntryDraft, seq: int, prev_hash: str, at: datetime) -> bytes:
    return encode_material(
        saga_id=entry.saga_id,
        seq=seq,
        step=entry.step,
        attempt=entry.attempt,
        tool=entry.tool,
        phase=entry.phase.value,
        input_json=entry.input_json,
        result_json=entry.result_json,
        error_json=entry.error_json,
        actor_json=entry.actor_json,
        recorded_at=render_timestamp(at),
        prev_hash=prev_hash,
    )


def seal(draft: EntryDraft, *, seq: int, prev_hash: str, recorded_at: datetime) -> JournalEntry:
    """Turn a draft into the entry that follows `prev_hash` at `seq`: its bytes first,
    then its hash, then the entry, built once. Pure."""
    if seq == 1 and prev_hash != GENESIS:
        raise ValueError(
            f"the first entry of a chain links to {GENESIS[:16]}…, not {prev_hash[:16]}…: "
            "pass prev_hash=GENESIS"
        )
    moment = draft.recorded_at or recorded_at
    material = _material_of(draft, seq, prev_hash, moment)
    return JournalEntry(
        saga_id=draft.saga_id,
        seq=seq,
        step=draft.step,
        attempt=draft.attempt,
        tool=draft.tool,
        phase=draft.phase,
        input_json=draft.input_json,
        result_json=draft.result_json,
        error_json=draft.error_json,
        actor_json=draft.actor_json,
        recorded_at=moment,
        prev_hash=prev_hash,
        hash=entry_hash(material),
        material=material,
    )


def reseal(entry: JournalEntry) -> JournalEntry:
    """`entry` with its bytes and hash recomputed from its fields: what anyone who can
    write the journal can do after editing an entry. For tamper tests and tools; a chain
    alone cannot show it (docs/hash-chain.md section 5)."""
    material = _material_of(entry, entry.seq, entry.prev_hash, entry.recorded_at)
    return replace(entry, material=material, hash=entry_hash(material))


class BreakReason(StrEnum):
    """Why a chain does not verify. NOT_CHAINED means the entry never carried a hash
    (written outside sagacity); the others mean a chained entry was changed."""

    HASH_MISMATCH = "hash_mismatch"
    BROKEN_LINK = "broken_link"
    GAP = "gap"
    WRONG_SAGA = "wrong_saga"
    NOT_CHAINED = "not_chained"
    AFTER_CLOSE = "after_close"
    UNREADABLE = "unreadable"
    TAMPERED = "tampered"
    """An entry whose fields (a store's columns, an export line's fields) are not what
    its stored hashed bytes say: one of the two was edited without the other."""


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """Outcome of walking one saga's chain."""

    saga_id: str
    ok: bool
    entries: int
    head_hash: str
    closed: bool
    first_broken_seq: int | None = None
    reason: BreakReason | None = None
    detail: str = ""

    def describe(self) -> str:
        if self.ok:
            state = "closed" if self.closed else "open"
            head = self.head_hash[:16]
            return f"{self.saga_id}: verified {self.entries} entries ({state}), head {head}"
        return (
            f"{self.saga_id}: BROKEN at seq {self.first_broken_seq}: {self.reason}: {self.detail}"
        )


def hash_mismatch_detail(stored: str, actual: str) -> str:
    """Both hashes in full (a prefix of each can look the same when the stored one was
    truncated, padded or upper-cased), and what differs when it is only that."""
    detail = f"stored {stored!r}, content hashes to {actual!r}"
    if stored.lower() == actual:
        return f"{detail} (the stored hash differs only in letter case: it is lowercase hex)"
    if len(stored) != len(actual) == 64:
        return f"{detail} (the stored hash has {len(stored)} characters, not 64)"
    return detail


class ChainVerifier:
    """Incremental verifier: feed entries in seq order, read the report at the end.

    Incremental so that verifying a store or a file streams in constant memory.

    An entry is its stored bytes: verifying it is one SHA-256 of them, compared with its
    hash, and the 32 bytes of its link at a fixed offset, compared with the previous
    entry's digest (`take`). Its fields must also be what the bytes say.
    `columns_checked` says the caller already made sure of that where fields and bytes
    met (a SQL store's reader compares every column with the bytes,
    sagacity.stores._stored_row; an export's reader rebuilds the bytes from the line's
    fields); otherwise, for entries made or edited in memory, every field is compared
    here (sagacity.journal._recipe.column_mismatch).
    """

    def __init__(self, saga_id: str, *, columns_checked: bool = False) -> None:
        self.saga_id = saga_id
        self.count = 0
        self.expected_seq = 1
        self.prev_hash = GENESIS
        self.closed = False
        self.broken: tuple[int, BreakReason, str] | None = None
        self.columns_checked = columns_checked
        self._prev_raw = _GENESIS_RAW
        """prev_hash as the 32 bytes the next entry's material links with."""

    def take(self, material: bytes, hash: str, seq: int, saga_id: str, closes: bool) -> bool:
        """Accept the next entry on its bytes alone, for a caller that knows its fields
        are what its bytes say: its seq is the next, its saga this one, the chain is not
        closed, its bytes link to the previous entry and hash to `hash`. True: counted,
        the chain goes on from it (`closes`: it is the SAGA_CLOSED entry). False: nothing
        changed; `feed` the entry, which checks everything and reports what is wrong."""
        if (
            seq != self.expected_seq
            or self.closed
            or saga_id != self.saga_id
            or self.broken is not None
            or material[_PREV_AT:_PREV_END] != self._prev_raw
        ):
            return False
        digest = _sha256(material).digest()
        if digest.hex() != hash:
            return False
        self._prev_raw, self.prev_hash = digest, hash
        self.count += 1
        self.expected_seq += 1
        self.closed = closes
        return True

    def feed(self, entry: JournalEntry) -> bool:
        """Check one entry; returns False once the chain is broken (stop feeding)."""
        if self.broken is not None:
            return False
        closes = entry.phase is Phase.SAGA_CLOSED
        if self.columns_checked and self.take(
            entry.material, entry.hash, entry.seq, entry.saga_id, closes
        ):
            return True
        self.count += 1
        problem = self._check(entry)
        if problem is not None:
            self.broken = problem
            return False
        self.expected_seq = entry.seq + 1
        self.prev_hash = entry.hash
        self._prev_raw = bytes.fromhex(entry.hash)
        self.closed = closes
        return True

    def _check(self, entry: JournalEntry) -> tuple[int, BreakReason, str] | None:
        seq = self.expected_seq
        if not self.columns_checked:
            field = column_mismatch(entry)
            if field is not None:
                return (
                    seq,
                    BreakReason.TAMPERED,
                    f"its {field} is not what its stored hashed bytes say: one of the two "
                    "was edited without the other",
                )
        if entry.saga_id != self.saga_id:
            return (
                seq,
                BreakReason.WRONG_SAGA,
                f"entry of saga {entry.saga_id!r} at seq {entry.seq}",
            )
        if not entry.hash:
            return (
                entry.seq,
                BreakReason.NOT_CHAINED,
                "entry carries no hash: written outside sagacity",
            )
        if entry.seq != seq:
            return (seq, BreakReason.GAP, f"expected seq {seq}, found seq {entry.seq}")
        if self.closed:
            return (seq, BreakReason.AFTER_CLOSE, "entry follows the SAGA_CLOSED entry")
        actual = entry_hash(entry.material)
        if actual != entry.hash:
            return (
                seq,
                BreakReason.HASH_MISMATCH,
                hash_mismatch_detail(entry.hash, actual),
            )
        if entry.prev_hash != self.prev_hash:
            return (
                seq,
                BreakReason.BROKEN_LINK,
                f"prev_hash {entry.prev_hash[:16]}… does not match seq {seq - 1}'s hash "
                f"{self.prev_hash[:16]}…",
            )
        return None

    def unreadable(
        self, seq: int, detail: str, reason: BreakReason = BreakReason.UNREADABLE
    ) -> None:
        """A stored row could not even be read as an entry, or its payload not as JSON,
        or (`reason` TAMPERED) its columns are not what its bytes say: altered outside
        sagacity. It counts as an entry examined, so a saga whose first row is unreadable
        is reported, not taken for one with no entries."""
        if self.broken is None:
            self.count += 1
            self.broken = (seq, reason, detail)

    def report(self) -> VerifyReport:
        if self.broken is not None:
            seq, reason, detail = self.broken
            return VerifyReport(
                self.saga_id, False, self.count, self.prev_hash, self.closed, seq, reason, detail
            )
        return VerifyReport(self.saga_id, True, self.count, self.prev_hash, self.closed)


def verify_chain(
    saga_id: str, entries: Iterable[JournalEntry], *, columns_checked: bool = False
) -> VerifyReport:
    """Walk `entries` (in stored seq order) as the chain of `saga_id`. With
    `columns_checked`, entries' fields are known to be their bytes' (see ChainVerifier)
    and only the bytes are checked."""
    verifier = ChainVerifier(saga_id, columns_checked=columns_checked)
    for entry in entries:
        if not verifier.feed(entry):
            break
    return verifier.report()
