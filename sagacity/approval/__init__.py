"""Approvals: the policy a tool declares, the request bound to a payload's hash, the judge
of a decision, people's keys and passkeys in a registry, and the one signed statement
every human action (a decision, a resolution) is made of."""

from __future__ import annotations

from sagacity.approval._judge import judge, parse_decision
from sagacity.approval._models import (
    ApprovalDecision,
    ApprovalRequest,
    Refusal,
    RefusalReason,
    Verdict,
    approval_hash,
)
from sagacity.approval._policy import ApprovalPolicy, ApprovalRequirement, ArgRule
from sagacity.approval._registry import ApproverRegistry
from sagacity.approval._registry_file import RegistryFile
from sagacity.approval._resolutions import Resolution, parse_resolution
from sagacity.approval._signed_action import SignedAction, sign_action
from sagacity.approval._signing import SigningKey
from sagacity.approval._statements import signed_request

__all__ = [
    "ApprovalDecision",
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApprovalRequirement",
    "ApproverRegistry",
    "ArgRule",
    "Refusal",
    "RefusalReason",
    "RegistryFile",
    "Resolution",
    "SignedAction",
    "SigningKey",
    "Verdict",
    "approval_hash",
    "judge",
    "parse_decision",
    "parse_resolution",
    "sign_action",
    "signed_request",
]
