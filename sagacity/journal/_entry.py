"""Journal entries: the draft a caller appends and the sealed entry a store returns.

Payload fields are canonicalized once, when the draft is made, and kept as canonical
text: that text is what stores persist (TEXT, never jsonb, which reorders keys and
rewrites numbers) and what the chain hashes, so verification never re-encodes values.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sagacity._errors import InvalidEntryError, UnreadableEntryError
from sagacity.journal._bounds import depth_of
from sagacity.journal._canonical import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    JsonValue,
    canonical_text,
    parse_canonical,
)
from sagacity.journal._phases import LIFECYCLE_STEP, Phase

MAX_NAME_CHARS = 256
"""Limit for saga ids, tool names and actors: identifiers, not payloads."""
MAX_STORED_DEPTH = 256
"""Deepest nesting a stored payload may have: a worker's decoders refuse values nested
about 200 levels deep, so no entry it wrote is deeper; reading one that is would recurse
past Python's limit in whatever walks it next."""

Clock = Callable[[], datetime]
"""What stamps entries (and checkpoints) with the time: `utc_now`, or a test's clock."""


def utc_now() -> datetime:
    return datetime.now(UTC)


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_name(value: object, what: str, *, allow_empty: bool = False) -> str:
    """Validate an identifier-like field: a str, no control characters, bounded length."""
    if not isinstance(value, str):
        raise InvalidEntryError(f"{what} must be a string, got {type(value).__name__}")
    if not value and not allow_empty:
        raise InvalidEntryError(f"{what} must not be empty")
    if len(value) > MAX_NAME_CHARS:
        raise InvalidEntryError(f"{what} is {len(value)} characters; the limit is {MAX_NAME_CHARS}")
    if _CONTROL.search(value):
        raise InvalidEntryError(f"{what} must not contain control characters: {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidEntryError(f"{what} is not valid Unicode text: {value!r}") from exc
    return value


def to_utc(moment: datetime, what: str = "recorded_at") -> datetime:
    """Aware datetime in UTC. A naive datetime is refused: its zone is a guess."""
    if not isinstance(moment, datetime):
        raise InvalidEntryError(f"{what} must be a datetime, got {type(moment).__name__}")
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise InvalidEntryError(
            f"{what} is a naive datetime ({moment.isoformat()}); pass an aware one, "
            "e.g. datetime.now(UTC)"
        )
    try:
        return moment.astimezone(UTC)
    except OverflowError as exc:
        raise InvalidEntryError(f"{what} {moment.isoformat()} is out of range in UTC") from exc


_STAMP_FORMAT = "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ"


def render_timestamp(moment: datetime) -> str:
    """Fixed-width UTC rendering with microseconds, e.g. 2026-12-02T14:09:49.000001Z."""
    if moment.tzinfo is UTC:  # every stored or parsed entry: nothing to convert (fast path)
        # %-formatting the fields is twice as fast as isoformat(timespec=...) and gives
        # the same text for every datetime (years are 1-9999).
        return _STAMP_FORMAT % (
            moment.year, moment.month, moment.day, moment.hour, moment.minute,
            moment.second, moment.microsecond,
        )  # fmt: skip
    return to_utc(moment).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")


def parse_timestamp(text: str) -> datetime:
    """Inverse of render_timestamp, strict: exactly the fixed-width form, since the hash
    covers the stored text and a looser form would hash other bytes than it shows."""
    if not _TIMESTAMP.fullmatch(text):
        raise ValueError(f"{text!r} is not a timestamp in the form YYYY-MM-DDTHH:MM:SS.ffffffZ")
    return datetime.fromisoformat(text)


@dataclass(frozen=True, slots=True)
class EntryDraft:
    """What a caller asks to append. The store adds seq, recorded_at and the hashes.

    Construct with `EntryDraft.new(...)`, which validates and canonicalizes, so a bad
    value is refused before any store is touched and nothing partial is written.
    """

    saga_id: str
    step: int
    attempt: int
    tool: str
    phase: Phase
    input_json: str
    result_json: str
    error_json: str
    actor_json: str
    recorded_at: datetime | None = None

    @classmethod
    def new(
        cls,
        saga_id: str,
        phase: Phase | str,
        *,
        step: int = LIFECYCLE_STEP,
        attempt: int = 1,
        tool: str = "",
        input: JsonValue = None,
        result: JsonValue = None,
        error: str | None = None,
        actor: str | None = None,
        recorded_at: datetime | None = None,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> EntryDraft:
        check_name(saga_id, "saga_id")
        try:
            phase = Phase(phase)
        except ValueError as exc:
            raise InvalidEntryError(f"unknown phase {phase!r}; use one of {list(Phase)}") from exc
        for value, what in ((step, "step"), (attempt, "attempt")):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidEntryError(f"{what} must be a non-negative int, got {value!r}")
        if attempt < 1:
            raise InvalidEntryError(f"attempt must be >= 1, got {attempt}")
        check_name(tool, "tool", allow_empty=True)
        if actor is not None:
            check_name(actor, "actor")
        if error is not None and not isinstance(error, str):
            raise InvalidEntryError(f"error must be a string, got {type(error).__name__}")
        return cls(
            saga_id=saga_id,
            step=step,
            attempt=attempt,
            tool=tool,
            phase=phase,
            input_json=canonical_text(input, what=f"{phase} input", limit=max_payload_bytes),
            result_json=canonical_text(result, what=f"{phase} result", limit=max_payload_bytes),
            error_json=canonical_text(error, what=f"{phase} error", limit=max_payload_bytes),
            actor_json=canonical_text(actor, what="actor"),
            recorded_at=None if recorded_at is None else to_utc(recorded_at),
        )

    @property
    def key(self) -> tuple[str, int, str, int]:
        """The logical identity that makes appends idempotent."""
        return (self.saga_id, self.step, self.phase.value, self.attempt)

    def same_content(self, entry: JournalEntry) -> bool:
        """True when `entry` records exactly this draft (timestamps aside)."""
        return (
            self.tool == entry.tool
            and self.input_json == entry.input_json
            and self.result_json == entry.result_json
            and self.error_json == entry.error_json
            and self.actor_json == entry.actor_json
        )


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """A sealed, chained journal entry as stored."""

    saga_id: str
    seq: int
    step: int
    attempt: int
    tool: str
    phase: Phase
    input_json: str
    result_json: str
    error_json: str
    actor_json: str
    recorded_at: datetime
    prev_hash: str
    hash: str
    material: bytes
    """The exact bytes that were hashed, as stored (sagacity.journal._recipe): every field above
    but `hash` is in them, and verification holds the fields to them."""

    @property
    def key(self) -> tuple[str, int, str, int]:
        return (self.saga_id, self.step, self.phase.value, self.attempt)

    @property
    def input(self) -> JsonValue:
        return self._stored(self.input_json, "input")

    @property
    def result(self) -> JsonValue:
        return self._stored(self.result_json, "result")

    @property
    def error(self) -> str | None:
        value = self._stored(self.error_json, "error")
        return value if isinstance(value, str) else None

    @property
    def actor(self) -> str | None:
        value = self._stored(self.actor_json, "actor")
        return value if isinstance(value, str) else None

    def _stored(self, text: str, field: str) -> JsonValue:
        """A payload field's value. Sagacity only writes canonical JSON there, so text
        that is not JSON, or nested deeper than anything a worker can write, was put in
        by hand (a row edited, a line of an export forged): UnreadableEntryError names
        the seq, and verification reports the entry `unreadable` instead of crashing."""
        try:
            value = parse_canonical(text)
        except (ValueError, RecursionError) as exc:
            why = "nested too deep to read" if isinstance(exc, RecursionError) else "not JSON"
            raise UnreadableEntryError(
                f"its {field} is {why}: sagacity writes canonical JSON there, so the entry "
                "was written outside sagacity",
                self.seq,
            ) from None
        if depth_of(value, MAX_STORED_DEPTH) > MAX_STORED_DEPTH:
            raise UnreadableEntryError(
                f"its {field} is nested more than {MAX_STORED_DEPTH} levels deep, deeper than "
                "any sagacity worker writes: the entry was written outside sagacity",
                self.seq,
            )
        return value

    @property
    def recorded_at_text(self) -> str:
        return render_timestamp(self.recorded_at)

    def to_values(self) -> dict[str, Any]:
        """The entry for people and tools like jq: payloads as JSON values (objects, null),
        not as the canonical text that is hashed (an export line is the verifiable form,
        sagacity.audit._export_lines)."""
        return {
            "saga_id": self.saga_id,
            "seq": self.seq,
            "step": self.step,
            "attempt": self.attempt,
            "tool": self.tool,
            "phase": self.phase.value,
            "input": self.input,
            "result": self.result,
            "error": self.error,
            "actor": self.actor,
            "recorded_at": self.recorded_at_text,
            "prev_hash": self.prev_hash,
            "hash": self.hash,
        }
