"""Whether the journal holds the approval an irreversible step needs before it runs.

The saga's workflow judges every decision as it arrives, but the activity that runs the
step cannot take the workflow's word for it: anyone who can run a worker in the namespace
can schedule that activity with any input. So the activity re-judges, from the journal
alone, what a real saga would have journaled before asking it to run: the step's
AWAITING_APPROVAL for exactly this payload (its hash recomputed from the journaled
payload), no rejection after it, and APPROVED entries meeting the requirement — the
tool's own policy for these arguments, tightened by what the request journaled (a saga
may ask for more, never for less). With an approver registry every approval must verify
as `verify --approvers` verifies it (the one decision audit: statement, signature or
passkey assertion, key enrolled to that person and valid when it was recorded), and a
group rule is checked against the registry's groups of the key that signed. Expiry is
judged at the moment the quorum was reached, as the workflow judged it.

Pure: the caller reads the entries and passes the time; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from pydantic import ValidationError

from sagacity._errors import SagacityError
from sagacity.approval._models import approval_hash, is_reserved_actor
from sagacity.approval._policy import ApprovalRequirement
from sagacity.approval._registry import ApproverRegistry
from sagacity.approval._signed_checks import CLOCK_SKEW
from sagacity.audit._decisions import DecisionAudit
from sagacity.journal._entry import JournalEntry, parse_timestamp
from sagacity.journal._phases import Phase
from sagacity.text._lookalikes import skeleton

__all__ = ["approval_on_record"]


def _request(entries: Sequence[JournalEntry], tool: str) -> JournalEntry | None:
    """The step's newest AWAITING_APPROVAL for `tool`."""
    found = [e for e in entries if e.phase is Phase.AWAITING_APPROVAL and e.tool == tool]
    return found[-1] if found else None


def _journaled_hash(request: JournalEntry) -> str | None:
    """The request's hash, recomputed from the payload it journaled (None if unreadable
    or if it disagrees with the hash it states)."""
    payload = request.input if isinstance(request.input, dict) else {}
    result = request.result if isinstance(request.result, dict) else {}
    try:
        digest = approval_hash(str(payload.get("tool")), payload.get("args"))
    except SagacityError:
        return None
    if payload.get("tool") != request.tool or result.get("payload_sha256") != digest:
        return None
    return digest


def _requirement(request: JournalEntry, floor: ApprovalRequirement) -> ApprovalRequirement:
    """The tool's requirement, tightened by the one the request journaled."""
    result = request.result if isinstance(request.result, dict) else {}
    journaled = result.get("approval")
    if journaled is None:
        return floor
    return floor.tightened(ApprovalRequirement.model_validate(journaled))


def _since(entry: JournalEntry) -> datetime:
    """When an approval starts to count: when it was signed (never later than when it
    was recorded), as the workflow counted it."""
    evidence = entry.input if isinstance(entry.input, dict) else {}
    stmt = evidence.get("statement")
    if evidence.get("signature") is None or not isinstance(stmt, dict):
        return entry.recorded_at
    try:
        return min(entry.recorded_at, parse_timestamp(str(stmt.get("issued_at"))))
    except ValueError:
        return entry.recorded_at


def _groups_of(entry: JournalEntry, registry: ApproverRegistry | None) -> frozenset[str]:
    """The registry groups of the key that signed `entry` (none without a registry)."""
    evidence = entry.input if isinstance(entry.input, dict) else {}
    stmt = evidence.get("statement")
    key_id = stmt.get("key_id") if isinstance(stmt, dict) else None
    key = registry.key(str(key_id)) if registry is not None else None
    return frozenset(key.groups) if key is not None else frozenset()


def _requester(opened: JournalEntry) -> str | None:
    claim = opened.input.get("requester") if isinstance(opened.input, dict) else None
    return str(claim.get("requester")) if isinstance(claim, dict) else None


def _audited(
    opened: JournalEntry,
    request: JournalEntry,
    decisions: Sequence[JournalEntry],
    registry: ApproverRegistry | None,
) -> str | None:
    """The first problem the decision audit finds with the request and its decisions."""
    audit = DecisionAudit(registry=registry)
    for entry in (opened, request, *decisions):
        audit.observe(entry)
        if audit.problems:
            _, seq, text = audit.problems[0]
            return f"the journal's entry seq {seq} does not verify: {text}"
    return None


