"""The doors into a saga: approval signals, the `decide` update and the queries.

One dynamic handler receives every signal with its raw payloads, so that a body the
converter cannot decode, or a signal with the wrong number of arguments, is refused and
journaled like any malformed decision. Named handlers would be skipped by the SDK for
undecodable bodies (no evidence) and raise TypeError for a wrong arity (a failed
workflow task, retried forever: the saga would be wedged). The `decide` update is
dynamic for the same reason: a named handler's arguments are decoded before the
validator runs, and an update whose body cannot be decoded would be rejected with no
history.

AgentSaga declares these on its class; a user's workflow gets them registered by the
saga object when it opens (`install`), on the workflow itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from sagacity.workflows._models import (
        DecisionResult,
        DirtyStep,
        PendingApproval,
        ResolutionResult,
        SagaView,
        StepReport,
    )

from sagacity.workflows._human_desk import RESOLVE
from sagacity.workflows._saga_errors import SagaUsageError

if TYPE_CHECKING:
    from sagacity.workflows._approval_gate import ApprovalGate
    from sagacity.workflows._human_desk import HumanDesk

DECIDE_UPDATE = "decide"
UPDATES = (DECIDE_UPDATE, RESOLVE)
SIGNALS = ("approve", "reject", RESOLVE)
QUERIES = ("status", "steps", "pending_approval", "dirty")


class SagaDoors:
    """Signal, update and query handlers over one saga's gate and state."""

    def __init__(
        self, gate: ApprovalGate, desk: HumanDesk, view: Any, steps: Any, dirty: Any
    ) -> None:
        self._gate = gate
        self._desk = desk
        self._view = view
        self._steps = steps
        self._dirty = dirty
        self._running = 0

    @property
    def idle(self) -> bool:
        """No signal or update of the saga's is being handled (the workflow's own
        handlers are not counted: one of them may be waiting for the saga to end)."""
        return self._running == 0

    async def on_signal(self, name: str, args: Sequence[RawValue]) -> None:
        self._running += 1
        try:
            await self._on_signal(name, args)
        finally:
            self._running -= 1

    async def on_update(
        self, name: str, args: Sequence[RawValue]
    ) -> DecisionResult | ResolutionResult:
        self._running += 1
        try:
            raw = one(tuple(decoded(a) for a in args))
            if name == RESOLVE:
                return await self._desk.on_update(raw)
            return await self._gate.on_update(raw)
        finally:
            self._running -= 1

    async def _on_signal(self, name: str, args: Sequence[RawValue]) -> None:
        raw = one(tuple(decoded(a) for a in args))
        if name in ("approve", "reject"):
            await self._gate.on_signal(raw, approve=name == "approve")
        elif name == RESOLVE:
            await self._desk.on_signal(raw)
        else:
            workflow.logger.warning("signal %r is not one this saga takes; ignored", name)

    def validate_update(self, name: str, args: Sequence[RawValue]) -> None:
        if name not in UPDATES:
            raise ApplicationError(
                f"update {name[:100]!r} is not one this saga takes; decisions go through "
                f"{DECIDE_UPDATE!r}, resolutions of dirty state through {RESOLVE!r}",
                type="UnknownUpdate",
            )
        raw = one(tuple(decoded(a) for a in args))
        if name == RESOLVE:
            self._desk.validate(raw)
        else:
            self._gate.validate(raw)

    def status(self) -> SagaView:
        view: SagaView = self._view()
        return view

    def steps(self) -> list[StepReport]:
        steps: list[StepReport] = self._steps()
        return steps

    def pending_approval(self) -> PendingApproval | None:
        return self._gate.pending_view()

    def dirty(self) -> list[DirtyStep]:
        dirty: list[DirtyStep] = self._dirty()
        return dirty

    def install(self) -> None:
        """Register the handlers on the running workflow. Refused (SagaUsageError) when
        the workflow already has a handler the saga needs: named handlers win over a
        dynamic one, so an `approve` of the workflow's own would bypass the gate."""
        taken = [f"dynamic {kind} handler" for kind, get in _DYNAMIC if get() is not None]
        taken += [f"signal {n!r}" for n in SIGNALS if workflow.get_signal_handler(n)]
        taken += [f"update {n!r}" for n in UPDATES if workflow.get_update_handler(n)]
        taken += [f"query {n!r}" for n in QUERIES if workflow.get_query_handler(n)]
        if taken:
            raise SagaUsageError(
                f"this workflow already has {', '.join(taken)}; a saga registers its own "
                f"(signals {', '.join(SIGNALS)}, updates {', '.join(UPDATES)}, queries "
                f"{', '.join(QUERIES)} and the dynamic signal and update handlers): "
                "rename or remove the workflow's"
            )
        workflow.set_dynamic_signal_handler(self.on_signal)
        workflow.set_dynamic_update_handler(self.on_update, validator=self.validate_update)
        workflow.set_query_handler("status", self.status)
        workflow.set_query_handler("steps", self.steps)
        workflow.set_query_handler("pending_approval", self.pending_approval)
        workflow.set_query_handler("dirty", self.dirty)


_DYNAMIC = (
    ("signal", workflow.get_dynamic_signal_handler),
    ("update", workflow.get_dynamic_update_handler),
)


def decoded(raw: RawValue) -> Any:
    """The JSON value of one signal or update argument, or a short description of why it
    has none (kept as evidence; the judge refuses it as MALFORMED)."""
    try:
        return workflow.payload_converter().from_payload(raw.payload)
    except Exception as exc:  # any decoding failure is the sender's, not the saga's
        encoding = raw.payload.metadata.get("encoding", b"").decode("utf-8", "replace")
        return (
            f"undecodable argument ({encoding or 'no encoding'}, "
            f"{len(raw.payload.data)} bytes): {type(exc).__name__}: {exc}"
        )[:1_000]


def one(args: tuple[Any, ...]) -> Any:
    """The decision a signal carried: its single argument; none is None and several are
    kept as a list, both refused as MALFORMED by the judge."""
    if len(args) == 1:
        return args[0]
    return None if not args else list(args)
