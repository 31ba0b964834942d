"""Resolving a tool call against the toolbox, one call or a whole plan at a time.

One resolution for both doors: the runner resolves each call before journaling INTENT,
and a plan is resolved whole before its first step runs, so a plan with a typo in step 2
is refused with nothing done instead of running step 1 and then undoing it.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from sagacity._errors import BoundsError, SagacityError, ToolInputError, UnknownToolError
from sagacity.activities._models import (
    INVALID_ARGUMENTS_KEY,
    REFUSED_ARGUMENTS_KEY,
    PlanCheck,
    PlanProblem,
    ToolCall,
)
from sagacity.journal._bounds import MAX_ARGS_BYTES, MAX_TEXT_ECHO, check_value, echo
from sagacity.tools._decorators import ToolKind
from sagacity.tools._payload import Payload
from sagacity.tools._toolbox import Toolbox, ToolSpec

MAX_PLAN_PROBLEMS = 20


def _unknown(name: str, toolbox: Toolbox) -> UnknownToolError:
    hint = ""
    if len(name) <= 64:  # difflib on a hostile megabyte name would take seconds
        close = difflib.get_close_matches(name, toolbox.names(), n=3, cutoff=0.6)
        if close:
            hint = "; did you mean " + " or ".join(repr(m) for m in close) + "?"
    known = ", ".join(toolbox.names()) or "none"
    return UnknownToolError(f"unknown tool {echo(name)}{hint}; known tools: {known}")


def resolve_call(
    toolbox: Toolbox, call: ToolCall, allowed_tools: Sequence[str] | None
) -> tuple[ToolSpec, Payload]:
    """The tool `call` names and the call's Payload; a SagacityError saying why not."""
    name = call.tool
    if allowed_tools is not None and name not in allowed_tools:
        allowed = sorted(allowed_tools)[:50]
        raise ToolInputError(f"tool {echo(name)} is not allowed in this saga; allowed: {allowed}")
    if name not in toolbox:
        raise _unknown(name, toolbox)
    spec = toolbox.get(name)
    if set(call.args) == {INVALID_ARGUMENTS_KEY}:
        raw = str(call.args[INVALID_ARGUMENTS_KEY])
        raise ToolInputError(
            f"arguments for tool {spec.name!r} are not a JSON object (received "
            f"{raw[:MAX_TEXT_ECHO]!r}); nothing ran — call it again with a JSON object that "
            "matches its parameters schema"
        )
    if set(call.args) == {REFUSED_ARGUMENTS_KEY}:
        reason = str(call.args[REFUSED_ARGUMENTS_KEY])[:1_000]
        raise BoundsError(f"arguments for tool {spec.name!r} refused: {reason}; nothing ran")
    check_value(call.args, f"arguments for tool {spec.name!r}", max_bytes=MAX_ARGS_BYTES)
    return spec, spec.validate(call.args)


def check_plan(
    toolbox: Toolbox, plan: Sequence[ToolCall], allowed_tools: Sequence[str] | None
) -> PlanCheck:
    """Every problem of a plan (up to MAX_PLAN_PROBLEMS), found without running anything."""
    problems: list[PlanProblem] = []
    waiting: list[str] = []
    for index, call in enumerate(plan):
        try:
            spec, _ = resolve_call(toolbox, call, allowed_tools)
            if spec.kind is ToolKind.IRREVERSIBLE and spec.name not in waiting:
                waiting.append(spec.name)
        except SagacityError as exc:
            problems.append(
                PlanProblem(index=index, tool=call.tool[:MAX_TEXT_ECHO], error=str(exc)[:2_000])
            )
            if len(problems) >= MAX_PLAN_PROBLEMS:
                break
    return PlanCheck(problems=problems, waits_for_approval=waiting)


__all__ = ["check_plan", "resolve_call"]
