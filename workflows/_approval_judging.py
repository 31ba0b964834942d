"""How the approval gate judges one decision, and keeps the refused ones as evidence.

Every decision — by signal or by update — goes through the pure judge in
sagacity.approval._judge, so both doors refuse the same things for the same reasons. A decision
is judged with the worker's answer about the key it names (a local activity, asked when
the decision arrives, so a key revoked a second ago no longer counts) and with the step's
approval requirement (the tool's policy, tightened by the saga). An unsigned decision
needs no key: it is judged with the registry answer the request was journaled with.

Refusals are journaled (they are evidence) and leave the request pending, within bounds:
up to REFUSALS_JOURNALED_PER_STEP for the step that is pending, and
REFUSALS_JOURNALED_ELSEWHERE shared by every decision about anything else (junk that names
a thousand made-up steps fills one small bucket, not a thousand). Beyond the caps refusals
are counted in the close entry, not journaled one by one. Part of
workflows.approval_gate.ApprovalGate (a mixin over its state).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from sagacity.approval._judge import (
        ApprovalDecision,
        ApprovalRequest,
        JudgeContext,
        Refusal,
        RefusalReason,
        Verdict,
        judge,
        parse_decision,
    )
    from sagacity.approval._registry_file import KeyLookup
    from sagacity.approval._registry_marks import RegistryMark, newer, older_than
    from sagacity.journal._phases import Phase

from sagacity.workflows._approval_evidence import field, journal_refused
from sagacity.workflows._approval_votes import Accepted, Voting

Lookup = Callable[[str | None], Awaitable[KeyLookup]]
Ticket = tuple[int, int, int]
"""A refusal's bucket (its step, or ELSEWHERE), its number there, and the bucket's cap."""
REFUSALS_JOURNALED_PER_STEP = 100
"""Refused decisions journaled for the pending step; beyond it they are counted, not
journaled, so a flood of junk signals cannot grow the journal and history without bound."""
REFUSALS_JOURNALED_ELSEWHERE = 20
"""Refused decisions journaled, all together, that name no pending step."""
ELSEWHERE = 0
"""Key (and journal step) of refusals that are not about the pending step."""


class Judging(Voting):
    """The judging half of the approval gate (see the module docstring)."""

    _lookup: Lookup
    requester: str | None
    _registry_seen: RegistryMark | None
    _refusals: dict[int, int]
    _closed: bool

    def _judge(self, raw: Any, approve: bool | None) -> ApprovalDecision | Refusal:
        """Pure: reads state, never changes it (the update validator calls it too)."""
        judged = self._verdict(raw, approve, None)
        return judged[0] if isinstance(judged, tuple) else judged

    def _verdict(
        self,
        raw: Any,
        approve: bool | None,
        lookup: KeyLookup | None,
        arrived: ApprovalRequest | None = None,
    ) -> tuple[ApprovalDecision, Verdict] | Refusal:
        parsed = parse_decision(raw, approve=approve)
        if isinstance(parsed, Refusal):
            return parsed
        already = parsed.step in self._decided_steps or any(
            v.final and v.decision.step == parsed.step for v in self._votes
        )
        now = workflow.now()
        counted = [who for who, _ in self._live_counted(now)]
        counted += [v.approver for v in self._votes if v.decision.approve]
        context = JudgeContext(
            now=now,
            lookup=lookup,
            requirement=self._requirement,
            requester=self.requester,
            counted=frozenset(counted),
        )
        verdict = judge(
            None if self._closed else (self._pending or arrived),
            parsed,
            already_decided=already,
            context=context,
        )
        if verdict.accepted:
            return parsed, verdict
        assert verdict.refusal is not None
        return verdict.refusal

    async def _judged(
        self, raw: Any, approve: bool | None
    ) -> tuple[Accepted | Refusal, Ticket | None]:
        """The verdict on `raw`; a signed decision asks the worker about its key first.
        Before awaiting the key, a signed decision takes its refusal number (its place in
        the refusals' bucket): numbers follow arrival order, which replays the same, never
        the order local activities happen to finish in (a retried workflow task would
        journal the same refusal again under another number)."""
        lookup, ticket = None, None
        arrived = self._pending
        if isinstance(raw, dict):
            key_id = field(raw, "key_id", str)
            if key_id is None and field(raw, "signature", str) is None:
                lookup = self._registry or KeyLookup(configured=False)
            else:
                ticket = self._ticket(raw)
                try:
                    lookup = await self._lookup(key_id if key_id and len(key_id) <= 64 else None)
                except (ActivityError, ApplicationError) as exc:  # never fail the saga's task
                    unusable = f"the worker could not answer about key {key_id}: {exc}"[:1_000]
                    return Refusal(reason=RefusalReason.UNKNOWN_KEY, detail=unusable), ticket
        # A request decided while the key was looked up is still the one this decision
        # arrived at: it is judged against it (refused as about another step, or as
        # already decided), not against "nothing pending".
        rolled_back = self.rolled_back(lookup) if ticket is not None else None
        if rolled_back is not None:
            return rolled_back, ticket
        judged = self._verdict(raw, approve, lookup, arrived)
        return (judged if isinstance(judged, Refusal) else (*judged, lookup)), ticket

    def _ticket(self, raw: Any) -> Ticket:
        """The bucket a refusal of `raw` counts in, its number there, and the bucket's cap."""
        claimed = field(raw, "step", int)
        pending = self._pending
        if pending is not None and claimed == pending.step:
            step, cap = pending.step, REFUSALS_JOURNALED_PER_STEP
        else:  # about no pending step: one small shared bucket, whatever step it names
            step, cap = ELSEWHERE, REFUSALS_JOURNALED_ELSEWHERE
        self._refusals[step] = count = self._refusals.get(step, 0) + 1
        return step, count, cap

    def rolled_back(self, lookup: KeyLookup | None) -> Refusal | None:
        """A registry answer older than one this saga has seen, or than the newest one its
        worker's journal records (sent with the answer), is refused: putting an old file
        back (and restarting the worker) must not undo a revocation. What the saga has
        seen is carried across continue-as-new (`registry_seen`)."""
        if lookup is None or not lookup.configured or lookup.version is None:
            return None
        seen = newer(self._registry_seen, lookup.journaled)
        if older_than(lookup.version, lookup.sha256, seen):
            assert seen is not None
            self._registry_seen = seen
            return Refusal(
                reason=RefusalReason.REGISTRY_ROLLED_BACK,
                detail=f"the worker judged with approver registry version {lookup.version}, "
                f"but this saga has seen {seen.describe()}; restore the newer registry",
            )
        answered = RegistryMark(version=lookup.version, sha256=lookup.sha256)
        self._registry_seen = newer(seen, answered)
        return None

    async def _journal_refusal(
        self, raw: Any, refusal: Refusal, ticket: Ticket | None = None
    ) -> None:
        """Journal APPROVAL_REFUSED with the decision as sent, bounded. The name it claims
        stays in its input only: a refusal proves nobody's identity, so it is no actor."""
        if self._closed:
            workflow.logger.warning("decision after close refused, not journaled: %s", refusal)
            return
        step, count, cap = ticket or self._ticket(raw)
        pending = self._pending
        await journal_refused(
            self._journal,
            "decision",
            raw,
            refusal,
            saga_id=self._saga_id,
            phase=Phase.APPROVAL_REFUSED,
            ticket=(step, count, cap),
            bucket="bucket",
            tool=pending.tool if pending is not None and step == pending.step else "",
        )
