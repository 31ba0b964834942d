"""Re-checking one journaled signed action offline: the part of DecisionAudit every kind
of action shares (a decision, a resolution of dirty state, and whatever comes next).

An entry recording a person's action carries the statement they signed and its Ed25519
signature, or their passkey's WebAuthn assertion. The auditor checks that the statement
is of the entry's kind and says what the entry says, that it acts once (its signature,
or for a passkey its SHA-256: a new ECDSA signature over the same statement is the same
statement), that it verifies with the key of the entry's actor — the registry's, valid
when it was signed and when the entry was recorded, or without a registry the key
journaled with it (its id re-derived) — and that an unsigned action is journaled only
where no registry was in force. Problems name the entry's seq.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from pydantic import ValidationError as PydanticValidationError

from sagacity._errors import SagacityError
from sagacity.approval._passkey_check import PasskeyFailure, check_assertion
from sagacity.approval._passkey_models import PasskeyAssertion, PasskeyMaterialError, passkey_key_id
from sagacity.approval._registry import ApproverRegistry, EnrolledKey
from sagacity.approval._signing import KeyMaterialError, key_id_of, verify_signature
from sagacity.approval._statements import statement_bytes, statement_type
from sagacity.journal._canonical import sha256_hex
from sagacity.journal._entry import JournalEntry, parse_timestamp


class Checked(Enum):
    """What the audit found of one journaled action's signature."""

    SIGNED = "signed"
    UNSIGNED = "unsigned"
    """No signature, where none was required: it counts as the actor's word."""
    PROBLEM = "problem"
    """Recorded in `problems`: the action does not count."""


