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
per call on the call's canonical payload (what the approver sees and the hash covers),
before the request is made.

A policy never fails open. `above` compares money as money (sagacity.approval._amounts): an int, a
float, a Decimal, or a string that is a plain decimal numeral ("50000.00", what a
`Decimal` parameter is in the payload), exactly, never through a float. A value it cannot
read as an amount ("1e5", "NaN", " 5", null, a bool) makes the rule apply, with the reason
given to the approver: it is never taken to be below the limit. A rule naming a
parameter the tool does not have, or one whose schema makes it never an amount (a bool,
an object, a list, any JSON value), is an `ApprovalRuleError` when the toolbox is built
(`check_rules`). A rule that raises, or answers anything but True or False, refuses the
call (`ApprovalPolicyError`; the tool runner journals the refusal and nothing runs).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from sagacity._errors import ApprovalPolicyError, ApprovalRuleError
from sagacity.approval._amounts import amount_of, limit_of, problem_of

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
    """A stricter requirement for the calls whose args match `when` (True or False)."""

    description: str
    when: Callable[[dict[str, Any]], bool] = field(repr=False)
    quorum: int | None = None
    groups: frozenset[str] | None = None
    approvers: frozenset[str] | None = None
    expires_after: timedelta | None = None
    compares: str | None = None
    """The parameter an `above` rule reads as an amount: checked when the toolbox is built
    (the tool has it, and it can be an amount)."""

    def __post_init__(self) -> None:
        # A rule that cannot be a requirement fails at declaration, not on every call.
        self.stricter(self._unread() if self.compares is not None else self.description)

    @classmethod
    def above(cls, arg: str, limit: int | Decimal | str | float, **stricter: Any) -> ArgRule:
        """Applies when `args[arg]` is an amount above `limit`, or is not an amount at all
        (see sagacity.approval._amounts): compared exactly, as Decimal."""
        exact = limit_of(limit)

        def when(args: dict[str, Any]) -> bool:
            amount = amount_of(args.get(arg))
            return amount is None or amount > exact

        return cls(f"{arg} above {exact:,}", when, **stricter, compares=arg)

    def reason(self, args: dict[str, Any]) -> str | None:
        """Why this rule applies to `args` (its description), or None when it does not.
        Raises ApprovalPolicyError when it cannot tell: the call is then refused."""
        try:
            applies = self.when(args)
            unread = self.compares is not None and amount_of(args.get(self.compares)) is None
        except Exception as exc:  # the toolbox's code: a bug refuses, never guesses
            raise ApprovalPolicyError(
                f"rule {self.description!r} raised {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(applies, bool):
            raise ApprovalPolicyError(
                f"rule {self.description!r} answered {type(applies).__name__}, not True or "
                "False; make its `when` return a bool"
            )
        if not applies:
            return None
        return self._unread() if unread else self.description

    def stricter(self, why: str) -> ApprovalRequirement:
        """What this rule adds to a call it applies to, `why` being its reason."""
        return ApprovalRequirement(
            approvers=_names(self.approvers),
            groups=_names(self.groups),
            quorum=self.quorum or 1,
            separate_from_requester=False,
            expires_after_seconds=_seconds(self.expires_after),
            because=[why],
        )

    def _unread(self) -> str:
        return f"{self.description} ({self.compares} is not a plain decimal number)"


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
        if not isinstance(self.rules, tuple | list) or not all(
            isinstance(rule, ArgRule) for rule in self.rules
        ):  # anything else would fail, or be skipped, on every call
            raise ApprovalPolicyError(
                f"ApprovalPolicy(rules=...) takes a tuple of ArgRule, got {self.rules!r}; "
                'e.g. rules=(ArgRule.above("amount", 10_000, quorum=2),)'
            )

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
        """The requirement for one call: the base policy, tightened by each matching rule.
        ApprovalPolicyError when a rule cannot tell whether it applies."""
        req = self.base()
        for rule in self.rules:
            why = rule.reason(args)
            if why is not None:
                req = req.tightened(rule.stricter(why))
        return req


DEFAULT_POLICY = ApprovalPolicy()


def check_rules(
    tool: str, policy: ApprovalPolicy | None, parameters: Mapping[str, Any], where: str = ""
) -> None:
    """Refuse, when the toolbox is built, a rule that could never apply: one naming a
    parameter the tool does not have, or one whose JSON schema (`parameters`, the tool's
    object schema: a Python tool's, or an MCP server's `inputSchema`) makes it never an
    amount. Raises ApprovalRuleError naming the tool, the rule and the parameter."""
    if policy is None:
        return
    properties = parameters.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    for rule in policy.rules:
        arg = rule.compares
        if arg is None:
            continue
        what = f"tool {tool!r}{where}: approval rule {rule.description!r} reads {arg!r}"
        if arg not in properties:
            close = difflib.get_close_matches(arg, list(properties), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            listed = ", ".join(map(repr, properties)) or "none"
            raise ApprovalRuleError(
                f"{what}, which the tool does not have (its parameters: {listed}){hint} "
                "Name one of its parameters in ArgRule.above(...)"
            )
        problem = problem_of(properties[arg], parameters)
        if problem is not None:
            raise ApprovalRuleError(
                f"{what}, which it cannot compare: {problem}. Type the amount as Decimal "
                '(or int; a JSON Schema "number", "integer" or numeric "string"), or '
                "drop the rule"
            )


__all__ = [
    "DEFAULT_POLICY",
    "ApprovalPolicy",
    "ApprovalRequirement",
    "ArgRule",
    "check_rules",
]
