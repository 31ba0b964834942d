"""Verifying a saga's stored rows without making entries of them.

For a v2 row (docs/hash-chain.md section 7) everything verification needs is in the row
as the database returns it: the bytes, the hash, and the columns to compare with the
bytes. Building a JournalEntry per row (a frozen dataclass of fourteen fields, a parsed
phase and timestamp) costs more than the SHA-256 and the comparisons together, so
`verify_rows` checks each v2 row in place: its columns against its bytes
(recipe_v2.row_payloads, which also decodes the payloads and holds each to one JSON
value, so a row no reader could read does not pass; and the timestamp parsed, as the
store's reader parses it), SHA-256 of the bytes against the hash column, bytes 27-58
against the previous digest, seq, saga and close. Any row that is not such a clean v2 row (a v1 row,
a break, an edit) is made an entry and given to ChainVerifier, which reports it exactly
as verifying entries does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sagacity.chain import ChainVerifier, VerifyReport
from sagacity.entry import JournalEntry, parse_timestamp
from sagacity.errors import UnreadableEntryError
from sagacity.recipe_v2 import PREV_OFFSET, row_payloads

__all__ = ["verify_rows"]

_CLOSED = "SAGA_CLOSED"


def verify_rows(
    saga_id: str,
    rows: Iterable[Sequence[Any]],
    entry_of: Callable[[Sequence[Any]], JournalEntry],
    verifier: ChainVerifier | None = None,
) -> VerifyReport:
    """Verify `rows` (one saga's stored rows, COLUMNS order, in seq order) as the chain of
    `saga_id`; `entry_of` turns a row into an entry for the full checks. Reading errors
    (UnreadableEntryError, TamperedEntryError) propagate from `entry_of`, as they do from
    a store's `entries`."""
    verifier = verifier or ChainVerifier(saga_id, columns_checked=True)
    sha256, at, end = hashlib.sha256, PREV_OFFSET, PREV_OFFSET + 32
    for row in rows:
        material = row[13]
        if (
            verifier.recipe == 2
            and type(material) is bytes
            and row[1] == verifier.expected_seq
            and not verifier.closed
            and row[0] == saga_id
            and verifier.broken is None
        ):
            digest = sha256(material).digest()
            if material[at:end] == verifier._prev_raw and digest.hex() == row[12]:
                try:
                    row_payloads(row)
                    parse_timestamp(row[10])  # the bytes hold 27 ASCII characters, any
                except (UnreadableEntryError, ValueError):  # (or Tampered): entry_of reports it
                    pass
                else:
                    verifier.count += 1
                    verifier.expected_seq += 1
                    verifier._prev_raw, verifier.prev_hash = digest, row[12]
                    verifier.closed = row[5] == _CLOSED
                    continue
        if not verifier.feed(entry_of(row)):
            break
    return verifier.report()
