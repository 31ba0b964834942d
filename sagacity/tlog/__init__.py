"""Evidence outside the database: signed checkpoints of saga chain heads in an append-only
Merkle log (RFC 6962, C2SP signed notes), with inclusion and consistency proofs."""

from __future__ import annotations

from sagacity.tlog._checkpoint import SagaCheckpoint, TreeHead
from sagacity.tlog._log import CheckpointLog
from sagacity.tlog._note_keys import NoteSigner, NoteVerifier

__all__ = ["CheckpointLog", "NoteSigner", "NoteVerifier", "SagaCheckpoint", "TreeHead"]
