"""Journals that hold an approval exactly as a saga's workflow writes one.

The tool runner and the compensation runner act on what the journal holds, not on their
caller's word; tests that run them without a workflow write the entries the workflow
would have written: SAGA_OPENED (with a signed requester where there is a registry),
AWAITING_APPROVAL for a payload, and APPROVED entries carrying decision statements,
signed where a key is given.
"""

from __future__ import annotations

from typing import Any

from sagacity.approval._judge import approval_hash, approval_payload
from sagacity.approval._models import ApprovalDecision
from sagacity.approval._policy import ApprovalRequirement
from sagacity.approval._registry import ApproverRegistry
from sagacity.approval._signed_action import sign_action
from sagacity.approval._signing import SigningKey
from sagacity.approval._statements import now_text, request_statement, statement_bytes
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase
from sagacity.stores._base import JournalStore
from tests.support.saga_activity_env import RUN


def registry_ref(registry: ApproverRegistry) -> dict[str, Any]:
    return {"version": registry.version, "sha256": registry.sha256}


def open_saga(
    store: JournalStore,
    saga_id: str,
    *,
    requester: SigningKey | None = None,
    registry: ApproverRegistry | None = None,
) -> JournalEntry:
    """SAGA_OPENED by the saga's first run, with a verified requester when signed."""
    opened: dict[str, Any] = {"run_id": RUN, "chain": RUN}
    if requester is not None and registry is not None:
        statement = request_statement(
            saga_id=saga_id, requester=requester.approver, issued_at=now_text(),
            key_id=requester.key_id,
        )  # fmt: skip
        opened["requester"] = {
            "requester": requester.approver,
            "verified": True,
            "statement": statement,
            "signature": requester.sign(statement_bytes(statement)),
            "key": {
                "key_id": requester.key_id,
                "public_key": requester.public_key,
                "approver": requester.approver,
            },
            "registry": registry_ref(registry),
        }
    return store.append(EntryDraft.new(saga_id, Phase.SAGA_OPENED, input=opened))


def request_approval(
    store: JournalStore,
    saga_id: str,
    step: int,
    tool: str,
    args: dict[str, Any],
    *,
    registry: ApproverRegistry | None = None,
    approval: ApprovalRequirement | None = None,
) -> JournalEntry:
    """AWAITING_APPROVAL as the approval gate journals it."""
    result: dict[str, Any] = {"payload_sha256": approval_hash(tool, args), "deadline": None}
    result["approval"] = (approval or ApprovalRequirement()).model_dump(mode="json")
    result["registry"] = registry_ref(registry) if registry is not None else None
    draft = EntryDraft.new(
        saga_id, Phase.AWAITING_APPROVAL, step=step, tool=tool,
        input=approval_payload(tool, args), result=result,
    )  # fmt: skip
    return store.append(draft)


def approve(
    store: JournalStore,
    saga_id: str,
    step: int,
    tool: str,
    args: dict[str, Any],
    approver: str | SigningKey,
    *,
    registry: ApproverRegistry | None = None,
    attempt: int = 1,
    approve: bool = True,
) -> JournalEntry:
    """APPROVED (or REJECTED) as the gate journals an accepted decision; signed when
    `approver` is a key."""
    key = approver if isinstance(approver, SigningKey) else None
    name = key.approver if key is not None else str(approver)
    digest = approval_hash(tool, args)
    decision = ApprovalDecision(
        saga_id=saga_id, step=step, tool=tool, payload_sha256=digest, approve=approve,
        approver=name,
    )  # fmt: skip
    if key is not None:
        decision = sign_action(key, decision)
    statement, signature = decision.statement(), decision.signature
    result: dict[str, Any] = {
        "payload_sha256": digest,
        "reason": "",
        "registry": registry_ref(registry) if registry is not None else None,
        "key": {"key_id": key.key_id, "public_key": key.public_key, "approver": name}
        if key is not None
        else None,
    }
    draft = EntryDraft.new(
        saga_id, Phase.APPROVED if approve else Phase.REJECTED, step=step,
        attempt=attempt, tool=tool, actor=name,
        input={"statement": statement, "signature": signature}, result=result,
    )  # fmt: skip
    return store.append(draft)
