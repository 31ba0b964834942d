"""sagacity core: journal, chain, phases, tools, approvals, audit.

Never imports temporalio (a test pins it): the core is engine-agnostic, which is what
makes another engine or framework adapter possible.
"""

from sagacity.approval_policy import ApprovalPolicy, ApprovalRequirement, ArgRule
from sagacity.approvals import (
    ApprovalDecision,
    ApprovalRequest,
    Refusal,
    RefusalReason,
    Verdict,
    approval_hash,
    approval_payload,
    judge,
    parse_decision,
)
from sagacity.audit import export_jsonl, verify_all, verify_jsonl, verify_store
from sagacity.canonical import canonical_bytes, canonical_text, payload_sha256
from sagacity.chain import GENESIS, BreakReason, VerifyReport, verify_chain
from sagacity.checkpoint import SagaCheckpoint, TreeHead
from sagacity.checkpoint_log import CheckpointLog
from sagacity.compensation import CompensationPlan, plan_compensation
from sagacity.decision_audit import DecisionAudit
from sagacity.entry import EntryDraft, JournalEntry
from sagacity.errors import (
    AuditFileError,
    InvalidEntryError,
    JournalConflictError,
    JournalError,
    JournalWriteError,
    NotCanonicalError,
    PayloadTooLargeError,
    SagacityError,
    SagaClosedError,
    StoreUnavailableError,
    ToolboxError,
    ToolInputError,
    UnknownStoreURLError,
    UnknownToolError,
)
from sagacity.evidence import Finding, Problem
from sagacity.evidence_walk import check_all, check_saga
from sagacity.note_keys import NoteSigner, NoteVerifier
from sagacity.phases import Phase, SagaStatus
from sagacity.registry import ApproverRegistry
from sagacity.signed_action import sign_action
from sagacity.signing import SigningKey
from sagacity.statements import signed_request
from sagacity.stores import JournalStore, open_store
from sagacity.toolbox import Toolbox, ToolResultError, ToolSpec
from sagacity.tools import (
    CompensationContext,
    ToolContext,
    ToolKind,
    compensable,
    compensation,
    irreversible,
    tool,
)

__all__ = [
    "GENESIS",
    "ApprovalDecision",
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApprovalRequirement",
    "ApproverRegistry",
    "ArgRule",
    "AuditFileError",
    "BreakReason",
    "CheckpointLog",
    "CompensationContext",
    "CompensationPlan",
    "DecisionAudit",
    "EntryDraft",
    "Finding",
    "InvalidEntryError",
    "JournalConflictError",
    "JournalEntry",
    "JournalError",
    "JournalStore",
    "JournalWriteError",
    "NotCanonicalError",
    "NoteSigner",
    "NoteVerifier",
    "PayloadTooLargeError",
    "Phase",
    "Problem",
    "Refusal",
    "RefusalReason",
    "SagaCheckpoint",
    "SagaClosedError",
    "SagaStatus",
    "SagacityError",
    "SigningKey",
    "StoreUnavailableError",
    "ToolContext",
    "ToolInputError",
    "ToolKind",
    "ToolResultError",
    "ToolSpec",
    "Toolbox",
    "ToolboxError",
    "TreeHead",
    "UnknownStoreURLError",
    "UnknownToolError",
    "Verdict",
    "VerifyReport",
    "approval_hash",
    "approval_payload",
    "canonical_bytes",
    "canonical_text",
    "check_all",
    "check_saga",
    "compensable",
    "compensation",
    "export_jsonl",
    "irreversible",
    "judge",
    "open_store",
    "parse_decision",
    "payload_sha256",
    "plan_compensation",
    "sign_action",
    "signed_request",
    "tool",
    "verify_all",
    "verify_chain",
    "verify_jsonl",
    "verify_store",
]
