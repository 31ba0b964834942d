"""A close whose checkpoint is on its way: "checkpoint pending", not tampering.

The worker appends SAGA_CLOSED, then signs the close's checkpoint into the log in a
second transaction; any snapshot of a busy journal can fall between the two. `verify`
reports such a saga as pending (not a failure) while its close is recent, and as
`not_checkpointed` (a finding) once it is older than the bound: by then an honest
worker has signed it, or is not running.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = ["PENDING_BOUND", "PendingWindow", "uncovered_detail"]

PENDING_BOUND = timedelta(minutes=10)
"""How long a saga's close may wait for its checkpoint by default: the worker signs it
just after the close commits, and retries a failed signing (up to 30 s per attempt, 30 s
apart); ten minutes also covers a worker restarted in between."""


@dataclass(frozen=True, slots=True)
class PendingWindow:
    """When a closed chain whose close no checkpoint covers yet is "checkpoint pending"
    rather than a finding.

    The worker appends SAGA_CLOSED, then signs its checkpoint in a second transaction, so
    any snapshot of a busy journal can hold closes whose checkpoint is on its way. Such a
    close is pending while its recorded_at is within `bound` of `now` (the snapshot's
    time), either side (a worker's clock may run ahead of the verifier's); outside it,
    a finding. A forger who inserts a closed saga can make it pending for at most the
    bound (then it is found), and a close dated far away is found at once."""

    now: datetime
    bound: timedelta = PENDING_BOUND

    def allows(self, closed_at: datetime) -> bool:
        return abs(self.now - closed_at) < self.bound

    def describe(self) -> str:
        return _duration(self.bound)


def _duration(span: timedelta) -> str:
    seconds = int(abs(span.total_seconds()))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"


def uncovered_detail(entries: int, closed: datetime | None, window: PendingWindow | None) -> str:
    """Why a closed chain no checkpoint covers is a finding, and what to do about it.
    With no `window` (an export, read without a snapshot of the log), the close may
    have been read in the moment before its checkpoint."""
    said = (
        f"the chain is closed at {entries} entries{{}} but no checkpoint covers its close: "
        "written without the log key (inserted by hand, or closed by a worker with no log "
        "key: if checkpoints were turned off by choice, verify with SAGACITY_CHECKPOINTS=off)"
    )
    if window is None or closed is None:
        moment = ", unless it was read in the moment between its close and its checkpoint"
        return said.format("") + moment + " (look again)"
    age = window.now - closed
    ago = f"{_duration(age)} {'before' if age >= timedelta(0) else 'after'}"
    when = (
        f" (closed at {closed:%Y-%m-%dT%H:%M:%SZ}, {ago} this check's snapshot: beyond the "
        f"{window.describe()} a checkpoint may be pending)"
    )
    return said.format(when) + (
        ", or its worker stopped between the close and its checkpoint and has not run "
        "since (start it: its retry signs the close)"
    )
