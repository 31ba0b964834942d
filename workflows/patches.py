"""The saga's workflow patches, asked through one marker.

Every `workflow.patched(id)` a new run asks records a marker: a command, an event in its
history and a patch state machine that the worker keeps for as long as it caches the run.
Measured (docs/benchmarks.md, "Parked sagas after issue 16"): ~10.7 KiB of worker memory
per marker and cached run; a saga asked nine at its start, ~97 KiB of the ~175 KiB a
parked saga cost above a plain workflow.

`patched(id)` asks SAGA_RULES first. A run that has it (every run started since) follows
every patch in FOLDED without asking them: a new run's `workflow.patched` answers True for
each anyway, so nothing it does changes, only the markers go. A run recorded before
SAGA_RULES has no such marker, so on replay SAGA_RULES reads False and each patch is
asked as it was recorded, in the same place (SAGA_RULES is asked where the first of them
was: in the first activation). FOLDED is closed: a patch added later is asked with
`workflow.patched` itself (runs that carry SAGA_RULES never followed it).
"""

from __future__ import annotations

from temporalio import workflow

__all__ = ["FOLDED", "SAGA_RULES", "patched"]

SAGA_RULES = "saga-rules-2026-12"
"""The marker that stands for every patch in FOLDED."""

FOLDED = frozenset(
    {
        "own-handover-only",
        "strict-start-door",
        "pin-worker-identity",
        "check-whole-plan-at-start",
        "check-whole-plan",
        "journal-abandoned-approval-at-start",
        "journal-abandoned-approval",
        "signed-decisions",
        "needs-human-wait",
        "fail-unsuccessful-saga",
        "visible-step-failures",
        "cancel-reason",
        "passkey-decisions",
        "passkey-resolutions",
    }
)
"""The patches of sagas recorded before SAGA_RULES (each still asked when replaying one)."""


def patched(patch_id: str) -> bool:
    """`workflow.patched(patch_id)` for a patch in FOLDED, without its marker in runs that
    have SAGA_RULES."""
    if patch_id not in FOLDED:
        raise ValueError(f"{patch_id!r} is not a folded saga patch; ask workflow.patched")
    return workflow.patched(SAGA_RULES) or workflow.patched(patch_id)
