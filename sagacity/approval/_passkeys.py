"""Passkeys (WebAuthn) for approvers, in one place: enrollment (registration options,
verifying the browser's answer, enrolling it into the registry file) and signing any
human action with one (a decision, a resolution of dirty state: the action's draft,
its challenge, authentication options, the action built from the browser's assertion).
See sagacity.approval._passkey_enrollment and sagacity.approval._passkey_signing; the one check is
sagacity.approval._passkey_check."""

from __future__ import annotations

from sagacity.approval._passkey_check import PasskeyFailure, check_assertion, statement_challenge
from sagacity.approval._passkey_enrollment import (
    PasskeyRegistrationError,
    enroll_passkey,
    new_challenge,
    registration_options,
    user_handle,
    verify_registration,
)
from sagacity.approval._passkey_models import (
    AssertionFlags,
    PasskeyAssertion,
    PasskeyCredential,
    PasskeyMaterialError,
    passkey_key_id,
)
from sagacity.approval._passkey_signing import (
    PasskeyAssertionError,
    PasskeyDraft,
    assertion_from_browser,
    authentication_options,
    draft_options,
    passkey_draft,
    passkey_signed,
)

__all__ = [
    "AssertionFlags",
    "PasskeyAssertion",
    "PasskeyAssertionError",
    "PasskeyCredential",
    "PasskeyDraft",
    "PasskeyFailure",
    "PasskeyMaterialError",
    "PasskeyRegistrationError",
    "assertion_from_browser",
    "authentication_options",
    "check_assertion",
    "draft_options",
    "enroll_passkey",
    "new_challenge",
    "passkey_draft",
    "passkey_key_id",
    "passkey_signed",
    "registration_options",
    "statement_challenge",
    "user_handle",
    "verify_registration",
]
