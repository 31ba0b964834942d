"""The no-op toolbox the saga benchmarks run: `--tools bench.noop:toolbox`.

`noop` is a plain tool and `noop_irreversible` needs an approval; both do nothing and
return {}, so what a benchmark measures is sagacity and Temporal, not the tool.
"""

from __future__ import annotations

from typing import Any

from sagacity.tools._decorators import irreversible, tool
from sagacity.tools._toolbox import Toolbox


@tool
async def noop(i: int = 0) -> dict[str, Any]:
    """Do nothing."""
    return {}


@irreversible
async def noop_irreversible(ref: str) -> dict[str, Any]:
    """Do nothing, after a human approved it."""
    return {}


def toolbox() -> Toolbox:
    return Toolbox.build(noop, noop_irreversible)
