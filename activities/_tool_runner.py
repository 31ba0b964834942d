"""The journaled tool call: INTENT, run, EXECUTED or FAILED, with retries made safe.

Temporal runs activities at least once, so the step is claimed under the saga's lock
first (`JournalStore.begin_step`): an outcome already journaled is returned without
running the tool again, and an INTENT of another attempt with no outcome (a worker that
died mid-call, an attempt that timed out and may still be running) is reported UNKNOWN
rather than run a second time — a second charge is worse than asking a human.

The call is validated once into its Payload (sagacity.tools._payload): the approval is checked
against its hash, INTENT journals its canonical bytes and the tool receives what they
parse to. Every outcome of the step is built by `_Step.outcome`, from that one value.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from sagacity._errors import (
    ApprovalPolicyError,
    BoundsError,
    InvalidEntryError,
    JournalWriteError,
    SagacityError,
    StoreUnavailableError,
    ToolOutcomeUnknownError,
)
from sagacity.activities._authority import refusal
from sagacity.activities._journal_io import entry_ref, retrying, store_call
from sagacity.activities._liveness import heartbeating, patient_fence_check
from sagacity.activities._models import TOOL_FAILED, OutcomeKind, RunToolInput, ToolOutcome
from sagacity.activities._plan_check import resolve_call
from sagacity.approval._on_record import approval_on_record
from sagacity.approval._policy import DEFAULT_POLICY, ApprovalRequirement
from sagacity.approval._registry_file import RegistryFile
from sagacity.journal._bounds import (
    MAX_ERROR_CHARS,
    MAX_TEXT_ECHO,
    check_value,
    cut,
    exception_text,
)
from sagacity.journal._canonical import JsonValue, canonical_text, sha256_hex
from sagacity.journal._entry import EntryDraft, JournalEntry, check_name
from sagacity.journal._phases import Phase
from sagacity.stores._base import JournalStore, StepClaim
from sagacity.tools._decorators import ToolContext, ToolKind, idempotency_key
from sagacity.tools._payload import Payload
from sagacity.tools._toolbox import Toolbox, ToolResultError, ToolSpec

OUTCOME_UNKNOWN = "ToolOutcomeUnknown"
"""Error type of a run_tool attempt whose tool could not tell whether it took effect."""
TRUNCATION_MARKER = "…[truncated for the model; the journal holds the full result]"


def for_model(result: Any, limit: int) -> tuple[Any, bool]:
    """The result as the model sees it: cut with a marker when its canonical form is
    longer than `limit`, so the conversation stays within Temporal's payload limits.
    (Results nested deeper than the saga's bounds never get here: the runner journals
    them as unjournalable, compensated like any result that cannot be kept.)"""
    text = canonical_text(result, what="tool result")
    if len(text) <= limit:
        return result, False
    return text[:limit] + TRUNCATION_MARKER, True


def _unjournalable(result: Any, error: Exception) -> dict[str, Any]:
    """Stand-in for a result the journal cannot hold: the step ran, so it is journaled
    EXECUTED (and compensated) with what can be said about the result."""
    text = repr(result)
    return {
        "unjournalable_result": {
            "type": type(result).__name__,
            "repr_prefix": text[:2_000],
            "repr_sha256": sha256_hex(text.encode("utf-8", "backslashreplace")),
            "error": str(error)[:2_000],
        }
    }


@dataclass(frozen=True)
class _Step:
    """One step as far as the runner got with it: the request, then the tool and the
    call's Payload once it resolved. Every ToolOutcome of the step is made here."""

    req: RunToolInput
    spec: ToolSpec | None = None
    payload: Payload | None = None

    def outcome(
        self,
        kind: OutcomeKind,
        *,
        error: str | None = None,
        intent: JournalEntry | None = None,
        entry: JournalEntry | None = None,
        result: JsonValue = None,
        limit: int | None = None,
        unjournalable: bool = False,
        replayed: bool = False,
        approval: ApprovalRequirement | None = None,
    ) -> ToolOutcome:
        """The outcome of `kind`; `result` is cut for the model to `limit` characters."""
        shown, was_cut = (result, False) if limit is None else for_model(result, limit)
        return ToolOutcome(
            kind=kind,
            tool=self.req.call.tool[:MAX_TEXT_ECHO],
            step=self.req.step,
            tool_kind=self.spec.kind if self.spec is not None else None,
            payload=self.payload,
            result=shown,
            result_truncated=was_cut,
            result_unjournalable=unjournalable,
            error=None if error is None else error[:MAX_ERROR_CHARS],
            intent=entry_ref(intent) if intent is not None else None,
            outcome=entry_ref(entry) if entry is not None else None,
            replayed=replayed,
            approval=approval,
        )

    def draft(self, phase: Phase, attempt: int, **fields: Any) -> EntryDraft:
        """A journal entry of this step for its Payload (INTENT, EXECUTED, FAILED)."""
        assert self.spec is not None and self.payload is not None
        req = self.req
        return EntryDraft.new(
            req.saga_id, phase, step=req.step, attempt=attempt, tool=self.spec.name,
            input=self.payload.args, **fields,
        )  # fmt: skip


