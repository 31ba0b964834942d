"""Passkeys (WebAuthn) for approvers, in one place: enrollment (registration options,
verifying the browser's answer, enrolling it into the registry file), decisions (a
pending approval's statement and challenge, authentication options, the decision built
from the browser's assertion) and resolutions of dirty state (the same, for an action on
a saga that needs a human). See sagacity.passkey_enrollment, sagacity.passkey_decisions
and sagacity.passkey_resolutions; the one check is sagacity.passkey_check."""

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
from sagacity.passkey_resolutions import (
    PasskeyResolutionDraft,
    passkey_resolution,
    resolution_draft,
    resolution_options,
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
    "PasskeyResolutionDraft",
    "assertion_from_browser",
    "authentication_options",
    "check_assertion",
    "decision_draft",
    "draft_options",
    "enroll_passkey",
    "new_challenge",
    "passkey_decision",
    "passkey_key_id",
    "passkey_resolution",
    "registration_options",
    "resolution_draft",
    "resolution_options",
    "statement_challenge",
    "user_handle",
    "verify_registration",
]
