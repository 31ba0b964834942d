"""A signed human action: what every kind of action a person signs has in common.

A decision on an irreversible step (sagacity.approval._models.ApprovalDecision) and a
resolution of dirty state (sagacity.approval._resolutions.Resolution) are both a `SignedAction`:
the kind's own fields, the name of the person acting, and the signature fields
(`issued_at`, `key_id`, and either an Ed25519 `signature` or a passkey's WebAuthn
assertion). The statement signed is built here, once, from those fields
(`{"type": "sagacity/<kind>/v1", ...}`), so what is signed, what the saga checks
(sagacity.approval._signed_checks.check_signed) and what is journaled and audited are the same
bytes. A new kind of action subclasses this and says what it is about (`about`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, ClassVar, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from sagacity._errors import SagacityError
from sagacity.approval._passkey_models import PasskeyAssertion
from sagacity.approval._registry import EnrolledKey
from sagacity.approval._signing import SigningKey
from sagacity.approval._statements import now_text, statement_bytes, statement_type
from sagacity.journal._canonical import sha256_hex

IssuedAt = Annotated[str, Field(max_length=32)]
KeyId = Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")]
Signature = Annotated[str, Field(max_length=128)]


class SignerMismatchError(SagacityError, ValueError):
    """The action names another person than the key's owner: a key speaks only for its
    owner. Sign with your own key, or leave the name out (the key fills it in)."""


class SignedAction(BaseModel):
    """A person's action, signed or not. Strict types: a security decision is not coerced
    ("yes" is not True, "3" is not step 3), and no field that is not listed is taken."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    KIND: ClassVar[str] = ""
    """The kind of action: the statement's type is sagacity/<KIND>/v1."""
    SIGNER: ClassVar[str] = ""
    """The field naming the person acting (the key's owner when signed)."""
    SIGN_HOW: ClassVar[str] = ""
    """How a person signs this kind of action, for refusals."""

    issued_at: IssuedAt | None = None
    key_id: KeyId | None = None
    signature: Signature | None = None
    passkey: PasskeyAssertion | None = None
    """A passkey's WebAuthn assertion over the statement, instead of `signature`."""

    def about(self) -> dict[str, Any]:
        """The kind's own fields, as the statement names them."""
        raise NotImplementedError

    def shape_problem(self) -> str | None:
        """What makes this action malformed beyond its field types (None: nothing)."""
        return None

    @property
    def person(self) -> str:
        """The name of the person acting, as the action claims it."""
        return str(getattr(self, self.SIGNER))

    @property
    def signed(self) -> bool:
        return self.signature is not None or self.key_id is not None or self.passkey is not None

    def statement(self) -> dict[str, Any]:
        """The statement this action's signature must cover."""
        return {
            "type": statement_type(self.KIND),
            **self.about(),
            self.SIGNER: self.person,
            "issued_at": self.issued_at or "",
            "key_id": self.key_id or "",
        }

    def acts_once_as(self) -> str | None:
        """What makes a signed statement act once: its Ed25519 signature, or for a passkey
        the SHA-256 of the statement it signs (an ECDSA passkey signs one statement with
        ever new signatures, so the statement, not the signature, is what is spent)."""
        if self.passkey is not None:
            return "passkey:" + sha256_hex(statement_bytes(self.statement()))
        return self.signature

    def body(self) -> dict[str, Any]:
        """The JSON body to send (an update or a signal): the fields that are set."""
        return self.model_dump(mode="json", exclude_none=True)

    def unsigned_for(self, person: str, key_id: str, now: datetime | None = None) -> Self:
        """This action by `person` with `key_id`, issued now, awaiting its signature (the
        fields re-validated; SignerMismatchError when it names someone else)."""
        if self.person and self.person != person:
            raise SignerMismatchError(
                f"the key {key_id} belongs to {person!r}, not {self.person!r}: a key speaks "
                "only for its owner"
            )
        data = self.model_dump(exclude={"signature", "passkey"})
        data.update({self.SIGNER: person, "issued_at": now_text(now), "key_id": key_id})
        return type(self).model_validate(data)


A = TypeVar("A", bound=SignedAction)


def sign_action(key: SigningKey, action: A, now: datetime | None = None) -> A:
    """`action` signed with `key` (Ed25519): its person is the key's owner, `issued_at`
    now; the signature covers the statement rebuilt from every field."""
    unsigned = action.unsigned_for(key.approver, key.key_id, now)
    return unsigned.model_copy(
        update={"signature": key.sign(statement_bytes(unsigned.statement()))}
    )


def journaled_statement(action: SignedAction) -> dict[str, Any]:
    """What the journal keeps as the action's input: the statement and its signature, and
    for a passkey the assertion itself (the signature, re-verified offline by verify-file)."""
    kept: dict[str, Any] = {"statement": action.statement(), "signature": action.signature}
    if action.passkey is not None:
        kept["passkey"] = action.passkey.model_dump(mode="json")
    return kept


def journaled_signer(action: SignedAction, key: EnrolledKey | None) -> dict[str, Any]:
    """What an offline auditor needs beside the statement: the key it was checked with
    (None for an unsigned action) and, for a passkey, its credential (RP, origins) and
    what the authenticator said (user verified, counter)."""
    key = key if action.signed else None
    kept: dict[str, Any] = {
        "key": (
            {"key_id": key.key_id, "public_key": key.public_key, "approver": key.approver}
            if key is not None
            else None
        )
    }
    if action.passkey is not None:
        flags = action.passkey.flags()
        kept["passkey"] = {"user_verified": flags.user_verified, "sign_count": flags.sign_count}
        if key is not None and key.passkey is not None:
            kept["key"]["passkey"] = key.passkey.model_dump(mode="json")
    return kept


__all__ = [
    "IssuedAt",
    "KeyId",
    "Signature",
    "SignedAction",
    "SignerMismatchError",
    "journaled_signer",
    "journaled_statement",
    "sign_action",
]
