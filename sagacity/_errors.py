"""Typed errors. Each names what went wrong and what to do about it.

Callers (activities, CLI) map these to non-retryable failures or one-line messages, so
every error a user can cause has its own class rather than a bare ValueError.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sagacity.tools._round_trip import RoundTripProblem


class SagacityError(Exception):
    """Base of every error sagacity raises on purpose."""


class InvalidEntryError(SagacityError, ValueError):
    """A journal entry cannot be written as given (nothing was written)."""


class NotCanonicalError(InvalidEntryError):
    """A value has no RFC 8785 canonical form (NaN, integers beyond 2**53, lone surrogates,
    non-JSON types). Pass such values as strings."""


class PayloadTooLargeError(InvalidEntryError):
    """A canonical payload is over the configured size limit."""


class JournalError(SagacityError):
    """The journal could not do what was asked."""


class JournalWriteError(JournalError):
    """An append could not be written. It was not silently dropped: the caller must retry or
    fail; nothing partial was committed."""


class JournalConflictError(JournalError):
    """The same logical entry (saga, step, phase, attempt) was appended twice with different
    content. The first one stands; the second is refused as evidence of a bug or an attack."""


class UnreadableEntryError(JournalError):
    """A stored row is not a sagacity entry (a phase or timestamp no version writes): it
    was altered outside sagacity. Verification reports it as a break at `seq`."""

    def __init__(self, message: str, seq: int) -> None:
        super().__init__(message)
        self.seq = seq


class TamperedEntryError(UnreadableEntryError):
    """A stored recipe-v2 row whose columns are not what its hashed bytes say: a column
    was edited without the bytes, or the bytes without the column. Verification reports
    it as a `tampered` break at `seq`."""


class StoreUnavailableError(JournalError):
    """The journal's database cannot be reached or opened."""


class NoJournalError(StoreUnavailableError):
    """A read found no journal where its URL points (no file, an empty file, a schema
    with no journal tables): it reports that, and creates nothing (a read never does)."""


class IncompatibleJournalError(JournalError):
    """The journal's database was made by another version of sagacity (a pre-release one,
    a newer one) or by another program: this version does not read or write it, rather
    than misreading its entries as tampered or failing on its first write."""


class UnknownStoreURLError(JournalError, ValueError):
    """The journal URL names no supported backend."""


class ToolboxError(SagacityError):
    """A toolbox is declared wrongly; raised when it is built, never at refund time."""


class ParameterRoundTripError(ToolboxError):
    """A tool's parameter type has a JSON form that is not the value the tool would
    receive (an excluded field, a custom serializer, a computed field, a secret...), so
    the approver, the hash and the journal could show one value while the tool gets
    another. `problems` says where (the field's path from the parameter) and what to do."""

    def __init__(self, tool: str, where: str, problems: Sequence[RoundTripProblem]) -> None:
        self.tool = tool
        self.problems = list(problems)
        listed = "; ".join(str(p) for p in self.problems)
        super().__init__(
            f"tool {tool!r} ({where}): a parameter's JSON form is not the value the tool "
            f"would receive: {listed}"
        )


class UnknownToolError(SagacityError, LookupError):
    """A tool name that is not in the toolbox (or not allowed for this saga)."""


class ToolInputError(SagacityError, ValueError):
    """Arguments for a tool failed validation against its signature."""


class AuditFileError(SagacityError, ValueError):
    """A JSON Lines export cannot be read as journal entries."""


class SagaClosedError(JournalError):
    """An append to a saga whose chain already ends with SAGA_CLOSED. A closed chain has a
    known end; a late writer (a timed-out attempt) must not extend it."""


class BoundsError(SagacityError, ValueError):
    """A value is nested too deep or is too large to enter a saga. Nothing was started or
    run: a saga refuses what it could not decode, store in history and compensate."""


class ForgedStateError(SagacityError):
    """A saga was started with internal state (continue-as-new state) that only the saga
    itself may hand over. Start sagas with their public input only."""


class PayloadMismatchError(ToolInputError):
    """A payload given to a tool does not validate back to itself, so the value the tool
    would receive is not the one approved and journaled: the tool is not run."""


class ApprovalPolicyError(SagacityError, ValueError):
    """A tool's approval policy that could not be applied to a call (its rule failed)."""


class ApprovalRuleError(ToolboxError, ApprovalPolicyError):
    """A rule of a tool's approval policy names a parameter the tool does not have, or one
    it cannot compare (a bool, an object, a list, free-form JSON): raised when the toolbox
    is built, because at call time such a rule would silently never apply."""


class ToolOutcomeUnknownError(SagacityError):
    """A tool cannot tell whether its effect happened: the request went out and no answer
    came back (a connection lost mid-call). The runner journals no outcome for the step,
    so it is reported UNKNOWN and fenced, for a person to settle — never FAILED, which
    would leave an effect that may be live without its compensation."""
