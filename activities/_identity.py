"""Which worker may serve a saga: the identity of a toolbox and a journal.

Two workers on one task queue with different toolboxes (or different journals) would
split a saga between them: a step could fail as "unknown tool", a tool both toolboxes
name could run the other implementation, and its evidence could land in another
database. So a saga pins, on its first workflow task, the identity of the worker that
runs it; its activities go to a task queue named by that identity, which only workers
with the same toolbox and journal poll, and every activity checks the identity it was
sent against its own and refuses a mismatch.

The identity is stable across restarts (a parked saga continues on the restarted worker)
and changes when the tools' names, kinds, compensations or schemas change, or when the
journal is another database. Credentials in the journal URL are not part of it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from sagacity.journal._canonical import canonical_bytes, sha256_hex
from sagacity.tools._toolbox import Toolbox, ToolSpec

IDENTITY_CHARS = 16


def _journal_locator(url: str) -> str:
    """The journal URL without user name or password."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


def _tool(spec: ToolSpec) -> dict[str, Any]:
    described: dict[str, Any] = {
        "name": spec.name,
        "kind": spec.kind.value,
        "compensation": spec.compensation.name if spec.compensation else None,
        "parameters": spec.parameters,
    }
    if spec.policy is not None:  # only when declared: identities without one stay as they were
        described["policy"] = {
            **spec.policy.base().model_dump(mode="json"),
            "rules": [rule.description for rule in spec.policy.rules],
        }
    return described


def worker_identity(toolbox: Toolbox, journal_url: str, *, signed: bool = False) -> str:
    """A short fingerprint of what a worker serves: its tools (with their approval
    policies), its journal, and whether it judges decisions against an approver registry
    (a worker without one must never judge a saga whose decisions must be signed)."""
    described: dict[str, Any] = {
        "tools": [_tool(spec) for spec in toolbox],
        "journal": _journal_locator(journal_url),
    }
    if signed:
        described["approver_registry"] = True
    return sha256_hex(canonical_bytes(described))[:IDENTITY_CHARS]


def activity_queue(task_queue: str, identity: str) -> str:
    """The task queue of the activities of sagas pinned to `identity`."""
    return f"{task_queue}@{identity}"


__all__ = ["activity_queue", "worker_identity"]
