"""The journaled tool call: INTENT, run, EXECUTED or FAILED, with retries made safe.

Temporal runs activities at least once, so this activity reads the step's journal first:
an outcome already journaled is returned without running the tool again, and an INTENT
with no outcome (a worker that died mid-call, an attempt that timed out) is reported as
UNKNOWN rather than run a second time — a second charge is worse than asking a human.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from temporalio import activity

from activities.models import (
    INVALID_ARGUMENTS_KEY,
    EntryRef,
    OutcomeKind,
    RunToolInput,
    ToolOutcome,
)
from sagacity.approvals import approval_hash
from sagacity.canonical import canonical_text
from sagacity.entry import EntryDraft, JournalEntry
from sagacity.errors import (
    JournalWriteError,
    SagacityError,
    StoreUnavailableError,
    ToolInputError,
)
from sagacity.phases import Phase
from sagacity.stores.base import JournalStore
from sagacity.toolbox import Toolbox, ToolSpec
from sagacity.tools import ToolContext, ToolKind

T = TypeVar("T")

HEARTBEAT_EVERY_S = 5.0
TRUNCATION_MARKER = "…[truncated for the model; the journal holds the full result]"


def entry_ref(entry: JournalEntry) -> EntryRef:
    return EntryRef(seq=entry.seq, hash=entry.hash, phase=entry.phase.value)


async def store_call(func: Callable[..., T], *args: Any) -> T:
    """Run a blocking store call off the event loop."""
    return await asyncio.to_thread(func, *args)


async def append_retrying(
    store: JournalStore, draft: EntryDraft, attempts: int = 5
) -> JournalEntry:
    """Append, retrying transient write failures in place.

    Used for the outcome of a tool that already ran: failing the activity there would
    leave an orphan INTENT and turn a known outcome into an unknown one.
    """
    delay = 0.2
    for attempt in range(1, attempts + 1):
        try:
            return await store_call(store.append, draft)
        except (JournalWriteError, StoreUnavailableError):
            if attempt == attempts:
                raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
    raise AssertionError("unreachable")


def for_model(result: Any, limit: int) -> tuple[Any, bool]:
    """The result as the model sees it: cut with a marker when its canonical form is
    longer than `limit`, so the conversation stays within Temporal's payload limits."""
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


