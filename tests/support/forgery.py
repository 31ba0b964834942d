"""What a superuser with write access to the journal does to hide an edit: rewrites one
entry and recomputes every hash after it, so that the chain alone still verifies and only
what is signed inside the entries can tell."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sagacity.journal._chain import reseal
from sagacity.journal._entry import JournalEntry


def rehashed(entries: Sequence[JournalEntry], index: int, **changes: Any) -> list[JournalEntry]:
    """`entries` (a whole chain from seq 1) with the one at `index` changed by `changes`,
    and every entry from there on renumbered, relinked and resealed (its bytes rebuilt):
    so a list with an entry dropped or repeated becomes a chain that hashes right too."""
    out = list(entries[:index])
    prev = out[-1].hash if out else entries[0].prev_hash
    for n, entry in enumerate(entries[index:]):
        edited = replace(entry, seq=index + n + 1, prev_hash=prev, **(changes if n == 0 else {}))
        edited = reseal(edited)
        out.append(edited)
        prev = edited.hash
    return out
