"""The journaled tool call: INTENT, run, EXECUTED or FAILED, with retries made safe.

Temporal runs activities at least once, so the step is claimed under the saga's lock
first (`JournalStore.begin_step`): an outcome already journaled is returned without
running the tool again, and an INTENT of another attempt with no outcome (a worker that
died mid-call, an attempt that timed out and may still be running) is reported UNKNOWN
rather than run a second time — a second charge is worse than asking a human.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from sagacity.activities.authority import refusal
from sagacity.activities.io_models import (
    TOOL_FAILED,
    EntryRef,
    OutcomeKind,
    RunToolInput,
    ToolOutcome,
)
from sagacity.activities.journal_io import store_call
from sagacity.activities.plan_check import resolve_call
from sagacity.approval_on_record import approval_on_record
from sagacity.approval_policy import DEFAULT_POLICY
from sagacity.approvals import approval_hash
from sagacity.bounds import MAX_ERROR_CHARS, MAX_TEXT_ECHO, check_value, cut, exception_text
from sagacity.canonical import canonical_text, sha256_hex
from sagacity.entry import EntryDraft, JournalEntry, check_name
from sagacity.errors import (
    ApprovalPolicyError,
    BoundsError,
    InvalidEntryError,
    JournalWriteError,
    SagacityError,
    StoreUnavailableError,
    ToolOutcomeUnknownError,
)
from sagacity.phases import Phase
from sagacity.registry import RegistryFile
from sagacity.stores.base import JournalStore, StepClaim
from sagacity.toolbox import Toolbox, ToolResultError, ToolSpec
from sagacity.tools import ToolContext, ToolKind, idempotency_key

T = TypeVar("T")

HEARTBEAT_EVERY_S = 5.0
OUTCOME_UNKNOWN = "ToolOutcomeUnknown"
"""Error type of a run_tool attempt whose tool could not tell whether it took effect."""
TRUNCATION_MARKER = "…[truncated for the model; the journal holds the full result]"


def entry_ref(entry: JournalEntry) -> EntryRef:
    return EntryRef(seq=entry.seq, hash=entry.hash, phase=entry.phase)


async def retrying(func: Callable[..., T], *args: Any) -> T:
    """A store call retried in place while the journal is unreachable.

    Used where giving up would turn a known fact into an unknown one (the outcome of a
    tool that already ran, a fence before an undo). It is bounded by the activity's own
    timeout, and the activity heartbeats meanwhile.
    """
    delay = 0.2
    while True:
        try:
            return await store_call(func, *args)
        except (JournalWriteError, StoreUnavailableError) as exc:
            activity.logger.warning("journal unavailable, retrying in %.1fs: %s", delay, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)


def for_model(result: Any, limit: int) -> tuple[Any, bool]:
    """The result as the model sees it: cut with a marker when its canonical form is
    longer than `limit`, so the conversation stays within Temporal's payload limits.
    (Results nested deeper than the saga's bounds never get here: the runner journals
    them as unjournalable, compensated like any result that cannot be kept.)"""
    text = canonical_text(result, what="tool result")
    if len(text) <= limit:
        return result, False
    return text[:limit] + TRUNCATION_MARKER, True


def _heartbeat_period() -> float:
    """A third of the heartbeat timeout (at most HEARTBEAT_EVERY_S): a live worker with a
    slow tool must never look dead. The SDK throttles what it actually sends."""
    timeout = activity.info().heartbeat_timeout
    if not timeout:
        return HEARTBEAT_EVERY_S
    return max(0.05, min(HEARTBEAT_EVERY_S, timeout.total_seconds() / 3))


async def heartbeating(work: Awaitable[T], details: Sequence[Any] = ("running",)) -> T:
    """Await `work` while heartbeating `details`, so cancellation and worker loss are
    noticed. `details` is read at each beat: a caller may fill a list it passed in (the
    compensation runner reports the EXECUTED evidence once it has read it)."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=_heartbeat_period())
            if done:
                return task.result()
            activity.heartbeat(*details)
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


