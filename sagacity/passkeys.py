"""Passkeys (WebAuthn) for approvers, in one place: enrollment (registration options,
verifying the browser's answer, enrolling it into the registry file) and decisions
(a pending approval's statement and challenge, authentication options, the decision
built from the browser's assertion). See sagacity.passkey_enrollment and
sagacity.passkey_decisions; the checks themselves are sagacity.passkey_check."""

from __future__ import annotations

from sagacity.passkey_check import PasskeyFailure, check_assertion, statement_challenge
from sagacity.passkey_decisions import (
    PasskeyAssertionError,
    PasskeyDecisionDraft,
    assertion_from_browser,
    authentication_options,
    decision_draft,
    draft_options,
    passkey_decision,
)
from sagacity.passkey_enrollment import (
    PasskeyRegistrationError,
    enroll_passkey,
    new_challenge,
    registration_options,
    user_handle,
    verify_registration,
)
from sagacity.passkey_models import (
    AssertionFlags,
    PasskeyAssertion,
    PasskeyCredential,
    PasskeyMaterialError,
    passkey_key_id,
)

__all__ = [
    "AssertionFlags",
    "PasskeyAssertion",
    "PasskeyAssertionError",
    "PasskeyCredential",
    "PasskeyDecisionDraft",
    "PasskeyFailure",
    "PasskeyMaterialError",
    "PasskeyRegistrationError",
    "assertion_from_browser",
    "authentication_options",
    "check_assertion",
    "decision_draft",
    "draft_options",
    "enroll_passkey",
    "new_challenge",
    "passkey_decision",
    "passkey_key_id",
    "registration_options",
    "statement_challenge",
    "user_handle",
    "verify_registration",
]
