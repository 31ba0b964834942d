"""The approver registry: which key belongs to which person, in which groups, and when.

The worker loads it from a JSON file (`SAGACITY_APPROVERS`, `--approvers`), and a saga
asks for the one key a decision names at the moment the decision arrives, so a
revocation counts from the next decision on, without restarting anything. The same file
is what an auditor passes to `verify-file` to re-check every signature offline.

Keys are never removed: a key that should no longer count is revoked (or given an end of
validity), so every decision ever accepted stays verifiable. Every change bumps the
registry's `version`, and each judged decision journals the version and SHA-256 of the
registry it was judged against, so which registry allowed what is itself evidence.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)
from pydantic import ValidationError as PydanticValidationError

from sagacity._errors import SagacityError
from sagacity.approval._actors import is_reserved_actor
from sagacity.approval._passkey_models import (
    PasskeyCredential,
    PasskeyMaterialError,
    passkey_key_id,
)
from sagacity.approval._registry_marks import JournaledMark
from sagacity.approval._signing import KeyMaterialError, key_id_of
from sagacity.journal._canonical import canonical_bytes, sha256_hex
from sagacity.journal._entry import check_name

REGISTRY_TYPE: Literal["sagacity/approver-registry/v1"] = "sagacity/approver-registry/v1"
MAX_KEYS = 10_000
MAX_GROUPS = 64


class RegistryError(SagacityError, ValueError):
    """A registry file that is not a valid approver registry, or a change it refuses."""


class RegistryRolledBackError(RegistryError):
    """The registry file is older than a registry the worker's journal records (or has
    the same version with other content): taking it would undo revocations. Restore the
    newer file; the message names both versions."""


JournalMarks = Callable[[], list[JournaledMark]]
"""Reads the newest registries a journal records (JournalStore.registry_marks)."""


def _person(value: str) -> str:
    check_name(value, "approver")
    if is_reserved_actor(value):
        raise ValueError("names that read as 'sagacity:' belong to the saga itself")
    return value


def _group(value: str) -> str:
    check_name(value, "group")
    return value


_Name = Annotated[str, Field(min_length=1, max_length=256), AfterValidator(_person)]
_Group = Annotated[str, Field(min_length=1, max_length=128), AfterValidator(_group)]


def _std_b64(text: str) -> bytes:
    """Standard base64, one spelling per value (a passkey's COSE key in the registry)."""
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise KeyMaterialError(f"public key is not valid base64 ({exc})") from None
    if base64.b64encode(data).decode("ascii") != text:
        raise KeyMaterialError("public key must be standard base64")
    return data


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EnrolledKey(BaseModel):
    """One person's public key as the registry enrolls it: an Ed25519 approver key
    (`public_key` is its raw 32 bytes in base64), or a passkey (`passkey` is set, and
    `public_key` is the COSE_Key its authenticator reported, in base64). Either way the
    key id is derived from the public key."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    approver: _Name
    key_id: Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")]
    public_key: Annotated[str, Field(min_length=44, max_length=344)]
    groups: Annotated[list[_Group], Field(max_length=MAX_GROUPS)] = Field(default_factory=list)
    valid_from: AwareDatetime
    valid_until: AwareDatetime | None = None
    revoked_at: AwareDatetime | None = None
    passkey: PasskeyCredential | None = None
    """Set for a passkey (WebAuthn credential); absent for an Ed25519 approver key."""

    @property
    def kind(self) -> Literal["ed25519", "passkey"]:
        return "ed25519" if self.passkey is None else "passkey"

    def cose_key(self) -> bytes:
        """A passkey's COSE_Key bytes (KeyMaterialError for an Ed25519 key)."""
        if self.passkey is None:
            raise KeyMaterialError(f"key {self.key_id} is an Ed25519 key, not a passkey")
        return base64.b64decode(self.public_key, validate=True)

    @model_validator(mode="after")
    def _own_id(self) -> Self:
        try:
            if self.passkey is None:
                actual = key_id_of(self.public_key)
            else:
                actual = passkey_key_id(_std_b64(self.public_key))
        except (KeyMaterialError, PasskeyMaterialError) as exc:
            raise ValueError(str(exc)) from None
        if actual != self.key_id:
            raise ValueError(f"key_id {self.key_id} is not the id of its public key ({actual})")
        if self.valid_until is not None and self.valid_until <= self.valid_from:
            raise ValueError("valid_until is not after valid_from")
        return self

    def invalid_at(self, moment: datetime) -> str | None:
        """Why this key does not count at `moment`, or None when it does."""
        whose = f"key {self.key_id} of {self.approver}"
        if moment < self.valid_from:
            return f"{whose} is valid from {_when(self.valid_from)}"
        if self.revoked_at is not None and moment >= self.revoked_at:
            return f"{whose} was revoked at {_when(self.revoked_at)}"
        if self.valid_until is not None and moment >= self.valid_until:
            return f"{whose} expired at {_when(self.valid_until)}"
        return None


class ApproverRegistry(BaseModel):
    """Every key ever enrolled, with its validity; see the module docstring."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["sagacity/approver-registry/v1"] = REGISTRY_TYPE
    version: Annotated[int, Field(ge=1)] = 1
    keys: Annotated[list[EnrolledKey], Field(max_length=MAX_KEYS)] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique(self) -> Self:
        from sagacity.text._lookalikes import skeleton

        seen: set[str] = set()
        credentials: set[str] = set()
        people: dict[str, str] = {}
        for key in self.keys:
            if key.key_id in seen:
                raise ValueError(f"key {key.key_id} is enrolled twice")
            seen.add(key.key_id)
            if key.passkey is not None:
                if key.passkey.credential_id in credentials:
                    raise ValueError(
                        f"passkey credential {key.passkey.credential_id[:16]}… is enrolled "
                        "twice; a browser names one credential by its id"
                    )
                credentials.add(key.passkey.credential_id)
            # One person, one spelling: "Alice", "alice" with a Cyrillic a or "alice" with a
            # zero-width space would otherwise count as a second person in a quorum, or
            # approve the saga "alice" requested.
            other = people.setdefault(skeleton(key.approver), key.approver)
            if other != key.approver:
                raise ValueError(
                    f"approver {key.approver!r} reads as {other!r}, already enrolled; "
                    "enroll each person under one spelling"
                )
        return self

    @property
    def sha256(self) -> str:
        """SHA-256 of the registry's canonical JSON: which registry judged a decision."""
        return sha256_hex(canonical_bytes(self.model_dump(mode="json"), what="registry"))

    def key(self, key_id: str) -> EnrolledKey | None:
        return next((k for k in self.keys if k.key_id == key_id), None)

    def enroll(
        self,
        approver: str,
        public_key: str,
        *,
        valid_from: datetime,
        groups: list[str] | None = None,
        valid_until: datetime | None = None,
    ) -> ApproverRegistry:
        """The next version, with one more key."""
        try:
            key = EnrolledKey(
                approver=approver,
                key_id=key_id_of(public_key),
                public_key=public_key,
                groups=sorted(set(groups or [])),
                valid_from=valid_from,
                valid_until=valid_until,
            )
        except (KeyMaterialError, PydanticValidationError) as exc:
            raise RegistryError(f"cannot enroll this key: {exc}") from None
        return self.add(key)

    def add(self, key: EnrolledKey) -> ApproverRegistry:
        """The next version, with `key` (a passkey from sagacity.approval._passkeys, or any key
        already built) enrolled."""
        if self.key(key.key_id) is not None:
            raise RegistryError(f"key {key.key_id} is already enrolled")
        return self._next([*self.keys, key])

    def passkeys_of(self, approver: str) -> list[EnrolledKey]:
        """Every passkey enrolled to `approver` (valid or not: the caller decides)."""
        return [k for k in self.keys if k.passkey is not None and k.approver == approver]

    def revoke(self, key_id: str, at: datetime) -> ApproverRegistry:
        """The next version, with `key_id` revoked from `at` on (decisions it signed
        before then stay valid evidence)."""
        key = self.key(key_id)
        if key is None:
            raise RegistryError(f"no key {key_id} in the registry")
        if key.revoked_at is not None:
            raise RegistryError(f"key {key_id} was already revoked at {key.revoked_at}")
        revoked = key.model_copy(update={"revoked_at": at})
        return self._next([revoked if k.key_id == key_id else k for k in self.keys])

    def _next(self, keys: list[EnrolledKey]) -> ApproverRegistry:
        try:
            return ApproverRegistry(version=self.version + 1, keys=keys)
        except PydanticValidationError as exc:
            problems = "; ".join(e["msg"] for e in exc.errors(include_url=False))
            raise RegistryError(f"cannot change the registry: {problems}") from None

    @classmethod
    def load(cls, path: Path) -> ApproverRegistry:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise RegistryError(f"cannot read approver registry {path}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise RegistryError(f"{path} is not UTF-8 text ({exc.reason})") from None
        try:
            return cls.model_validate(json.loads(text))
        except (ValueError, PydanticValidationError, RecursionError) as exc:
            raise RegistryError(f"{path} is not a valid approver registry: {exc}") from None

    def save(self, path: Path) -> None:
        """Write atomically (a reader never sees half a registry)."""
        text = json.dumps(self.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)


__all__ = [
    "ApproverRegistry",
    "EnrolledKey",
    "JournalMarks",
    "RegistryError",
    "RegistryRolledBackError",
]