class ToolRunner:
    """Runs one tool step under the journal. Dependencies injected by the worker."""

    def __init__(
        self, store: JournalStore, toolbox: Toolbox, registry: RegistryFile | None = None
    ) -> None:
        self.store = store
        self.toolbox = toolbox
        self.registry = registry

    async def run(self, req: RunToolInput, opened: JournalEntry) -> ToolOutcome:
        """Run one step of the saga `opened` opened (its caller's authority already
        checked against the journal)."""
        outcome = await heartbeating(self._run(req, opened))
        if outcome.kind is OutcomeKind.FAILED:
            # Journaled FAILED already; failing the activity (not retried) is what makes
            # Temporal, and its UI, show the step as failed. The workflow reads the outcome
            # from the details.
            raise ApplicationError(
                cut(f"{outcome.tool} failed: {outcome.error}", MAX_ERROR_CHARS),
                outcome.model_dump(mode="json"),
                type=TOOL_FAILED,
                non_retryable=True,
            )
        return outcome

    async def _run(self, req: RunToolInput, opened: JournalEntry) -> ToolOutcome:
        try:
            spec, payload = resolve_call(self.toolbox, req.call, req.allowed_tools)
        except SagacityError as exc:
            refused = await store_call(self.store.append, _refusal_draft(req, exc))
            return _Step(req).outcome(OutcomeKind.REFUSED, error=str(exc), entry=refused)
        step = _Step(req, spec, payload)
        if spec.kind is ToolKind.IRREVERSIBLE:
            if req.approved_sha256 is None:
                return await self._needs_approval(step)
            if req.approved_sha256 != payload.sha256:
                # The workflow judged the hash already; this is the last line of defence.
                error = "approved hash does not match the payload to run; nothing ran"
                return step.outcome(OutcomeKind.REFUSED, error=error)
            missing = await self._approval_missing(step, opened)
            if missing is not None:
                raise refusal(req.saga_id, f"step {req.step} ({spec.name}): {missing}")

        attempt = activity.info().attempt
        # Retried in place: a connection lost after INTENT committed cannot say so, and
        # a new attempt would find this one's INTENT and call the step unknown although
        # the tool never ran; here the same attempt finds its own INTENT and keeps it.
        claim = await retrying(self.store.begin_step, step.draft(Phase.INTENT, attempt))
        if not claim.claimed:
            return await self._not_claimed(claim, step)
        assert claim.intent is not None
        return await self._execute(step, attempt, claim.intent)

    async def _needs_approval(self, step: _Step) -> ToolOutcome:
        """NEEDS_APPROVAL with what the tool's policy asks for these arguments; a policy
        that fails on them refuses the call (journaled CALL_REFUSED), never guesses."""
        assert step.spec is not None and step.payload is not None
        name = step.spec.name
        try:
            requirement = (step.spec.policy or DEFAULT_POLICY).requirement(step.payload.args)
        except Exception as exc:  # a toolbox rule's bug: refuse, never guess
            problem = ApprovalPolicyError(
                f"the approval policy of {name!r} failed on these arguments "
                f"({type(exc).__name__}: {exc}); nothing ran. Fix the policy's rule"
            )
            refused = await store_call(self.store.append, _refusal_draft(step.req, problem))
            return step.outcome(OutcomeKind.REFUSED, error=str(problem), entry=refused)
        return step.outcome(OutcomeKind.NEEDS_APPROVAL, approval=requirement)

    async def _not_claimed(self, claim: StepClaim, step: _Step) -> ToolOutcome:
        req = step.req
        if claim.outcome is not None:
            recorded = claim.outcome
            if recorded.phase is Phase.FAILED:
                return step.outcome(
                    OutcomeKind.FAILED, error=recorded.error or "", replayed=True,
                    intent=claim.intent, entry=recorded,
                )  # fmt: skip
            return step.outcome(
                OutcomeKind.EXECUTED, result=recorded.result, limit=req.model_result_limit,
                replayed=True, intent=claim.intent, entry=recorded,
            )  # fmt: skip
        if claim.intent is not None:
            await retrying(self.store.fence, req.saga_id, req.step)
            error = (
                f"attempt {claim.intent.attempt} journaled INTENT (seq {claim.intent.seq}) "
                "and no outcome; not run again — a human must check whether it took effect"
            )
            return step.outcome(OutcomeKind.UNKNOWN, error=error, intent=claim.intent)
        return step.outcome(OutcomeKind.FENCED, error="step fenced off by compensation")

    async def _execute(self, step: _Step, attempt: int, intent: JournalEntry) -> ToolOutcome:
        assert step.spec is not None and step.payload is not None
        req, spec, store = step.req, step.spec, self.store
        ctx = ToolContext(
            saga_id=req.saga_id,
            step=req.step,
            attempt=attempt,
            tool=spec.name,
            idempotency_key=idempotency_key(req.saga_id, req.step),
            heartbeat=activity.heartbeat,
            is_fenced=patient_fence_check(store, req.saga_id, req.step),
        )
        unjournalable: str | None = None
        try:
            result = await spec.invoke(step.payload, ctx)
        except asyncio.CancelledError:
            raise
        except ToolResultError as exc:  # it ran: its effect is live, only the result is bad
            result, unjournalable = _unjournalable(exc.value, exc), str(exc)
        except (JournalWriteError, StoreUnavailableError):
            # Raised through ctx.is_fenced() after its patience ran out: the journal failed,
            # not the tool. Journaling FAILED would compensate a healthy saga; let Temporal
            # retry the activity instead (the retry reports this attempt's INTENT UNKNOWN).
            raise
        except ToolOutcomeUnknownError as exc:
            # The tool cannot say whether its effect happened: no outcome is journaled and
            # the attempt fails for good, so the workflow reports the step UNKNOWN (and
            # fences it) instead of FAILED, which would leave a live effect undone.
            raise ApplicationError(
                f"{spec.name}: outcome unknown: {exc}"[:MAX_ERROR_CHARS],
                type=OUTCOME_UNKNOWN,
                non_retryable=True,
            ) from exc
        except (Exception, SystemExit) as exc:  # the tool's own failure
            # SystemExit too: a tool calling sys.exit() must fail its step, not end the
            # worker and every other saga it runs.
            error = exception_text(exc, 10_000)
            failed = await retrying(store.append, step.draft(Phase.FAILED, attempt, error=error))
            return step.outcome(
                OutcomeKind.FAILED, error=cut(error, MAX_ERROR_CHARS), intent=intent, entry=failed
            )
        try:
            check_value(result, "the tool's result")
            executed_draft = step.draft(Phase.EXECUTED, attempt, result=result)
        except (InvalidEntryError, BoundsError) as exc:  # too deep, or over the size limit
            result, unjournalable = _unjournalable(result, exc), str(exc)
            executed_draft = step.draft(Phase.EXECUTED, attempt, result=result)
        executed = await retrying(store.append, executed_draft)
        return step.outcome(
            OutcomeKind.EXECUTED,
            result=executed.result,
            limit=req.model_result_limit,
            error=None if unjournalable is None else f"result not journaled: {unjournalable}",
            unjournalable=unjournalable is not None,
            intent=intent,
            entry=executed,
        )

    async def _approval_missing(self, step: _Step, opened: JournalEntry) -> str | None:
        """What the journal lacks before this irreversible call may run (None: nothing).
        The caller's word that it was approved (`approved_sha256`) is not enough: anyone
        can compute a payload's hash. The tool's own policy for these arguments is the
        floor; a policy that cannot evaluate refuses."""
        assert step.spec is not None and step.payload is not None
        try:
            floor = (step.spec.policy or DEFAULT_POLICY).requirement(step.payload.args)
        except Exception as exc:  # a rule's bug: refuse, never guess
            return f"its approval policy failed on these arguments ({type(exc).__name__})"
        entries = await store_call(self.store.step_entries, step.req.saga_id, step.req.step)
        registry = self.registry.current() if self.registry is not None else None
        return approval_on_record(
            opened,
            entries,
            tool=step.spec.name,
            payload_sha256=step.payload.sha256,
            floor=floor,
            registry=registry,
        )


def _jsonable_or_repr(value: Any) -> Any:
    try:
        check_value(value, "arguments")
        canonical_text(value, limit=64_000)
        return value
    except SagacityError:
        text = repr(value)
        return {"unrepresentable": text[:2_000], "chars": len(text)}


def _refusal_draft(req: RunToolInput, exc: SagacityError) -> EntryDraft:
    """CALL_REFUSED for a call that did not resolve. The entry must be writable whatever
    the caller sent: a tool name that is not a valid entry name (control characters, too
    long) is kept as evidence in the input instead of the tool field."""
    name = req.call.tool
    try:
        check_name(name, "tool", allow_empty=True)
        tool, evidence = name, _jsonable_or_repr(req.call.args)
    except SagacityError:
        tool = ""
        evidence = {"tool": name[:MAX_TEXT_ECHO], "tool_chars": len(name)}
        evidence["args"] = _jsonable_or_repr(req.call.args)
    return EntryDraft.new(
        req.saga_id,
        Phase.CALL_REFUSED,
        step=req.step,
        tool=tool,
        input=evidence,
        error=str(exc)[:10_000],
    )
