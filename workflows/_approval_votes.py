"""Approvals counted towards the step's quorum, and journaled one by one.

Each accepted decision becomes a vote; the saga (never a handler) journals each vote in
arrival order — APPROVED once per person counted (attempts 1..n), REJECTED for a
rejection — and the step's request is decided by a rejection or the last approval of the
quorum. An approval stops counting once its requirement's expiry has passed since it was
counted. Part of workflows.approval_gate.ApprovalGate (a mixin over its state).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sagacity.activities._models import EntryRef, JournalEventInput
    from sagacity.approval._judge import ApprovalDecision, ApprovalRequest, Verdict
    from sagacity.approval._policy import ApprovalRequirement
    from sagacity.approval._registry_file import KeyLookup
    from sagacity.approval._signed_action import journaled_signer, journaled_statement
    from sagacity.journal._entry import parse_timestamp
    from sagacity.journal._phases import Phase

TIMEOUT_ACTOR = "sagacity:timeout"
Accepted = tuple[ApprovalDecision, Verdict, KeyLookup | None]
Journal = Callable[[JournalEventInput], Awaitable[EntryRef]]


@dataclass(frozen=True)
class GateDecision:
    approve: bool
    actor: str | None
    reason: str
    entry: EntryRef


@dataclass(frozen=True)
class Vote:
    """An accepted decision, waiting to be journaled by the saga."""

    number: int
    decision: ApprovalDecision
    approver: str
    lookup: KeyLookup | None
    final: bool
    """Whether journaling it decides the request (a rejection, or the last approval)."""


def _issued(decision: ApprovalDecision) -> datetime | None:
    if decision.signature is None or decision.issued_at is None:
        return None
    try:
        return parse_timestamp(decision.issued_at)
    except ValueError:
        return None


class Voting:
    """The counting half of the approval gate (see the module docstring)."""

    _saga_id: str
    _journal: Journal
    changed: Callable[[], None]
    _pending: ApprovalRequest | None
    _votes: list[Vote]
    _vote_refs: dict[int, EntryRef]
    _vote_count: int
    _counted: list[tuple[str, datetime]]
    _approvals_journaled: int
    _requirement: ApprovalRequirement
    _registry: KeyLookup | None
    _decided_steps: set[int]
    _decision_refs: dict[int, EntryRef]

    async def _journal_rejection(
        self, request: ApprovalRequest, actor: str, reason: str
    ) -> EntryRef:
        raise NotImplementedError

    def _live_counted(self, now: datetime) -> list[tuple[str, datetime]]:
        expiry = self._requirement.expires_after_seconds
        if expiry is None:
            return self._counted
        return [(who, at) for who, at in self._counted if now < at + timedelta(seconds=expiry)]

    async def _gather(self, request: ApprovalRequest, timeout: timedelta) -> GateDecision:
        """Journal accepted votes one by one until a rejection or the quorum, or time out."""
        assert request.deadline is not None
        first = True
        while True:
            # The first wait is the request's whole timeout; later ones what is left of it.
            left = timeout if first else request.deadline - workflow.now()
            first = False
            try:
                if left <= timedelta(0):
                    raise TimeoutError
                await workflow.wait_condition(lambda: bool(self._votes), timeout=left)
            except TimeoutError:
                self._pending, self._votes = None, []
                self._decided_steps.add(request.step)
                reason = f"approval timed out after {timeout.total_seconds():g}s"
                if self._counted:
                    live = len(self._live_counted(workflow.now()))
                    reason += f" with {self._requirement.needs(live)} still missing"
                ref = await self._journal_rejection(request, TIMEOUT_ACTOR, reason)
                return GateDecision(False, TIMEOUT_ACTOR, reason, ref)
            vote = self._votes.pop(0)
            if vote.final:
                self._pending, self._votes = None, []
                self._decided_steps.add(request.step)
            now = workflow.now()
            if vote.decision.approve:
                # A signed approval counts from when it was signed (never later than
                # now): its expiry runs from the statement, not from its arrival.
                since = min(now, _issued(vote.decision) or now)
                self._counted = [*self._live_counted(now), (vote.approver, since)]
                self.changed()
                self._approvals_journaled += 1
            ref = await self._journal_vote(request, vote)
            self._vote_refs[vote.number] = ref
            if vote.final:
                self._decision_refs[request.step] = ref
                approvers = ", ".join(who for who, _ in self._counted)
                actor = vote.approver if not vote.decision.approve else approvers
                return GateDecision(
                    vote.decision.approve, actor, vote.decision.reason or "rejected", ref
                )

    async def _journal_vote(self, request: ApprovalRequest, vote: Vote) -> EntryRef:
        decision, lookup = vote.decision, vote.lookup
        key = lookup.key if lookup is not None else None
        result: dict[str, Any] = {
            "payload_sha256": request.payload_sha256,
            "reason": decision.reason,
            "registry": lookup.registry_ref if lookup is not None else None,
            **journaled_signer(decision, key),
        }
        evidence = journaled_statement(decision)
        if decision.approve:
            result.update(
                approvals=[who for who, _ in self._counted],
                quorum=self._requirement.quorum,
                quorum_met=vote.final,
            )
        return await self._journal(
            JournalEventInput(
                saga_id=self._saga_id,
                phase=Phase.APPROVED if decision.approve else Phase.REJECTED,
                step=request.step,
                # One APPROVED per person counted: the nth approval is attempt n.
                attempt=self._approvals_journaled if decision.approve else 1,
                tool=request.tool,
                actor=vote.approver,
                input=evidence,
                result=result,
            )
        )

    def _accept(
        self, decision: ApprovalDecision, verdict: Verdict, lookup: KeyLookup | None
    ) -> int:
        """Count an accepted decision: returns its vote number."""
        self._vote_count += 1
        approvals = len(self._live_counted(workflow.now())) + sum(
            1 for v in self._votes if v.decision.approve
        )
        final = not decision.approve or approvals + 1 >= self._requirement.quorum
        approver = verdict.approver or decision.approver
        self._votes.append(Vote(self._vote_count, decision, approver, lookup, final))
        return self._vote_count

    def _policy_view(self) -> dict[str, Any]:
        counted = [who for who, _ in self._live_counted(workflow.now())]
        return {
            "requirement": self._requirement,
            "approvals": counted,
            "needs": self._requirement.needs(len(counted)),
            "signatures_required": self._registry is not None and self._registry.configured,
        }
