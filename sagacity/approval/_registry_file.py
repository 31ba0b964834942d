"""The approver registry as a worker holds it: the file, re-read when it changes, never
rolled back below what the journal has recorded, and the key lookups a saga asks of it."""

from __future__ import annotations

import threading
from pathlib import Path

from pydantic import (
    BaseModel,
    ConfigDict,
)

from sagacity._errors import SagacityError
from sagacity.approval._registry import (
    ApproverRegistry,
    EnrolledKey,
    JournalMarks,
    RegistryError,
    RegistryRolledBackError,
)
from sagacity.approval._registry_marks import RegistryMark, rollback_problem

__all__ = ["KeyLookup", "RegistryFile"]


class KeyLookup(BaseModel):
    """What a saga learns from its worker about the key a decision names: whether a
    registry is configured at all, which version, and the key (None when unknown)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    configured: bool
    version: int | None = None
    sha256: str | None = None
    key: EnrolledKey | None = None
    journaled: RegistryMark | None = None
    """The newest registry the worker's journal records, read with this answer: a saga
    refuses to judge with a registry older than it (REGISTRY_ROLLED_BACK)."""

    @property
    def registry_ref(self) -> dict[str, object] | None:
        if not self.configured:
            return None
        return {"version": self.version, "sha256": self.sha256}


class RegistryFile:
    """The worker's view of a registry file, re-read when the file changes, so enrolling
    or revoking a key takes effect for the next decision. A file that stops being valid
    keeps the last good version in force (logged by the caller through `problem`), never
    an empty registry: failing open would accept nothing new but refuse nothing either."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self.served: set[tuple[int, str]] = set()
        """Every registry (version, sha256) this file put in force: the only ones a saga
        of this worker can say it was judged with."""
        self._take(ApproverRegistry.load(path))  # a bad file fails the worker's start
        self._stamp = self._stat()
        self.problem: str | None = None
        self._journal: tuple[JournalMarks, str] | None = None

    def guard(self, marks: JournalMarks, journal: str) -> None:
        """Hold this file, now and at every reload, to the newest registry the journal
        `journal` records (`marks` reads it): a worker never takes an older one. Raises
        RegistryRolledBackError (naming both versions) when the one in force is older."""
        with self._lock:
            problem = rollback_problem(self._registry.version, self._sha256, marks(), journal)
            if problem is not None:
                raise RegistryRolledBackError(f"{self.path}: {problem}")
            self._journal = (marks, journal)

    def _below_journal(self, fresh: ApproverRegistry) -> str | None:
        """Why the journal forbids taking `fresh` (None: it may be taken)."""
        if self._journal is None:
            return None
        marks, journal = self._journal
        try:
            return rollback_problem(fresh.version, fresh.sha256, marks(), journal)
        except SagacityError as exc:  # cannot tell now: keep the one in force, ask again
            self._stamp = None
            return f"the journal's registry versions cannot be read ({exc})"

    def _take(self, registry: ApproverRegistry) -> None:
        """Put `registry` in force, with what every lookup needs computed once: its hash
        (canonical JSON of the whole registry) and its keys by id."""
        self._registry = registry
        self._sha256 = registry.sha256
        self._by_id = {k.key_id: k for k in registry.keys}
        self.served.add((registry.version, self._sha256))

    def _stat(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def current(self) -> ApproverRegistry:
        with self._lock:
            self._refresh()
            return self._registry

    def _refresh(self) -> None:
        """Take the file if it changed and is newer than the one in force and than every
        registry the journal records (the caller holds the lock)."""
        stamp = self._stat()
        if stamp is None or stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            fresh = ApproverRegistry.load(self.path)
        except RegistryError as exc:
            self.problem = str(exc)
            return
        in_force = self._registry
        if fresh.version < in_force.version or (
            fresh.version == in_force.version and fresh.sha256 != self._sha256
        ):
            # An older file put back (a revocation undone), or a change that did not
            # bump the version: neither replaces the one in force.
            self.problem = (
                f"{self.path} has version {fresh.version} (sha256 {fresh.sha256[:12]}…), "
                f"not newer than version {in_force.version} in force; kept the one in "
                "force. Every change must raise the version"
            )
            return
        refused = self._below_journal(fresh)
        if refused is not None:
            self.problem = f"{self.path} not taken, the one in force kept: {refused}"
            return
        self._take(fresh)
        self.problem = None

    def lookup(self, key_id: str | None) -> KeyLookup:
        with self._lock:
            self._refresh()
            return KeyLookup(
                configured=True,
                version=self._registry.version,
                sha256=self._sha256,
                key=self._by_id.get(key_id) if key_id else None,
            )
