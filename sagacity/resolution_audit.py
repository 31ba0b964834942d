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
A resolution signed with a passkey carries its WebAuthn assertion beside the statement:
it is re-checked as the saga checked it (DecisionAudit._passkey_signed, the one passkey
check), and acts once by its statement's SHA-256 (a new ECDSA signature over the same
statement is the same statement).
"""

from __future__ import annotations

from typing import Any

from sagacity.canonical import sha256_hex
from sagacity.decision_statement import RESOLUTION_TYPE, result_digest, statement_bytes
from sagacity.entry import JournalEntry
from sagacity.errors import SagacityError
from sagacity.phases import Phase


class ResolutionChecks:
    """The resolution half of sagacity.decision_audit.DecisionAudit (a mixin)."""

    signed: int
    unsigned: int
    registry_seen: bool = False
    """The saga's worker had an approver registry (so every resolution must be signed)."""
    _vouched: dict[int, tuple[str | None, dict[str, Any]]]
    _signatures: set[str]

    def _problem(self, entry: JournalEntry, text: str) -> None:
        raise NotImplementedError

    def _signed_by_actor(
        self,
        entry: JournalEntry,
        stmt: dict[str, Any],
        signature: Any,
        result: dict[str, Any],
        what: str,
    ) -> bool:
        raise NotImplementedError

    def _passkey_signed(
        self,
        entry: JournalEntry,
        stmt: dict[str, Any],
        assertion: Any,
        signature: Any,
        result: dict[str, Any],
    ) -> bool:
        raise NotImplementedError

    def start_saga(self) -> None:
        self.registry_seen, self._vouched, self._signatures = False, {}, set()

    def waiting(self, entry: JournalEntry) -> None:
        listed = entry.input if isinstance(entry.input, dict) else {}
        if listed.get("registry") is not None:
            self.registry_seen = True

    def resolution(self, entry: JournalEntry) -> None:
        evidence = entry.input if isinstance(entry.input, dict) else {}
        result = entry.result if isinstance(entry.result, dict) else {}
        stmt, signature = evidence.get("statement"), evidence.get("signature")
        if not isinstance(stmt, dict) or stmt.get("type") != RESOLUTION_TYPE:
            self._problem(entry, "the resolution's statement is not a resolution statement")
            return
        accept = result.get("action") == "accept"
        expected = {
            "saga_id": entry.saga_id,
            "action": result.get("action"),
            "actor": entry.actor,
            "step": None if accept else entry.step,
            "steps": result.get("steps") if accept else None,
            "reason": result.get("reason"),
        }
        for name, value in expected.items():
            if stmt.get(name) != value:
                self._problem(
                    entry, f"the statement's {name} is {stmt.get(name)!r}, the entry's {value!r}"
                )
                return
        if result.get("action") in ("happened", "did_not_happen"):
            self._vouched[entry.step] = (entry.actor, stmt)
        if "passkey" in evidence:
            self._passkey_resolution(entry, stmt, evidence, result)
            return
        if signature is None:
            self.unsigned += 1
            if self.registry_seen or result.get("registry") is not None:
                self._problem(
                    entry, "an unsigned resolution in a saga whose worker had an approver registry"
                )
            return
        if str(signature) in self._signatures:
            self._problem(entry, "a signed statement journaled twice (a statement acts once)")
            return
        self._signatures.add(str(signature))
        if self._signed_by_actor(entry, stmt, signature, result, "resolution"):
            self.signed += 1

    def _passkey_resolution(
        self, entry: JournalEntry, stmt: dict[str, Any], evidence: dict[str, Any],
        result: dict[str, Any],
    ) -> None:  # fmt: skip
        try:
            once = "passkey:" + sha256_hex(statement_bytes(stmt))
        except SagacityError:
            self._problem(entry, "the resolution's statement has no canonical form")
            return
        if once in self._signatures:
            self._problem(entry, "a signed statement journaled twice (a statement acts once)")
            return
        self._signatures.add(once)
        if self._passkey_signed(entry, stmt, evidence.get("passkey"), evidence.get("signature"),
                                result):  # fmt: skip
            self.signed += 1

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
