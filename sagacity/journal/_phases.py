"""Journal phases and saga statuses: the vocabulary of the evidence.

Kept as string enums so the stored and hashed form is the readable name, stable across
versions and languages.
"""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    """What a journal entry records."""

    SAGA_OPENED = "SAGA_OPENED"
    INTENT = "INTENT"
    EXECUTED = "EXECUTED"
    FAILED = "FAILED"
    CALL_REFUSED = "CALL_REFUSED"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    APPROVAL_REFUSED = "APPROVAL_REFUSED"
    APPROVED = "APPROVED"
    REJECTED = "REJECTED"
    COMPENSATING = "COMPENSATING"
    """The saga's decision to undo what it did (why, and which steps), journaled before
    its first compensation: a compensation activity acts only once it is there."""
    COMPENSATED = "COMPENSATED"
    COMPENSATION_FAILED = "COMPENSATION_FAILED"
    NEEDS_HUMAN = "NEEDS_HUMAN"
    """The saga stopped with dirty steps and waits for a person (what is dirty, until when)."""
    RESOLVED = "RESOLVED"
    """A person's accepted action on dirty state (happened, did not happen, retry the
    compensation, accept), with their statement."""
    RESOLUTION_REFUSED = "RESOLUTION_REFUSED"
    SAGA_CLOSED = "SAGA_CLOSED"

    @property
    def is_lifecycle(self) -> bool:
        return self in (Phase.SAGA_OPENED, Phase.SAGA_CLOSED)


class SagaStatus(StrEnum):
    """Where a saga stands. RUNNING, AWAITING_APPROVAL, COMPENSATING and NEEDS_HUMAN are
    not final; the others are."""

    RUNNING = "RUNNING"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    COMPENSATING = "COMPENSATING"
    COMPLETED = "COMPLETED"
    COMPENSATED = "COMPENSATED"
    REFUSED = "REFUSED"
    """Nothing ran: the saga's plan was refused before its first side effect."""
    NEEDS_HUMAN = "NEEDS_HUMAN"
    """Compensated what it could, and waits (durably) for a person to resolve the rest: a
    step whose outcome is unknown, or a compensation that failed."""
    ACCEPTED = "ACCEPTED"
    """Closed by a person who accepted the remaining dirty state as it is (journaled
    with who and why)."""
    UNRESOLVED = "UNRESOLVED"
    """Closed by the deadline with dirty state nobody resolved: still needs a human."""

    @property
    def is_final(self) -> bool:
        return self not in (
            SagaStatus.RUNNING,
            SagaStatus.AWAITING_APPROVAL,
            SagaStatus.COMPENSATING,
            SagaStatus.NEEDS_HUMAN,
        )


LIFECYCLE_STEP = 0
"""Step number used by saga lifecycle entries; tool steps start at 1."""


class StepStatus(StrEnum):
    """Where one step of a saga stands, as step reports say it."""

    EXECUTED = "EXECUTED"
    FAILED = "FAILED"
    REFUSED = "REFUSED"
    """An invalid call (unknown tool, bad arguments): nothing ran."""
    NEEDS_APPROVAL = "NEEDS_APPROVAL"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    REJECTED = "REJECTED"
    """Not approved (rejected, timed out, or the saga stopped waiting): nothing ran."""
    UNKNOWN = "UNKNOWN"
    """INTENT journaled and no outcome: not run again, a human must check."""
    FENCED = "FENCED"
    COMPENSATED = "COMPENSATED"
    COMPENSATION_FAILED = "COMPENSATION_FAILED"
    NOT_COMPENSABLE = "NOT_COMPENSABLE"
    """It ran, the saga was undone, and nothing can undo this step (a plain or an
    approved irreversible tool)."""
    DID_NOT_HAPPEN = "DID_NOT_HAPPEN"
    """Its outcome was unknown, and a person established that it took no effect."""
    ACCEPTED = "ACCEPTED"
    """Left dirty (unknown, or its compensation failed) and accepted as is by a person."""
