"""The approver registry's high-water mark: the newest version a journal has recorded.

Every judged decision, request and resolution journals the version and SHA-256 of the
registry it was judged against. Those records are also the defence against a rollback:
a registry file put back to an older version (a revocation undone) must never judge
again once a newer one has been journaled. So each store keeps, beside the chain and in
the same transaction as the entry, one small row per saga and registry it recorded, and
answers "what is the newest version journaled?" with an indexed read instead of a scan.

Only fields the saga computes from its worker's answer count (`result.registry` of a
request, a decision or a resolution, `input.registry` of NEEDS_HUMAN, the verified
requester's `input.requester.registry` of SAGA_OPENED); never a refused decision's
input, which is whatever its sender wrote.

Equal versions with different SHA-256 are a fork (two registries both called version
N): then no registry of that version counts, and only a newer one (N + 1) does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from sagacity.journal._phases import Phase

MAX_REGISTRY_VERSION = 2**53 - 1
"""The largest version the journal can record exactly (RFC 8785 integers)."""
_SHA256 = re.compile(r"[0-9a-f]{64}")
MARK_FIELD: dict[Phase, str] = {
    **dict.fromkeys(
        (Phase.AWAITING_APPROVAL, Phase.APPROVED, Phase.REJECTED, Phase.RESOLVED), "result"
    ),
    Phase.NEEDS_HUMAN: "input",
    Phase.SAGA_OPENED: "input",
}
"""Where an entry of each phase keeps the registry the saga judged with (`registry`, or
`requester.registry` in SAGA_OPENED's input); entries of other phases record none."""


class RegistryMark(BaseModel):
    """A registry version and its SHA-256. `sha256` None: more than one registry carried
    this version (a fork), so none of that version counts."""

    model_config = ConfigDict(frozen=True, extra="ignore")  # decoded from histories too

    version: Annotated[int, Field(ge=1, le=MAX_REGISTRY_VERSION, strict=True)]
    sha256: Annotated[str | None, Field(pattern=r"^[0-9a-f]{64}$")]

    def describe(self) -> str:
        shown = f"sha256 {self.sha256[:12]}…" if self.sha256 else "forked: two sha256 values"
        return f"version {self.version} ({shown})"


@dataclass(frozen=True, slots=True)
class JournaledMark:
    """One registry a journal recorded, with the first entry of a saga that recorded it
    (for messages: where to look)."""

    version: int
    sha256: str
    saga_id: str
    seq: int


def mark_in(phase: Phase, payload: Any) -> RegistryMark | None:
    """The registry an entry of `phase` says it was judged with, given the payload field
    MARK_FIELD names for it; None for no registry, an unverified requester, or a value
    that is not a registry ref."""
    if phase not in MARK_FIELD or not isinstance(payload, dict):
        return None
    if phase is Phase.SAGA_OPENED:
        payload = payload.get("requester")
        if not isinstance(payload, dict):
            return None
    ref = payload.get("registry")
    if not isinstance(ref, dict):
        return None
    version, sha256 = ref.get("version"), ref.get("sha256")
    if type(version) is not int or not 1 <= version <= MAX_REGISTRY_VERSION:
        return None
    if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
        return None
    return RegistryMark(version=version, sha256=sha256)


def top_mark(marks: list[JournaledMark]) -> RegistryMark | None:
    """The newest of `marks` (forked when two of them share that version)."""
    newest: RegistryMark | None = None
    for mark in marks:
        newest = newer(newest, RegistryMark(version=mark.version, sha256=mark.sha256))
    return newest


def newer(a: RegistryMark | None, b: RegistryMark | None) -> RegistryMark | None:
    """The higher of two marks; at one version with two SHA-256s, that version forked."""
    if a is None or b is None:
        return a or b
    if a.version != b.version:
        return a if a.version > b.version else b
    return a if a.sha256 == b.sha256 else RegistryMark(version=a.version, sha256=None)


def older_than(version: int, sha256: str | None, mark: RegistryMark | None) -> bool:
    """True when a registry of `version`/`sha256` must not judge once `mark` was seen:
    an older version, the same version with other content, or any of a forked version."""
    if mark is None:
        return False
    if version != mark.version:
        return version < mark.version
    return mark.sha256 is None or sha256 != mark.sha256


def rollback_problem(
    version: int, sha256: str, marks: list[JournaledMark], journal: str
) -> str | None:
    """Why a registry of `version`/`sha256` must not be taken by a worker writing to a
    journal that recorded `marks` (its newest versions), or None when it may."""
    top = top_mark(marks)
    if not older_than(version, sha256, top):
        return None
    assert top is not None
    where = ", ".join(f"saga {m.saga_id!r} seq {m.seq}" for m in marks[:3])
    this = RegistryMark(version=version, sha256=sha256).describe()
    if top.sha256 is None:
        shas = ", ".join(m.sha256[:12] + "…" for m in marks[:3])
        return (
            f"the journal {journal} records two different registries as version "
            f"{top.version} (sha256 {shas}; {where}), so no registry of version "
            f"{top.version} can be trusted; this one is {this}. Publish a new version "
            f"({top.version + 1} or later) with the keys you mean, and start again"
        )
    what = "an older registry" if version < top.version else "another registry of that version"
    return (
        f"the approver registry is {this}, but the journal {journal} records "
        f"{top.describe()} ({where}): this is {what}, and taking it would undo the "
        f"revocations made since. Restore the newer registry file (version {top.version} "
        f"with sha256 {top.sha256}, or later) and start again"
    )


__all__ = [
    "MARK_FIELD",
    "MAX_REGISTRY_VERSION",
    "JournaledMark",
    "RegistryMark",
    "mark_in",
    "newer",
    "older_than",
    "rollback_problem",
    "top_mark",
]