def _patient_fence_check(store: JournalStore, saga_id: str, step: int) -> Callable[[], bool]:
    """`ToolContext.is_fenced` for one step: a journal blip is retried in place rather than
    surfacing in the tool as if the tool had failed. Its patience is half the heartbeat
    timeout (at most 30 s), because an async tool calls it on the event loop, where
    waiting also holds back every heartbeat of this worker."""
    timeout = activity.info().heartbeat_timeout
    patience = min(30.0, timeout.total_seconds() / 2) if timeout else 30.0

    def is_fenced() -> bool:
        deadline = time.monotonic() + patience
        delay = 0.2
        while True:
            try:
                return store.is_fenced(saga_id, step)
            except (JournalWriteError, StoreUnavailableError):
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    return is_fenced


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
        base: dict[str, Any] = {"tool": req.call.tool[:MAX_TEXT_ECHO], "step": req.step}
        try:
            spec, args = self._resolve(req)
        except SagacityError as exc:
            refused = await store_call(self.store.append, _refusal_draft(req, exc))
            return ToolOutcome(
                kind=OutcomeKind.REFUSED,
                error=str(exc)[:MAX_ERROR_CHARS],
                outcome=entry_ref(refused),
                **base,
            )
        base.update(tool_kind=spec.kind, args=args)

        if spec.kind is ToolKind.IRREVERSIBLE:
            digest = approval_hash(spec.name, args)
            base["payload_sha256"] = digest
            if req.approved_sha256 is None:
                try:
                    requirement = (spec.policy or DEFAULT_POLICY).requirement(args)
                except Exception as exc:  # a toolbox rule's bug: refuse, never guess
                    problem = ApprovalPolicyError(
                        f"the approval policy of {spec.name!r} failed on these arguments "
                        f"({type(exc).__name__}: {exc}); nothing ran. Fix the policy's rule"
                    )
                    refused = await store_call(self.store.append, _refusal_draft(req, problem))
                    return ToolOutcome(
                        kind=OutcomeKind.REFUSED,
                        error=str(problem)[:MAX_ERROR_CHARS],
                        outcome=entry_ref(refused),
                        **base,
                    )
                return ToolOutcome(kind=OutcomeKind.NEEDS_APPROVAL, approval=requirement, **base)
            if req.approved_sha256 != digest:
                # The workflow judged the hash already; this is the last line of defence.
                return ToolOutcome(
                    kind=OutcomeKind.REFUSED,
                    error="approved hash does not match the payload to run; nothing ran",
                    **base,
                )
            missing = await self._approval_missing(req, spec, args, digest, opened)
            if missing is not None:
                raise refusal(req.saga_id, f"step {req.step} ({spec.name}): {missing}")

        attempt = activity.info().attempt
        intent = EntryDraft.new(
            req.saga_id, Phase.INTENT, step=req.step, attempt=attempt, tool=spec.name, input=args
        )
        # Retried in place: a connection lost after INTENT committed cannot say so, and
        # a new attempt would find this one's INTENT and call the step unknown although
        # the tool never ran; here the same attempt finds its own INTENT and keeps it.
        claim = await retrying(self.store.begin_step, intent)
        if not claim.claimed:
            return await self._not_claimed(claim, req, base)
        assert claim.intent is not None
        return await self._execute(spec, args, req, attempt, claim.intent, base)

    async def _not_claimed(
        self, claim: StepClaim, req: RunToolInput, base: dict[str, Any]
    ) -> ToolOutcome:
        intent = entry_ref(claim.intent) if claim.intent else None
        if claim.outcome is not None:
            recorded = claim.outcome
            if recorded.phase is Phase.FAILED:
                return ToolOutcome(
                    kind=OutcomeKind.FAILED,
                    error=(recorded.error or "")[:MAX_ERROR_CHARS],
                    replayed=True,
                    intent=intent,
                    outcome=entry_ref(recorded),
                    **base,
                )
            shown, was_cut = for_model(recorded.result, req.model_result_limit)
            return ToolOutcome(
                kind=OutcomeKind.EXECUTED,
                result=shown,
                result_truncated=was_cut,
                replayed=True,
                intent=intent,
                outcome=entry_ref(recorded),
                **base,
            )
        if claim.intent is not None:
            await retrying(self.store.fence, req.saga_id, req.step)
            return ToolOutcome(
                kind=OutcomeKind.UNKNOWN,
                error=(
                    f"attempt {claim.intent.attempt} journaled INTENT (seq {claim.intent.seq}) "
                    "and no outcome; not run again — a human must check whether it took effect"
                ),
                intent=intent,
                **base,
            )
        return ToolOutcome(kind=OutcomeKind.FENCED, error="step fenced off by compensation", **base)

    async def _execute(
        self,
        spec: ToolSpec,
        args: dict[str, Any],
        req: RunToolInput,
        attempt: int,
        intent: JournalEntry,
        base: dict[str, Any],
    ) -> ToolOutcome:
        store = self.store
        ctx = ToolContext(
            saga_id=req.saga_id,
            step=req.step,
            attempt=attempt,
            tool=spec.name,
            idempotency_key=idempotency_key(req.saga_id, req.step),
            heartbeat=activity.heartbeat,
            is_fenced=_patient_fence_check(store, req.saga_id, req.step),
        )

        def draft(phase: Phase, **fields: Any) -> EntryDraft:
            return EntryDraft.new(
                req.saga_id, phase, step=req.step, attempt=attempt, tool=spec.name, input=args,
                **fields,
            )  # fmt: skip

        unjournalable: str | None = None
        try:
            result = await spec.invoke(args, ctx)
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
            failed = await retrying(store.append, draft(Phase.FAILED, error=error))
            return ToolOutcome(
                kind=OutcomeKind.FAILED,
                error=cut(error, MAX_ERROR_CHARS),
                intent=entry_ref(intent),
                outcome=entry_ref(failed),
                **base,
            )
        try:
            check_value(result, "the tool's result")
            executed_draft = draft(Phase.EXECUTED, result=result)
        except (InvalidEntryError, BoundsError) as exc:  # too deep, or over the size limit
            result, unjournalable = _unjournalable(result, exc), str(exc)
            executed_draft = draft(Phase.EXECUTED, result=result)
        executed = await retrying(store.append, executed_draft)
        shown, was_cut = for_model(executed.result, req.model_result_limit)
        return ToolOutcome(
            kind=OutcomeKind.EXECUTED,
            result=shown,
            result_truncated=was_cut,
            error=None
            if unjournalable is None
            else f"result not journaled: {unjournalable}"[:MAX_ERROR_CHARS],
            result_unjournalable=unjournalable is not None,
            intent=entry_ref(intent),
            outcome=entry_ref(executed),
            **base,
        )

    async def _approval_missing(
        self,
        req: RunToolInput,
        spec: ToolSpec,
        args: dict[str, Any],
        digest: str,
        opened: JournalEntry,
    ) -> str | None:
        """What the journal lacks before this irreversible call may run (None: nothing).
        The caller's word that it was approved (`approved_sha256`) is not enough: anyone
        can compute a payload's hash. The tool's own policy for these arguments is the
        floor; a policy that cannot evaluate refuses."""
        try:
            floor = (spec.policy or DEFAULT_POLICY).requirement(args)
        except Exception as exc:  # a rule's bug: refuse, never guess
            return f"its approval policy failed on these arguments ({type(exc).__name__})"
        entries = await store_call(self.store.step_entries, req.saga_id, req.step)
        registry = self.registry.current() if self.registry is not None else None
        return approval_on_record(
            opened, entries, tool=spec.name, payload_sha256=digest, floor=floor, registry=registry
        )

    def _resolve(self, req: RunToolInput) -> tuple[ToolSpec, dict[str, Any]]:
        return resolve_call(self.toolbox, req.call, req.allowed_tools)


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
