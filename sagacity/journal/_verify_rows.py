"""Verifying a saga's stored rows without making entries of them.

Everything verification needs is in a row as the database returns it (docs/hash-chain.md
section 7): the bytes, the hash, and the columns to compare with the bytes. Building a
JournalEntry per row (a frozen dataclass of fourteen fields, a parsed phase and
timestamp) costs more than the SHA-256 and the comparisons together, so `verify_rows`
checks each row in place: its columns against its bytes (stored_row.row_payloads, which
also decodes the payloads and holds each to one JSON value, so a row no reader could
read does not pass; and the timestamp parsed, as the store's reader parses it), then
ChainVerifier.take checks its bytes, hash and link. Any row that is not such a clean row
(a break, an edit) is made an entry and given to ChainVerifier.feed, which reports it
exactly as verifying entries does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sagacity._errors import UnreadableEntryError
from sagacity.journal._chain import ChainVerifier, VerifyReport
from sagacity.journal._entry import JournalEntry, parse_timestamp
from sagacity.stores._stored_row import row_payloads

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
    take = verifier.take
    for row in rows:
        material = row[13]
        if type(material) is bytes:
            try:
                row_payloads(row)
                parse_timestamp(row[10])  # the bytes hold 27 ASCII characters, any
            except (UnreadableEntryError, ValueError):  # (or Tampered): entry_of reports it
                pass
            else:
                if take(material, row[12], row[1], row[0], row[5] == _CLOSED):
                    continue
        if not verifier.feed(entry_of(row)):
            break
    return verifier.report()
