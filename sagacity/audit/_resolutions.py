"""Re-checking people's resolutions of dirty state, offline (part of DecisionAudit).

A RESOLVED entry carries the person's statement (sagacity/resolution/v1) and, where the
worker had an approver registry, its signature and the key it was checked with. The
auditor checks that the statement says what the entry says (saga, action, step or the
steps accepted, actor, reason), that it verifies, that a saga whose worker had a registry
(its requester was verified, or its NEEDS_HUMAN names a registry) holds no unsigned
resolution, and that no signed statement was journaled twice (a statement acts once).
Every outcome in a person's name (EXECUTED or FAILED with an actor) must follow that
person's RESOLVED for the step, and a reported result must be the one their statement
hashed: nobody's word passes for the worker's observation, and nobody's word is moved.
Its signature (Ed25519 or a passkey's assertion) is re-checked, and acts once, by the
one check of every signed action (sagacity.audit._statements).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sagacity._errors import SagacityError
from sagacity.approval._statements import result_digest
from sagacity.audit._statements import StatementAudit
from sagacity.journal._entry import JournalEntry
from sagacity.journal._phases import Phase


@dataclass
class ResolutionChecks(StatementAudit):
    """The resolution half of sagacity.audit._decisions.DecisionAudit."""

    registry_seen: bool = False
    """The saga's worker had an approver registry (so every resolution must be signed)."""
    _vouched: dict[int, tuple[str | None, dict[str, Any]]] = field(default_factory=dict)

    def start_saga(self) -> None:
        self.registry_seen, self._vouched, self._spent = False, {}, set()

    def waiting(self, entry: JournalEntry) -> None:
        listed = entry.input if isinstance(entry.input, dict) else {}
        if listed.get("registry") is not None:
            self.registry_seen = True

    def resolution(self, entry: JournalEntry) -> None:
        evidence = entry.input if isinstance(entry.input, dict) else {}
        result = entry.result if isinstance(entry.result, dict) else {}
        accept = result.get("action") == "accept"
        expected = {
            "saga_id": entry.saga_id,
            "action": result.get("action"),
            "actor": entry.actor,
            "step": None if accept else entry.step,
            "steps": result.get("steps") if accept else None,
            "reason": result.get("reason"),
        }
        stmt = self._statement(entry, evidence, "resolution", expected)
        if stmt is None:
            return
        if result.get("action") in ("happened", "did_not_happen"):
            self._vouched[entry.step] = (entry.actor, stmt)
        required = self.registry_seen or result.get("registry") is not None
        self._check_signed(entry, stmt, evidence, result, required=required, what="resolution")

    def vouched_outcome(self, entry: JournalEntry) -> None:
        """An EXECUTED or FAILED in a person's name: it must be what their RESOLVED said."""
        vouched = self._vouched.get(entry.step)
        if vouched is None:
            self._problem(
                entry, f"{entry.phase.value} in {entry.actor!r}'s name with no RESOLVED of theirs"
            )
            return
        actor, stmt = vouched
        said = "happened" if entry.phase is Phase.EXECUTED else "did_not_happen"
        if actor != entry.actor or stmt.get("action") != said:
            self._problem(
                entry, f"{entry.phase.value} in {entry.actor!r}'s name, but the step's "
                f"RESOLVED is {stmt.get('action')!r} by {actor!r}",
            )  # fmt: skip
            return
        if entry.phase is Phase.EXECUTED:
            try:
                digest = result_digest(entry.result)
            except SagacityError:
                digest = None
            if digest != stmt.get("result_sha256"):
                self._problem(entry, "the result is not the one the person's statement hashed")
