"""What `sagacity verify` checked beyond the chains, what it found, and what is pending.

A finding fails the command (exit 1). A saga whose close is younger than the pending
window and whose checkpoint is not signed yet (the worker signs it just after the close)
is "checkpoint pending": named, said plainly not to be a failure, and checked by a later
run; past the window it is a finding (sagacity.audit._evidence_pending).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sagacity.audit._evidence import Finding, LogAudit
from sagacity.audit._evidence_pending import PendingWindow
from sagacity.audit._evidence_walk import SagaEvidence
from sagacity.tlog._checkpoint import LogKey
from sagacity.tlog._note_keys import NoteVerifier
from sagacity.worker.cli._journal import EXIT_OPEN, Verdict, conclude, finding_json
from sagacity.worker.cli._output import console, note
from sagacity.worker.cli._render import finding_line, shown

__all__ = ["Evidence", "describe_keys"]

_SHOWN_PENDING = 10
"""Pending sagas named in the text output (--json names them all)."""


def describe_keys(verifiers: Sequence[NoteVerifier]) -> str:
    """Keys as the summaries name them: a name can be shared, its key hash cannot."""
    return ", ".join(str(LogKey(v.name, v.key_hash)) for v in verifiers)


def _stamp(moment: datetime) -> str:
    return f"{moment:%Y-%m-%dT%H:%M:%SZ}"


BY_CHOICE = (
    "NO checkpoints, by choice: the journal was written without them (SAGACITY_CHECKPOINTS"
    "=off; a worker built with log_key=None), so a closed saga carries no signature and "
    "only its hash chain vouches for it: a cut tail, a deleted saga or a chain rewritten "
    "with its hashes recomputed would not show (turn them on to have that evidence)"
)
"""What verify says when checkpoints are off by choice: not tampering, and not proof."""


class Evidence:
    """What was checked beyond the chains, what it found, and what is pending."""

    def __init__(self, verifiers: Sequence[NoteVerifier]) -> None:
        self.verifiers: Sequence[NoteVerifier] | None = verifiers or None
        self.findings: list[Finding] = []
        self.checkpointed = 0
        self.log: LogAudit | None = None
        self.witnessed: str | None = None
        self.expected = True
        """Whether closed chains must be checkpointed (see evidence_walk.checkpointed)."""
        self.by_choice = False
        """Checkpoints are off by choice (SAGACITY_CHECKPOINTS=off): a close with none is
        what the journal's workers were told to write, not a finding."""
        self.window: PendingWindow | None = None
        self.pending: list[tuple[str, datetime]] = []
        """(saga, when it closed) of each close whose checkpoint is on its way."""

    def add(self, saga: SagaEvidence) -> None:
        self.findings += saga.findings
        self.checkpointed += saga.checkpoints > 0
        if saga.pending is not None:
            self.pending.append((saga.saga_id, saga.pending))

    def kinds(self) -> str:
        parts = ["hash chains"]
        keyed = (
            f"signatures checked with {describe_keys(self.verifiers)}"
            if self.verifiers
            else "signatures NOT checked (--skip-signatures): they vouch for nothing"
        )
        if self.by_choice:
            parts.append(BY_CHOICE)
            if self.checkpointed:
                parts.append(f"earlier checkpoints of {self.checkpointed} saga(s) ({keyed})")
        elif self.expected:
            parts.append(f"checkpoints of {self.checkpointed} saga(s) ({keyed})")
        else:
            parts.append(
                "NO checkpoints: the checkpoint log is empty and no log key is known, so only "
                "the chains vouch (a rewritten, cut or deleted saga would not show; give "
                "--log-key)"
            )
        if self.log is not None and (self.log.read or self.log.heads):
            head = self.log.latest
            parts.append(
                f"checkpoint log of {self.log.read} leaves"
                + (
                    f" against its signed tree head of size {head.size} (log {head.log})"
                    if head is not None and head.log is not None
                    else ""
                )
            )
        if self.witnessed is not None:
            parts.append(self.witnessed)
        return "evidence checked: " + "; ".join(parts)

    def pending_text(self) -> str | None:
        """The pending sagas in one sentence, or None when there are none."""
        if not self.pending or self.window is None:
            return None
        names = ", ".join(saga for saga, _ in self.pending[:_SHOWN_PENDING])
        if len(self.pending) > _SHOWN_PENDING:
            names += f" and {len(self.pending) - _SHOWN_PENDING} more"
        latest = max(closed for _, closed in self.pending)
        return (
            f"checkpoint pending (not a failure): {len(self.pending)} saga(s) closed within "
            f"{self.window.describe()} of this check's snapshot ({_stamp(self.window.now)}) "
            f"whose close the worker has not signed yet: {names}; a run after "
            f"{_stamp(latest + self.window.bound)} checks them (a close still unsigned "
            "then is a finding)"
        )

    def conclude(self, *, quiet: bool = False) -> None:
        """Print the findings, the pending sagas and the kinds checked; exit 1 on any
        finding (with `quiet`, print only: the caller fails with its own message)."""
        for finding in self.findings[:50]:
            console.print(finding_line(finding), soft_wrap=True)
        if len(self.findings) > 50:
            note(f"… and {len(self.findings) - 50} more findings")
        pending = self.pending_text()
        if pending is not None:
            console.print("[yellow]…[/] " + shown(pending), soft_wrap=True)
        mark = "[red]✗[/] " if self.findings else "  " if self.expected else "[yellow]![/] "
        console.print(mark + shown(self.kinds()), soft_wrap=True)
        if not quiet:
            conclude(self.verdict())

    def verdict(self) -> Verdict:
        if not self.findings:
            return None
        first = self.findings[0]
        return (
            f"{len(self.findings)} evidence problem(s); first: {first.saga_id}: "
            f"{first.problem.value}",
            EXIT_OPEN,
        )

    def to_json(self) -> dict[str, Any]:
        window = self.window
        return {
            "checked": self.kinds().removeprefix("evidence checked: "),
            "signatures_checked": self.verifiers is not None,
            "checkpoints_off_by_choice": self.by_choice,
            "checkpointed_sagas": self.checkpointed,
            "witnessed_sagas": self.witnessed,
            "findings": [finding_json(f) for f in self.findings],
            "checkpoint_pending": [
                {"saga_id": saga, "closed_at": _stamp(closed)} for saga, closed in self.pending
            ],
            "pending_bound_seconds": window.bound.total_seconds() if window is not None else None,
        }
