"""The journal as evidence someone else can check: export, verify (the chains, the signed
checkpoints, every signed decision and resolution), offline from a file or live."""

from __future__ import annotations

from sagacity.audit._decisions import DecisionAudit
from sagacity.audit._evidence import Finding, Problem
from sagacity.audit._evidence_walk import check_all, check_saga
from sagacity.audit._export import export_jsonl, verify_all, verify_jsonl, verify_store

__all__ = [
    "DecisionAudit",
    "Finding",
    "Problem",
    "check_all",
    "check_saga",
    "export_jsonl",
    "verify_all",
    "verify_jsonl",
    "verify_store",
]
