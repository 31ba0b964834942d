"""Approval policies: who may approve a tool's call, how many people, and when not.

A policy is declared with the tool (`@irreversible(policy=ApprovalPolicy(...))`) and
evaluated by the worker on the call's validated args, which gives an
`ApprovalRequirement`: plain data that travels to the workflow with the request, is
journaled with AWAITING_APPROVAL and shown with the pending approval. A saga can tighten
it (`SagaOptions.approval`, `SagaOptions.approvers`), never loosen it: allow-lists are
intersected, the larger quorum and the shorter expiry win, separation of duties stays on
once either side asks for it.

Rules on the args make a requirement stricter for some calls only, e.g. a wire above
10,000 needs two people from finance: `ArgRule.above("amount", 10_000, quorum=2,
groups={"finance"})`. A rule is code of the toolbox (never data from a caller), run once
per call, before the request is made.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

MAX_QUORUM = 20
MAX_NAMES = 100

_Names = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=256)]], Field(max_length=MAX_NAMES)
]


def _intersect(a: list[str] | None, b: list[str] | None) -> list[str] | None:
    if a is None:
        return b
    if b is None:
        return a
    return sorted(set(a) & set(b))


def _least(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


class ApprovalRequirement(BaseModel):
    """What one pending approval needs before its step runs."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    approvers: _Names | None = None
    """Identities that may decide (None: anyone the other rules allow)."""
    groups: _Names | None = None
    """Registry groups, one of which a decider must be in (None: no group needed)."""
    quorum: Annotated[int, Field(ge=1, le=MAX_QUORUM)] = 1
    """Distinct people whose approvals are needed; one rejection rejects."""
    separate_from_requester: bool = True
    """The saga's requester cannot approve its steps."""
    expires_after_seconds: Annotated[float, Field(gt=0, le=366 * 24 * 3600)] | None = None
    """An approval stops counting this long after it was given (a quorum must gather
    within it), and a statement issued longer ago is refused."""
    because: Annotated[list[Annotated[str, Field(max_length=500)]], Field(max_length=20)] = Field(
        default_factory=list
    )
    """The rules that made this requirement stricter than the tool's base policy."""

    def tightened(self, other: ApprovalRequirement | None) -> ApprovalRequirement:
        """This requirement made at least as strict as `other`."""
        if other is None:
            return self
        return ApprovalRequirement(
            approvers=_intersect(self.approvers, other.approvers),
            groups=_intersect(self.groups, other.groups),
            quorum=max(self.quorum, other.quorum),
            separate_from_requester=self.separate_from_requester or other.separate_from_requester,
            expires_after_seconds=_least(self.expires_after_seconds, other.expires_after_seconds),
            because=[*self.because, *other.because],
        )

    def who(self) -> str:
        """Who may decide, in words ("finance", "alice or bob", "anyone")."""
        parts = []
        if self.groups is not None:
            parts.append(" or ".join(self.groups) or "no group (the lists do not overlap)")
        if self.approvers is not None:
            names = " or ".join(self.approvers) or "nobody (the lists do not overlap)"
            parts.append(names if not parts else f"among {names}")
        return " ".join(parts) or "any approver"

    def needs(self, counted: int) -> str:
        """What is still needed, e.g. "1 of 2 approvals from finance"."""
        left = max(self.quorum - counted, 0)
        noun = "approval" if self.quorum == 1 else "approvals"
        return f"{left} of {self.quorum} {noun} from {self.who()}"


@dataclass(frozen=True)
class ArgRule:
    """A stricter requirement for the calls whose args match `when`."""

    description: str
    when: Callable[[dict[str, Any]], bool] = field(repr=False)
    quorum: int | None = None
    groups: frozenset[str] | None = None
    approvers: frozenset[str] | None = None
    expires_after: timedelta | None = None

    @classmethod
    def above(cls, arg: str, limit: float, **stricter: Any) -> ArgRule:
        """Applies when `args[arg]` is a number above `limit`."""

        def when(args: dict[str, Any]) -> bool:
            value = args.get(arg)
            return isinstance(value, int | float) and not isinstance(value, bool) and value > limit

        return cls(f"{arg} above {limit:,}", when, **stricter)


def _seconds(span: timedelta | None) -> float | None:
    return span.total_seconds() if span is not None else None


def _names(values: Iterable[str] | None) -> list[str] | None:
    if isinstance(values, str):
        raise TypeError("pass a set of names, not one string")
    return None if values is None else sorted(set(values))


@dataclass(frozen=True)
class ApprovalPolicy:
    """A tool's approval policy (see the module docstring)."""

    approvers: frozenset[str] | None = None
    groups: frozenset[str] | None = None
    quorum: int = 1
    separate_from_requester: bool = True
    expires_after: timedelta | None = None
    rules: tuple[ArgRule, ...] = ()

    def __post_init__(self) -> None:
        self.base()  # a policy that cannot be a requirement fails at declaration

    def base(self) -> ApprovalRequirement:
        return ApprovalRequirement(
            approvers=_names(self.approvers),
            groups=_names(self.groups),
            quorum=self.quorum,
            separate_from_requester=self.separate_from_requester,
            expires_after_seconds=self.expires_after.total_seconds()
            if self.expires_after
            else None,
        )

    def requirement(self, args: dict[str, Any]) -> ApprovalRequirement:
        """The requirement for one call: the base policy, tightened by each matching rule."""
        req = self.base()
        for rule in self.rules:
            if rule.when(args):
                req = req.tightened(
                    ApprovalRequirement(
                        approvers=_names(rule.approvers),
                        groups=_names(rule.groups),
                        quorum=rule.quorum or 1,
                        separate_from_requester=False,
                        expires_after_seconds=_seconds(rule.expires_after),
                        because=[rule.description],
                    )
                )
        return req


DEFAULT_POLICY = ApprovalPolicy()

__all__ = ["DEFAULT_POLICY", "ApprovalPolicy", "ApprovalRequirement", "ArgRule"]