@dataclass
class StatementAudit:
    """The tally and the problems, and the one check of a journaled signed action."""

    registry: ApproverRegistry | None = None
    signed: int = 0
    unsigned: int = 0
    problems: list[tuple[str, int, str]] = field(default_factory=list)
    """(saga id, seq, what is wrong)."""
    _spent: set[str] = field(default_factory=set)
    """What made each signed statement of the current saga act (a statement acts once)."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def _problem(self, entry: JournalEntry, text: str) -> None:
        self.problems.append((entry.saga_id, entry.seq, text))

    def _statement(
        self,
        entry: JournalEntry,
        evidence: dict[str, Any],
        kind: str,
        expected: dict[str, Any],
        *,
        blank_ok: tuple[str, ...] = (),
    ) -> dict[str, Any] | None:
        """The journaled statement when it is of `kind` and names what the entry says
        (`expected`; a field in `blank_ok` may be left empty), else None after a problem."""
        stmt = evidence.get("statement")
        if not isinstance(stmt, dict) or stmt.get("type") != statement_type(kind):
            self._problem(entry, f"the {kind}'s statement is not a {kind} statement")
            return None
        for name, value in expected.items():
            if stmt.get(name) != value and not (name in blank_ok and stmt.get(name) == ""):
                self._problem(
                    entry, f"the statement's {name} is {stmt.get(name)!r}, the entry's {value!r}"
                )
                return None
        return stmt

    def _check_signed(
        self,
        entry: JournalEntry,
        stmt: dict[str, Any],
        evidence: dict[str, Any],
        result: dict[str, Any],
        *,
        required: bool,
        what: str,
    ) -> Checked:
        """Whether the journaled action is signed by its actor (counted), unsigned where
        that is allowed (`required` False: no registry was in force), or a problem."""
        signature, assertion = evidence.get("signature"), evidence.get("passkey")
        if assertion is None and signature is None:
            if required:
                self._problem(entry, f"an unsigned {what} where a registry was configured")
                return Checked.PROBLEM
            self.unsigned += 1
            return Checked.UNSIGNED
        try:
            once = (
                str(signature)
                if assertion is None
                else "passkey:" + sha256_hex(statement_bytes(stmt))
            )
        except SagacityError:
            self._problem(entry, f"the {what}'s statement has no canonical form")
            return Checked.PROBLEM
        if once in self._spent:
            self._problem(entry, "a signed statement journaled twice (a statement acts once)")
            return Checked.PROBLEM
        self._spent.add(once)
        ok = (
            self._ed25519_signed(entry, stmt, signature, result, what)
            if assertion is None
            else self._passkey_signed(entry, stmt, assertion, signature, result)
        )
        if not ok:
            return Checked.PROBLEM
        self.signed += 1
        return Checked.SIGNED

    def _ed25519_signed(
        self, entry: JournalEntry, stmt: dict[str, Any], signature: Any,
        result: dict[str, Any], what: str,
    ) -> bool:  # fmt: skip
        key = self._key(entry, stmt.get("key_id"), result.get("key"), stmt.get("issued_at"))
        if key is None:
            return False
        owner, public = key
        if owner != entry.actor:
            self._problem(
                entry, f"key {stmt.get('key_id')} belongs to {owner!r}, not {entry.actor!r}"
            )
            return False
        if not verify_signature(public, statement_bytes(stmt), str(signature)):
            self._problem(
                entry, f"the signature of {entry.actor!r} does not verify over the {what}"
            )
            return False
        return True

    def _passkey_signed(
        self, entry: JournalEntry, stmt: dict[str, Any], assertion: Any, signature: Any,
        result: dict[str, Any],
    ) -> bool:  # fmt: skip
        """Whether the journaled WebAuthn assertion is the actor's enrolled passkey's
        signature over the statement: the same check the saga ran (challenge, ceremony,
        origin, RP, presence, signature), against the registry's credential, or, without
        a registry, the credential journaled with it."""
        try:
            parsed = PasskeyAssertion.model_validate(assertion)
        except PydanticValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            self._problem(entry, f"the passkey assertion is malformed ({first['msg']})")
            return False
        if signature is not None:
            self._problem(
                entry, "a passkey-signed statement that also carries an Ed25519 signature"
            )
            return False
        if self._key(entry, stmt.get("key_id"), result.get("key"), stmt.get("issued_at")) is None:
            return False
        key = self._passkey_of(entry, stmt.get("key_id"), result.get("key"))
        if key is None:
            return False
        if key.approver != entry.actor:
            self._problem(
                entry, f"key {key.key_id} belongs to {key.approver!r}, not {entry.actor!r}"
            )
            return False
        checked = check_assertion(parsed, key, stmt)
        if isinstance(checked, PasskeyFailure):
            self._problem(
                entry,
                f"the passkey assertion of {entry.actor!r} does not verify over the statement "
                f"({checked.reason.value}: {checked.detail[:200]})",
            )
            return False
        return True

    def _passkey_of(self, entry: JournalEntry, key_id: Any, embedded: Any) -> EnrolledKey | None:
        """The passkey to check with: the registry's, else the one journaled with the
        action (its key id re-derived from its public key)."""
        if self.registry is not None:
            key = self.registry.key(str(key_id))
        else:
            try:
                key = EnrolledKey.model_validate(
                    {**embedded, "valid_from": "1970-01-01T00:00:00Z"}
                    if isinstance(embedded, dict)
                    else None
                )
            except PydanticValidationError:
                key = None
        if key is None or key.passkey is None or key.key_id != key_id:
            self._problem(entry, f"key {key_id} is not a passkey (or not the one journaled)")
            return None
        return key

    def _key(
        self, entry: JournalEntry, key_id: Any, embedded: Any, signed_at: Any = None
    ) -> tuple[str, str] | None:
        """(owner, public key) to check with, or None after recording a problem. With a
        registry, the key must have been valid when the entry was recorded and, given
        `signed_at` (a statement's issued_at), when it was signed."""
        if self.registry is not None:
            key = self.registry.key(key_id) if isinstance(key_id, str) else None
            if key is None:
                self._problem(entry, f"key {key_id} is not in the approver registry")
                return None
            if signed_at is not None:
                try:
                    late = key.invalid_at(parse_timestamp(str(signed_at)))
                except ValueError:
                    late = "its issued_at is not a timestamp"
                if late:
                    self._problem(entry, f"at the statement's issued_at: {late}")
                    return None
            problem = key.invalid_at(entry.recorded_at)
            if problem is not None:
                self._problem(entry, f"{problem}, but the entry was recorded at "
                              f"{entry.recorded_at:%Y-%m-%dT%H:%M:%SZ}")  # fmt: skip
                return None
            return key.approver, key.public_key
        if not isinstance(embedded, dict):
            self._problem(entry, "a signed statement without its key")
            return None
        public, owner = embedded.get("public_key"), embedded.get("approver")
        try:
            if "passkey" in embedded:  # re-derived in _passkey_of, with its credential
                derived = passkey_key_id(base64.b64decode(str(public), validate=True))
            else:
                derived = key_id_of(str(public))
            if derived != key_id:
                raise KeyMaterialError("key id mismatch")
        except (KeyMaterialError, PasskeyMaterialError, TypeError, ValueError):
            self._problem(entry, f"the key journaled with the statement is not key {key_id}")
            return None
        return str(owner), str(public)


__all__ = ["Checked", "StatementAudit"]
