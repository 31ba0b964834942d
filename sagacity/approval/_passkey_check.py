"""Checking a passkey's assertion over a decision statement. Pure and deterministic (the
same bytes, the same answer; no clock, no I/O), so the workflow runs it in its own code
and replays it, and `verify-file` runs the very same check offline.

The WebAuthn challenge of a decision is exactly SHA-256(statement_bytes(statement)):
the authenticator signs authenticatorData || SHA-256(clientDataJSON), and
clientDataJSON holds that challenge, so the assertion signs this decision and no other
(another saga, step, payload, approver, reason or key is another statement, another
challenge). Every failure is a typed (RefusalReason, sentence) pair, never an exception:
garbage from a browser or a forger must be refused and journaled, never wedge a saga.
clientDataJSON is read strictly: a key written twice, or a crossOrigin that is not a JSON
boolean (the text "true" is neither true nor false), is malformed, not guessed at.

The signature counter is not enforced: synced passkeys report 0, and a decision is
bound to its statement, which a saga accepts once per step and person, so a replayed
assertion is refused as that statement's duplicate, or as another statement's wrong
challenge. The counter and the user-verified flag are journaled with the decision.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from sagacity.approval._models import RefusalReason
from sagacity.approval._passkey_models import (
    AUTHENTICATOR_DATA_MAX_BYTES,
    CLIENT_DATA_MAX_BYTES,
    CREDENTIAL_ID_MAX_BYTES,
    SIGNATURE_MAX_BYTES,
    AssertionFlags,
    PasskeyAssertion,
    PasskeyMaterialError,
    b64url,
    unb64url,
)
from sagacity.approval._registry import EnrolledKey
from sagacity.approval._statements import statement_bytes
from sagacity.journal._canonical import one_value_per_key

GET_CEREMONY = "webauthn.get"


@dataclass(frozen=True)
class PasskeyFailure:
    """Why an assertion does not sign the statement: a journaled reason and a sentence."""

    reason: RefusalReason
    detail: str


def statement_challenge(statement: dict[str, Any]) -> bytes:
    """The WebAuthn challenge of a statement: SHA-256 of its canonical bytes."""
    return hashlib.sha256(statement_bytes(statement)).digest()


def check_assertion(
    assertion: PasskeyAssertion, key: EnrolledKey, statement: dict[str, Any]
) -> AssertionFlags | PasskeyFailure:
    """The assertion's flags when it is `key`'s signature over `statement`, made on an
    allowed origin for the key's RP with the user present; a PasskeyFailure otherwise."""
    credential = key.passkey
    if credential is None:
        return PasskeyFailure(
            RefusalReason.WRONG_KEY_KIND,
            f"key {key.key_id} is an Ed25519 approver key, not a passkey; sign the statement "
            "with its key file, or name your passkey's key id",
        )
    if assertion.credential_id != credential.credential_id:
        return PasskeyFailure(
            RefusalReason.WRONG_CREDENTIAL,
            f"the assertion was made by credential {assertion.credential_id[:16]}…, not by "
            f"the passkey enrolled as key {key.key_id}; sign with that passkey",
        )
    try:
        auth_data = unb64url(
            assertion.authenticator_data, "authenticator_data", AUTHENTICATOR_DATA_MAX_BYTES
        )
        client_bytes = unb64url(
            assertion.client_data_json, "client_data_json", CLIENT_DATA_MAX_BYTES
        )
        client = json.loads(client_bytes.decode("utf-8"), object_pairs_hook=_unique_keys)
        if not isinstance(client, dict):
            raise ValueError("clientDataJSON is not a JSON object")
        kind, challenge, origin = client.get("type"), client.get("challenge"), client.get("origin")
        if not all(isinstance(v, str) for v in (kind, challenge, origin)):
            raise ValueError("clientDataJSON lacks its type, challenge or origin text")
        if not isinstance(client.get("crossOrigin", False), bool):
            raise ValueError("clientDataJSON's crossOrigin is not a JSON true or false")
    except (PasskeyMaterialError, ValueError, RecursionError) as exc:
        return PasskeyFailure(
            RefusalReason.PASSKEY_MALFORMED,
            f"the assertion cannot be read ({str(exc)[:200]}); send what "
            "navigator.credentials.get() returned, unchanged",
        )
    if kind != GET_CEREMONY:
        return PasskeyFailure(
            RefusalReason.WRONG_CEREMONY,
            f"clientDataJSON's type is {str(kind)[:40]!r}, not {GET_CEREMONY!r}: only an "
            "authentication assertion signs a decision",
        )
    expected = statement_challenge(statement)
    if challenge != b64url(expected):
        return PasskeyFailure(
            RefusalReason.WRONG_CHALLENGE,
            "the assertion's challenge is not the SHA-256 of this decision's statement: it "
            "signs another decision (another saga, step, payload, approver, reason, time or "
            "key); sign this statement",
        )
    if (
        origin not in credential.origins
        or client.get("crossOrigin") is True
        or ("topOrigin" in client and client.get("topOrigin") != origin)
    ):
        return PasskeyFailure(
            RefusalReason.WRONG_ORIGIN,
            f"the assertion was made on {str(origin)[:100]!r}"
            f"{' inside another site' if client.get('crossOrigin') is True else ''}, not on "
            f"an origin passkey {key.key_id} is enrolled for ({', '.join(credential.origins)})",
        )
    if auth_data[:32] != hashlib.sha256(credential.rp_id.encode("ascii")).digest():
        return PasskeyFailure(
            RefusalReason.WRONG_RP,
            f"the assertion is for another relying party than {credential.rp_id!r} (its "
            "rpIdHash differs); sign on the site the passkey was enrolled for",
        )
    if not auth_data[32] & 0x01:
        return PasskeyFailure(
            RefusalReason.USER_NOT_PRESENT,
            "the authenticator did not see a person (user-present flag unset); a decision "
            "needs a touch or a gesture on the device",
        )
    if auth_data[32] & 0x40 or not _extensions_readable(auth_data):
        return PasskeyFailure(
            RefusalReason.PASSKEY_MALFORMED,
            "the assertion's authenticatorData is not an assertion's (attested credential "
            "data, or extensions that are not CBOR); send what navigator.credentials.get() "
            "returned, unchanged",
        )
    problem = _library_verify(assertion, key, auth_data, client_bytes, expected)
    if problem is not None:
        return PasskeyFailure(
            RefusalReason.BAD_SIGNATURE,
            f"the passkey signature does not verify with key {key.key_id} over this "
            f"statement's assertion ({problem[:200]}); send the assertion unchanged",
        )
    return assertion.flags()