async def _heartbeating(work: Awaitable[T]) -> T:
    """Await `work` while heartbeating, so cancellation and worker loss are noticed."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=_heartbeat_period())
            if done:
                return task.result()
            activity.heartbeat("running")
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


class ToolRunner:
    """Runs one tool step under the journal. Dependencies injected by the worker."""

    def __init__(self, store: JournalStore, toolbox: Toolbox) -> None:
        self.store = store
        self.toolbox = toolbox

    async def run(self, req: RunToolInput) -> ToolOutcome:
        base = {"tool": req.call.tool, "step": req.step}
        try:
            spec, args = self._resolve(req)
        except SagacityError as exc:
            refused = await store_call(
                self.store.append,
                EntryDraft.new(
                    req.saga_id,
                    Phase.CALL_REFUSED,
                    step=req.step,
                    tool=req.call.tool[:256],
                    input=_jsonable_or_repr(req.call.args),
                    error=str(exc),
                ),
            )
            return ToolOutcome(
                kind=OutcomeKind.REFUSED, error=str(exc), outcome=entry_ref(refused), **base
            )
        base["tool_kind"] = spec.kind.value
        base["args"] = args
        base["compensation"] = spec.compensation.name if spec.compensation else None

        if spec.kind is ToolKind.IRREVERSIBLE:
            digest = approval_hash(spec.name, args)
            if req.approved_sha256 is None:
                return ToolOutcome(kind=OutcomeKind.NEEDS_APPROVAL, payload_sha256=digest, **base)
            if req.approved_sha256 != digest:
                # The workflow judged the hash already; this is the last line of defence.
                return ToolOutcome(
                    kind=OutcomeKind.REFUSED,
                    error="approved hash does not match the payload to run; nothing ran",
                    payload_sha256=digest,
                    **base,
                )

        prior = await store_call(self.store.step_entries, req.saga_id, req.step)
        recorded = _recorded_outcome(prior)
        if recorded is not None:
            return _replay(recorded, prior, req, base)
        intent_prior = next((e for e in prior if e.phase is Phase.INTENT), None)
        if intent_prior is not None:
            await store_call(self.store.fence, req.saga_id, req.step)
            return ToolOutcome(
                kind=OutcomeKind.UNKNOWN,
                error=(
                    f"attempt {intent_prior.attempt} journaled INTENT (seq {intent_prior.seq}) "
                    "and no outcome; not run again — a human must check whether it took effect"
                ),
                intent=entry_ref(intent_prior),
                **base,
            )
        if await store_call(self.store.is_fenced, req.saga_id, req.step):
            return ToolOutcome(
                kind=OutcomeKind.FENCED, error="step fenced off by compensation", **base
            )

        attempt = activity.info().attempt
        intent = await store_call(
            self.store.append,
            EntryDraft.new(
                req.saga_id,
                Phase.INTENT,
                step=req.step,
                attempt=attempt,
                tool=spec.name,
                input=args,
            ),
        )
        return await self._execute(spec, args, req, attempt, intent, base)

    async def _execute(
        self,
        spec: ToolSpec,
        args: dict[str, Any],
        req: RunToolInput,
        attempt: int,
        intent: JournalEntry,
        base: dict[str, Any],
    ) -> ToolOutcome:
        ctx = ToolContext(
            saga_id=req.saga_id,
            step=req.step,
            attempt=attempt,
            tool=spec.name,
            idempotency_key=f"{req.saga_id}:{req.step}",
            heartbeat=activity.heartbeat,
            is_fenced=lambda: self.store.is_fenced(req.saga_id, req.step),
        )
        started = time.monotonic()
        try:
            result = await _heartbeating(spec.invoke(args, ctx))
            draft = EntryDraft.new(
                req.saga_id,
                Phase.EXECUTED,
                step=req.step,
                attempt=attempt,
                tool=spec.name,
                input=args,
                result=result,
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the tool's own failure (or an unjournalable result)
            error = f"{type(exc).__name__}: {exc}"
            failed = await append_retrying(
                self.store,
                EntryDraft.new(
                    req.saga_id,
                    Phase.FAILED,
                    step=req.step,
                    attempt=attempt,
                    tool=spec.name,
                    input=args,
                    error=error[:10_000],
                ),
            )
            activity.logger.info(
                "tool %s failed after %.3fs: %s", spec.name, time.monotonic() - started, error
            )
            return ToolOutcome(
                kind=OutcomeKind.FAILED,
                error=error,
                intent=entry_ref(intent),
                outcome=entry_ref(failed),
                **base,
            )
        executed = await append_retrying(self.store, draft)
        shown, cut = for_model(executed.result, req.model_result_limit)
        return ToolOutcome(
            kind=OutcomeKind.EXECUTED,
            result=shown,
            result_truncated=cut,
            intent=entry_ref(intent),
            outcome=entry_ref(executed),
            **base,
        )

    def _resolve(self, req: RunToolInput) -> tuple[ToolSpec, dict[str, Any]]:
        toolbox = self.toolbox
        if req.allowed_tools is not None:
            toolbox = toolbox.restrict(req.allowed_tools)
        spec = toolbox.get(req.call.tool)
        if set(req.call.args) == {INVALID_ARGUMENTS_KEY}:
            raw = str(req.call.args[INVALID_ARGUMENTS_KEY])
            raise ToolInputError(
                f"arguments for tool {spec.name!r} are not a JSON object (received "
                f"{raw[:200]!r}); nothing ran — call it again with a JSON object that matches "
                "its parameters schema"
            )
        return spec, spec.validate(req.call.args)


def _recorded_outcome(prior: list[JournalEntry]) -> JournalEntry | None:
    return next((e for e in prior if e.phase in (Phase.EXECUTED, Phase.FAILED)), None)


def _replay(
    recorded: JournalEntry, prior: list[JournalEntry], req: RunToolInput, base: dict[str, Any]
) -> ToolOutcome:
    intent = next(
        (e for e in prior if e.phase is Phase.INTENT and e.attempt == recorded.attempt), None
    )
    if recorded.phase is Phase.FAILED:
        return ToolOutcome(
            kind=OutcomeKind.FAILED,
            error=recorded.error,
            replayed=True,
            intent=entry_ref(intent) if intent else None,
            outcome=entry_ref(recorded),
            **base,
        )
    shown, cut = for_model(recorded.result, req.model_result_limit)
    return ToolOutcome(
        kind=OutcomeKind.EXECUTED,
        result=shown,
        result_truncated=cut,
        replayed=True,
        intent=entry_ref(intent) if intent else None,
        outcome=entry_ref(recorded),
        **base,
    )


def _jsonable_or_repr(value: Any) -> Any:
    try:
        canonical_text(value, limit=64_000)
        return value
    except SagacityError:
        return {"unrepresentable": repr(value)[:2_000]}
