"""A resolution as the workflow takes it, for the tests that judge one without a worker."""

from __future__ import annotations

from typing import Any

from sagacity.approval._models import Refusal, Verdict
from sagacity.approval._resolutions import (
    DeskView,
    ResolutionContext,
    judge_resolution,
    parse_resolution,
)


def judged(raw: Any, view: DeskView, context: ResolutionContext) -> Verdict:
    """`raw` parsed, then judged against `view`: a body that does not parse is refused
    with its parse refusal, as the workflow refuses it."""
    parsed = parse_resolution(raw)
    if isinstance(parsed, Refusal):
        return Verdict.refuse(parsed.reason, parsed.detail)
    return judge_resolution(view, parsed, context)


def outcome(verdict: Verdict) -> str:
    """ACCEPTED, or the refusal's reason."""
    if verdict.accepted or verdict.refusal is None:
        return "ACCEPTED"
    return verdict.refusal.reason.value
