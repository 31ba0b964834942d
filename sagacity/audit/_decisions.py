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
signature: it is re-checked as the saga checked it (sagacity.approval._passkey_check), against the
registry's credential. Problems name the entry's seq.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sagacity._errors import SagacityError
from sagacity.approval._models import approval_hash
from sagacity.approval._signing import verify_signature
from sagacity.approval._statements import request_statement, statement_bytes
from sagacity.audit._resolutions import ResolutionChecks
from sagacity.audit._statements import Checked
from sagacity.journal._entry import JournalEntry
from sagacity.journal._phases import Phase
from sagacity.text._lookalikes import skeleton


@dataclass
class DecisionAudit(ResolutionChecks):
    """Feed it every entry (`observe`), then read the tally and the problems."""

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
        expected = {
            "saga_id": entry.saga_id,
            "step": entry.step,
            "tool": entry.tool,
            "decision": "approve" if entry.phase is Phase.APPROVED else "reject",
            "approver": entry.actor,
            "payload_sha256": result.get("payload_sha256"),
        }
        stmt = self._statement(entry, evidence, "decision", expected, blank_ok=("tool",))
        if stmt is None:
            return
        # The request says which registry judged the step; the decision's own result is
        # written by whoever journaled it, so its silence proves nothing.
        required = result.get("registry") is not None or (request or {}).get("registry") is not None
        checked = self._check_signed(
            entry, stmt, evidence, result, required=required, what="decision"
        )
        counts = checked is not Checked.PROBLEM and entry.phase is Phase.APPROVED
        if counts and request is not None:
            request["approved"].add(skeleton(entry.actor or ""))

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
