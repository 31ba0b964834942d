"""The workflow histories the replay tests replay, recorded by the 1.0 code, in one place.

    agent_saga/    AgentSaga flows         python -m tests.histories.record_agent_saga
    saga_api/      the order workflow      python -m tests.histories.record_saga_api
    pydantic_ai/   the Pydantic AI clerk   python -m tests.histories.record_pydantic_ai
    passkeys/      passkey decisions and resolutions, SAGACITY_RECORD_PASSKEY_HISTORY=1 on
                   tests/integration/approval/signed/test_passkey_approvals.py,
                   tests/integration/workflows/dirty/test_passkey_resolutions.py

A history here is what a run of deployed code wrote: the replay tests prove today's
workflow code still replays it. Keep them. A change to workflow code that makes one fail
replay goes behind `workflow.patched()` (docs/architecture.md, "Changing workflow code");
add a history of the new branch beside the old ones instead of re-recording these.
"""

from __future__ import annotations

from pathlib import Path

HISTORIES = Path(__file__).parent
AGENT_SAGA = HISTORIES / "agent_saga"
SAGA_API = HISTORIES / "saga_api"
PYDANTIC_AI = HISTORIES / "pydantic_ai"
PASSKEY_DECISIONS = HISTORIES / "passkeys" / "decisions"
"""Named by their workflow id (the saga id: what the statement signs, so a replay under
another id would judge another statement)."""
PASSKEY_RESOLUTIONS = HISTORIES / "passkeys" / "resolutions"
"""A saga that refused and accepted passkey resolutions (named by its saga id too)."""
