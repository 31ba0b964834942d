"""The journal's vocabulary and its one hash recipe: entries, phases, canonical JSON, the
bounds every value is held to, and the chain that seals and verifies them."""

from __future__ import annotations

from sagacity.journal._canonical import canonical_bytes, canonical_text, payload_sha256
from sagacity.journal._chain import GENESIS, BreakReason, VerifyReport, entry_hash, verify_chain
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase, SagaStatus, StepStatus

__all__ = [
    "GENESIS",
    "BreakReason",
    "EntryDraft",
    "JournalEntry",
    "Phase",
    "SagaStatus",
    "StepStatus",
    "VerifyReport",
    "canonical_bytes",
    "canonical_text",
    "entry_hash",
    "payload_sha256",
    "verify_chain",
]