_unique_keys = one_value_per_key(lambda key: f"clientDataJSON names {key[:40]!r} twice")
"""A JSON object whose keys are all distinct: a browser writes each member of
clientDataJSON once (WebAuthn's serialization), and with a key written twice two readers
may see two different objects (Python's json keeps the last "type", another parser the
first), so such bytes are refused, at any depth."""


def _extensions_readable(auth_data: bytes) -> bool:
    """Whether authenticatorData parses (its extensions, when flagged, are one CBOR map
    and nothing follows them), by the `webauthn` package's parser."""
    from webauthn.helpers import parse_authenticator_data

    try:
        parse_authenticator_data(auth_data)
    except Exception:  # the parser raises several kinds on hostile bytes: all unreadable
        return False
    return True


def _library_verify(
    assertion: PasskeyAssertion,
    key: EnrolledKey,
    auth_data: bytes,
    client_bytes: bytes,
    challenge: bytes,
) -> str | None:
    """The `webauthn` package's verification of the whole assertion (its own checks of
    the ceremony, challenge, origin, RP and presence repeat ours; the signature is its),
    or why it refused. The counter is given as 0: not enforced (see the module)."""
    from webauthn import verify_authentication_response
    from webauthn.helpers.structs import (
        AuthenticationCredential,
        AuthenticatorAssertionResponse,
    )

    credential = key.passkey
    assert credential is not None
    try:
        raw_id = unb64url(assertion.credential_id, "credential id", CREDENTIAL_ID_MAX_BYTES)
        signature = unb64url(assertion.signature, "signature", SIGNATURE_MAX_BYTES)
        verify_authentication_response(
            credential=AuthenticationCredential(
                id=assertion.credential_id,
                raw_id=raw_id,
                response=AuthenticatorAssertionResponse(
                    client_data_json=client_bytes,
                    authenticator_data=auth_data,
                    signature=signature,
                ),
            ),
            expected_challenge=challenge,
            expected_rp_id=credential.rp_id,
            expected_origin=list(credential.origins),
            credential_public_key=key.cose_key(),
            credential_current_sign_count=0,
            require_user_verification=False,
        )
    except Exception as exc:  # any failure of a hostile assertion is a refusal, never a raise
        return f"{type(exc).__name__}: {exc}"
    return None


__all__ = ["GET_CEREMONY", "PasskeyFailure", "check_assertion", "statement_challenge"]