def _signed_after(entry: JournalEntry, request: JournalEntry) -> str | None:
    """With a registry: the decision carries a signature or a passkey assertion (the
    audit verifies it), and its statement was issued after the request was journaled
    (within the clock skew a signer may have): a person's statement copied from another
    journal, where the same saga id was asked earlier, does not answer this request."""
    evidence = entry.input if isinstance(entry.input, dict) else {}
    if not evidence.get("signature") and "passkey" not in evidence:
        return f"the decision at seq {entry.seq} is not signed, and this worker requires it"
    stmt = evidence.get("statement")
    try:
        issued = parse_timestamp(str(stmt.get("issued_at") if isinstance(stmt, dict) else ""))
    except ValueError:
        return f"the decision at seq {entry.seq} states no time it was issued"
    if issued < request.recorded_at - CLOCK_SKEW:
        return f"the decision at seq {entry.seq} was issued before this request was made"
    return None


def _counts(
    entry: JournalEntry, need: ApprovalRequirement, registry: ApproverRegistry | None
) -> str | None:
    """Why one APPROVED entry cannot count toward `need` (None if it can)."""
    actor = entry.actor or ""
    if not actor or is_reserved_actor(actor):
        return f"the approval at seq {entry.seq} names no person"
    if need.approvers is not None and actor not in need.approvers:
        return f"{actor!r} (seq {entry.seq}) is not among the approvers the step allows"
    if need.groups is not None and not _groups_of(entry, registry) & set(need.groups):
        return f"{actor!r} (seq {entry.seq}) is in none of the groups {sorted(need.groups)}"
    return None


def approval_on_record(
    opened: JournalEntry,
    step_entries: Sequence[JournalEntry],
    *,
    tool: str,
    payload_sha256: str,
    floor: ApprovalRequirement,
    registry: ApproverRegistry | None,
) -> str | None:
    """None when the journal holds an approval of exactly this payload that meets the
    requirement; otherwise what is missing, in words (the step must not run).

    `opened` is the saga's SAGA_OPENED entry, `step_entries` the step's entries in seq
    order, `floor` what the tool's own policy requires for these arguments."""
    request = _request(step_entries, tool)
    if request is None:
        return "the journal holds no request for approval of this step"
    if _journaled_hash(request) != payload_sha256:
        return f"the journal's request (seq {request.seq}) is for another payload"
    result = request.result if isinstance(request.result, dict) else {}
    if registry is not None and result.get("registry") is None:
        return (
            f"the journal's request (seq {request.seq}) was made without an approver "
            "registry, but this worker requires signed approvals"
        )
    try:
        need = _requirement(request, floor)
    except ValidationError:
        return f"the journal's request (seq {request.seq}) states an unreadable requirement"
    answers = (Phase.APPROVED, Phase.REJECTED)
    decisions = [e for e in step_entries if e.seq > request.seq and e.phase in answers]
    if registry is not None:
        for entry in decisions:
            if not (entry.actor or "").startswith("sagacity:"):  # the saga's own rejections
                problem = _signed_after(entry, request)
                if problem is not None:
                    return problem
    problem = _audited(opened, request, decisions, registry)
    if problem is not None:
        return problem
    if any(e.phase is Phase.REJECTED for e in decisions):
        return "the journal holds a rejection of this request"
    approvals = [
        e
        for e in decisions
        if isinstance(e.result, dict) and e.result.get("payload_sha256") == payload_sha256
    ]
    if not approvals:
        return "the journal holds no approval of this request"
    requester = _requester(opened)
    counted: dict[str, datetime] = {}
    for entry in approvals:
        why = _counts(entry, need, registry)
        if why is not None:
            return why
        who = skeleton(entry.actor or "")
        if need.separate_from_requester and requester and who == skeleton(requester):
            return f"the requester {requester!r} approved their own step (seq {entry.seq})"
        counted[who] = _since(entry)
    reached = approvals[-1].recorded_at
    expiry = need.expires_after_seconds
    live = [
        who
        for who, since in counted.items()
        if expiry is None or reached < since + timedelta(seconds=expiry)
    ]
    if len(live) < need.quorum:
        return f"the journal holds {need.needs(len(live))} still missing"
    return None
