"""Re-checking every signed decision (and resolution of dirty state) of a journal, offline.

A decision entry (APPROVED or REJECTED by a person) of a saga that binds decisions
carries its statement, its signature and the public key it was checked with. The
auditor re-verifies each: the statement says what the entry says (saga, step, tool,
payload hash, approve or reject, approver), the signature verifies over the statement's
canonical bytes, and — given the approver registry — the key is enrolled to that person
and was valid when the entry was recorded (the entry's time is in the hash chain; the
statement's own `issued_at` is the signer's claim). The requester claim of SAGA_OPENED
is checked the same way, and so is every RESOLVED entry (a person's action on dirty
state: its statement names the saga, the action, the step or the steps accepted, the
actor). A decision signed with a passkey carries its WebAuthn assertion instead of a
signature: it is re-checked as the saga checked it (sagacity.passkey_check), against the
registry's credential. Problems name the entry's seq.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError as PydanticValidationError

from sagacity.approval_models import approval_hash
from sagacity.decision_statement import DECISION_TYPE, request_statement, statement_bytes
from sagacity.entry import JournalEntry, parse_timestamp
from sagacity.errors import SagacityError
from sagacity.lookalikes import skeleton
from sagacity.passkey_check import PasskeyFailure, check_assertion
from sagacity.passkey_models import PasskeyAssertion, PasskeyMaterialError, passkey_key_id
from sagacity.phases import Phase
from sagacity.registry import ApproverRegistry, EnrolledKey
from sagacity.resolution_audit import ResolutionChecks
from sagacity.signing import KeyMaterialError, key_id_of, verify_signature


@dataclass
class DecisionAudit(ResolutionChecks):
    """Feed it every entry (`observe`), then read the tally and the problems."""

    registry: ApproverRegistry | None = None
    signed: int = 0
    unsigned: int = 0
    problems: list[tuple[str, int, str]] = field(default_factory=list)
    """(saga id, seq, what is wrong)."""

    _saga: str | None = None
    _requester_of: str | None = None
    _verified_requester: bool = False
    _requests: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Per step of the current saga: the request's hash, requirement, registry, and who
    approved it so far (as skeletons)."""

    def observe(self, entry: JournalEntry) -> None:
        if entry.saga_id != self._saga:
            self._saga, self._requester_of, self._verified_requester = entry.saga_id, None, False
            self._requests = {}
            self.start_saga()
        if entry.phase in (Phase.APPROVED, Phase.REJECTED):
            self._decision(entry)
        elif entry.phase is Phase.RESOLVED:
            self.resolution(entry)
        elif entry.phase is Phase.NEEDS_HUMAN:
            self.waiting(entry)
        elif entry.phase in (Phase.EXECUTED, Phase.FAILED) and entry.actor is not None:
            self.vouched_outcome(entry)
        elif entry.phase is Phase.SAGA_OPENED:
            self._requester(entry)
        elif entry.phase is Phase.AWAITING_APPROVAL:
            self._request(entry)
        elif entry.phase is Phase.INTENT and entry.step in self._requests:
            self._intent(entry)

    def _request(self, entry: JournalEntry) -> None:
        """The request a decision must match: its hash is recomputed from its payload."""
        payload = entry.input if isinstance(entry.input, dict) else {}
        result = entry.result if isinstance(entry.result, dict) else {}
        try:
            digest = approval_hash(str(payload.get("tool")), payload.get("args"))
        except SagacityError:
            digest = None
        if digest != result.get("payload_sha256") or payload.get("tool") != entry.tool:
            self._problem(entry, "the request's payload_sha256 is not the hash of its payload")
        approval = result.get("approval") if isinstance(result.get("approval"), dict) else None
        if result.get("registry") is not None and not self._verified_requester:
            self._problem(
                entry, "a registry was configured, but the saga's requester is not verified"
            )
        self._requests[entry.step] = {
            "sha256": result.get("payload_sha256"),
            "approval": approval,
            "registry": result.get("registry"),
            "approved": set(),
            "decided": False,
        }

    def _intent(self, entry: JournalEntry) -> None:
        """The irreversible step runs what was approved, after its quorum, by others than
        its requester (re-checked from the entries alone)."""
        request = self._requests.pop(entry.step)
        try:
            ran = approval_hash(entry.tool, entry.input)
        except SagacityError:
            ran = None
        if ran != request["sha256"]:
            self._problem(entry, "the step ran other arguments than the approved payload")
        approval = request["approval"]
        if approval is None:
            return  # a saga from before policies: one approval, checked by its entry
        if len(request["approved"]) < int(approval.get("quorum") or 1):
            self._problem(
                entry,
                f"the step ran after {len(request['approved'])} approval(s) of a quorum of "
                f"{approval.get('quorum')}",
            )
        requester = self._requester_of
        if (
            approval.get("separate_from_requester")
            and requester is not None
            and skeleton(requester) in request["approved"]
        ):
            self._problem(entry, f"the requester {requester!r} approved their own step")

    @property
    def ok(self) -> bool:
        return not self.problems

    def _problem(self, entry: JournalEntry, text: str) -> None:
        self.problems.append((entry.saga_id, entry.seq, text))

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
            self._problem(entry, "a signed decision without its key")
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
            self._problem(entry, f"the key journaled with the decision is not key {key_id}")
            return None
        return str(owner), str(public)

    def _decision(self, entry: JournalEntry) -> None:
        evidence = entry.input
        result = entry.result if isinstance(entry.result, dict) else {}
        request = self._requests.get(entry.step)
        if request is not None and result.get("payload_sha256") != request["sha256"]:
            self._problem(entry, "the decision's payload_sha256 is not its request's")
            return
        if (entry.actor or "").startswith("sagacity:"):
            return  # the saga's own rejection (timeout, cancel)
        if not isinstance(evidence, dict) or "statement" not in evidence:
            if result.get("registry") is not None or (request or {}).get("registry") is not None:
                self._problem(entry, "an unsigned decision where a registry was configured")
                return
            self.unsigned += 1  # a saga from before decision statements
            if request is not None and entry.phase is Phase.APPROVED:
                request["approved"].add(skeleton(entry.actor or ""))
            return
        stmt, signature = evidence.get("statement"), evidence.get("signature")
        if not isinstance(stmt, dict) or stmt.get("type") != DECISION_TYPE:
            self._problem(entry, "the decision's statement is not a decision statement")
            return
        expected = {
            "saga_id": entry.saga_id,
            "step": entry.step,
            "tool": entry.tool,
            "decision": "approve" if entry.phase is Phase.APPROVED else "reject",
            "approver": entry.actor,
            "payload_sha256": result.get("payload_sha256"),
        }
        for name, value in expected.items():
            if stmt.get(name) != value and not (name == "tool" and stmt.get(name) == ""):
                self._problem(
                    entry, f"the statement's {name} is {stmt.get(name)!r}, the entry's {value!r}"
                )
                return
        if "passkey" in evidence:
            if not self._passkey_signed(entry, stmt, evidence.get("passkey"), signature, result):
                return
            self.signed += 1
            if request is not None and entry.phase is Phase.APPROVED:
                request["approved"].add(skeleton(entry.actor or ""))
            return
        if signature is None:
            self.unsigned += 1
            # The request says which registry judged the step; the decision's own result
            # is written by whoever journaled it, so its silence proves nothing.
            if result.get("registry") is not None or (request or {}).get("registry") is not None:
                self._problem(
                    entry, "an unsigned decision accepted where a registry was configured"
                )
            elif request is not None and entry.phase is Phase.APPROVED:
                request["approved"].add(skeleton(entry.actor or ""))
            return
        if not self._signed_by_actor(entry, stmt, signature, result, "statement"):
            return
        self.signed += 1
        if request is not None and entry.phase is Phase.APPROVED:
            request["approved"].add(skeleton(entry.actor or ""))

    def _signed_by_actor(
        self,
        entry: JournalEntry,
        stmt: dict[str, Any],
        signature: Any,
        result: dict[str, Any],
        what: str,
    ) -> bool:
        """Whether the statement's key is the entry's actor's and its signature verifies
        (a problem is recorded when not)."""
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
        self,
        entry: JournalEntry,
        stmt: dict[str, Any],
        assertion: Any,
        signature: Any,
        result: dict[str, Any],
    ) -> bool:
        """Whether the journaled WebAuthn assertion is the actor's enrolled passkey's
        signature over the statement: the same check the saga ran (challenge, ceremony,
        origin, RP, presence, signature), against the registry's credential, or, without
        a registry, the credential journaled with it (a problem is recorded when not)."""
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
        decision (its key id re-derived from its public key)."""
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

    def _requester(self, entry: JournalEntry) -> None:
        opened = entry.input if isinstance(entry.input, dict) else {}
        claim = opened.get("requester")
        if not isinstance(claim, dict):
            return
        self._requester_of = str(claim.get("requester"))
        if not claim.get("verified"):
            return
        stmt = claim.get("statement")
        if not isinstance(stmt, dict) or stmt != request_statement(
            saga_id=entry.saga_id,
            requester=str(claim.get("requester")),
            issued_at=str(stmt.get("issued_at")),
            key_id=str(stmt.get("key_id")),
        ):
            self._problem(entry, "the requester's statement is not a request for this saga")
            return
        key = self._key(entry, stmt.get("key_id"), claim.get("key"))
        if key is None:
            return
        owner, public = key
        if owner != claim.get("requester"):
            self._problem(entry, f"the requester's key belongs to {owner!r}")
        elif not verify_signature(public, statement_bytes(stmt), str(claim.get("signature"))):
            self._problem(entry, "the requester's signature does not verify")
        else:
            self.signed += 1
            self._verified_requester = True
            self.registry_seen = True

    def summary(self) -> str:
        checked = (
            "against the approver registry"
            if self.registry
            else "with the keys journaled (no registry given: enrollment not checked)"
        )
        return (
            f"signatures: {self.signed} verified {checked}; {self.unsigned} unsigned "
            f"decision(s) or resolution(s); {len(self.problems)} problem(s)"
        )


__all__ = ["DecisionAudit"]
