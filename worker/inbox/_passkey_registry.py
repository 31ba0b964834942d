"""The approver registry as the inbox reads it: the passkeys a person may decide with,
and who may enroll one.

The file is the registry the worker judges with (`--approvers`); the inbox reads it on
each request (so a key revoked a moment ago is no longer offered) and writes it only
through sagacity.approval._passkeys.enroll_passkey (locked, atomic, version + 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from starlette.exceptions import HTTPException

from sagacity.approval._registry import ApproverRegistry, EnrolledKey

__all__ = ["Standing", "approver_standing", "load_registry", "usable_passkeys"]


def load_registry(path: Path | None) -> ApproverRegistry:
    """The registry file, or a 409 page saying how to configure one."""
    if path is None:
        raise HTTPException(
            409,
            "this inbox has no approver registry: passkeys are enrolled into, and checked "
            "against, the registry the worker uses; start it with --approvers FILE (or "
            "SAGACITY_APPROVERS)",
        )
    return ApproverRegistry.load(path)


def usable_passkeys(registry: ApproverRegistry, rp_id: str) -> list[EnrolledKey]:
    """The passkeys valid now and made for this inbox's relying party."""
    now = datetime.now(UTC)
    return [
        key
        for key in registry.keys
        if key.passkey is not None and key.passkey.rp_id == rp_id and key.invalid_at(now) is None
    ]


@dataclass(frozen=True)
class Standing:
    """What a passkey enrolled from the web for a person may have: their groups, and an
    end no later than their own keys' latest one."""

    groups: list[str]
    valid_until: datetime | None


def approver_standing(registry: ApproverRegistry, approver: str) -> Standing | None:
    """The standing of an approver already in the registry, from their keys still valid:
    the union of their groups, and their latest valid_until (None only when one of those
    keys has no end). None when the registry does not know them. A passkey made from the
    web gets exactly this, never more: it neither widens nor outlives its owner."""
    now = datetime.now(UTC)
    keys = [k for k in registry.keys if k.approver == approver and k.invalid_at(now) is None]
    if not keys:
        return None
    groups = sorted({group for key in keys for group in key.groups})
    ends = [key.valid_until for key in keys]
    latest = None if any(end is None for end in ends) else max(e for e in ends if e)
    return Standing(groups, latest)
