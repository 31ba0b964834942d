"""Declaring tools: the decorators, the toolbox that checks them at build time, the one
value a tool call is (`Payload`), and which executed steps a failure must undo."""

from __future__ import annotations

from sagacity.tools._compensation import CompensationPlan, plan_compensation
from sagacity.tools._decorators import (
    CompensationContext,
    ToolContext,
    ToolKind,
    compensable,
    compensation,
    irreversible,
    tool,
)
from sagacity.tools._payload import Payload
from sagacity.tools._spec import CompensationSpec, ToolSpec
from sagacity.tools._toolbox import Toolbox, ToolResultError

__all__ = [
    "CompensationContext",
    "CompensationPlan",
    "CompensationSpec",
    "Payload",
    "ToolContext",
    "ToolKind",
    "ToolResultError",
    "ToolSpec",
    "Toolbox",
    "compensable",
    "compensation",
    "irreversible",
    "plan_compensation",
    "tool",
]
