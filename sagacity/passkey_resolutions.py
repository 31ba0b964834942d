"""Resolving dirty state with a passkey: the resolution a person's action makes, its
WebAuthn challenge and authentication options, and the resolution built from what the
browser's `navigator.credentials.get()` returns.

Exactly as for decisions (sagacity.passkey_decisions): the statement is the action's
resolution statement (sagacity.decision_statement.resolution_statement) naming the
passkey's key id, the challenge is SHA-256(statement_bytes(statement)), and the
assertion travels in the resolution (`Resolution.passkey`), checked by the saga with the
one passkey check (sagacity.passkey_check) and journaled with the RESOLVED entry, where
`verify-file` checks it again. The draft is plain data (`to_json`/`from_json`), so a
web page keeps it in its session between the request and the assertion.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sagacity.approval_models import Refusal, RefusalReason
from sagacity.decision_statement import now_text
from sagacity.passkey_check import PasskeyFailure, check_assertion, statement_challenge
from sagacity.passkey_decisions import (
    PasskeyAssertionError,
    assertion_from_browser,
    authentication_options,
)
from sagacity.passkey_models import PasskeyAssertion
from sagacity.registry import EnrolledKey
from sagacity.resolutions import Action, Resolution, parse_resolution


@dataclass(frozen=True)
class PasskeyResolutionDraft:
    """A resolution waiting for its passkey assertion: every field but the assertion."""

    resolution: Resolution

    @property
    def statement(self) -> dict[str, Any]:
        return self.resolution.statement()

    @property
    def challenge(self) -> bytes:
        """SHA-256 of the statement's canonical bytes: the WebAuthn challenge."""
        return statement_challenge(self.statement)

    def to_json(self) -> str:
        return json.dumps(self.resolution.model_dump(mode="json"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> PasskeyResolutionDraft:
        """The draft `to_json` wrote (PasskeyAssertionError when it is not one)."""
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise PasskeyAssertionError(f"not a passkey resolution draft: {exc}") from None
        parsed = parse_resolution(raw)
        if isinstance(parsed, Refusal):
            raise PasskeyAssertionError(f"not a passkey resolution draft: {parsed.detail}")
        if parsed.passkey is not None or parsed.signature is not None or not parsed.key_id:
            raise PasskeyAssertionError("not a passkey resolution draft (signed, or no key id)")
        return cls(parsed)


def _parsed(raw: object) -> Resolution:
    parsed = parse_resolution(raw)
    if isinstance(parsed, Refusal):
        raise PasskeyAssertionError(parsed.detail, parsed.reason)
    return parsed


def resolution_draft(
    *,
    saga_id: str,
    action: Action,
    key: EnrolledKey,
    step: int | None = None,
    steps: list[int] | None = None,
    result: Any = None,
    reason: str = "",
    now: datetime | None = None,
) -> PasskeyResolutionDraft:
    """The draft of `key`'s owner's action on a saga's dirty state (one `step`, or for
    `accept` the `steps` they saw dirty and a reason). Malformed actions are refused
    here with the reason the saga would give (PasskeyAssertionError)."""
    if key.passkey is None:
        raise PasskeyAssertionError(
            f"key {key.key_id} is not a passkey", RefusalReason.WRONG_KEY_KIND
        )
    body: dict[str, Any] = {
        "saga_id": saga_id,
        "action": action,
        "step": step,
        "steps": steps,
        "reason": reason,
        "actor": key.approver,
        "issued_at": now_text(now),
        "key_id": key.key_id,
    }
    if result is not None:
        body["result"] = result
    return PasskeyResolutionDraft(_parsed(body))


def resolution_options(draft: PasskeyResolutionDraft, key: EnrolledKey) -> dict[str, Any]:
    """The authentication options of a draft: its challenge, its one passkey."""
    if key.key_id != draft.resolution.key_id:
        raise PasskeyAssertionError(
            f"the draft names key {draft.resolution.key_id}, not {key.key_id}",
            RefusalReason.WRONG_CREDENTIAL,
        )
    return authentication_options(keys=[key], challenge=draft.challenge)


def passkey_resolution(
    draft: PasskeyResolutionDraft,
    credential: Mapping[str, Any] | str | PasskeyAssertion,
    *,
    key: EnrolledKey | None = None,
) -> dict[str, Any]:
    """The resolution body to send (the `resolve` update or signal): the draft with the
    browser's assertion. Given the enrolled `key`, the assertion is checked first,
    exactly as the saga will (PasskeyAssertionError with the RefusalReason it would
    journal)."""
    assertion = (
        credential
        if isinstance(credential, PasskeyAssertion)
        else assertion_from_browser(credential)
    )
    resolution = draft.resolution.model_copy(update={"passkey": assertion})
    if key is not None:
        if key.key_id != resolution.key_id:
            raise PasskeyAssertionError(
                f"the draft names key {resolution.key_id}, not {key.key_id}",
                RefusalReason.UNKNOWN_KEY,
            )
        checked = check_assertion(assertion, key, resolution.statement())
        if isinstance(checked, PasskeyFailure):
            raise PasskeyAssertionError(checked.detail, checked.reason)
    body = resolution.model_dump(mode="json", exclude_none=True)
    body["reason"] = resolution.reason
    return body


__all__ = [
    "PasskeyResolutionDraft",
    "passkey_resolution",
    "resolution_draft",
    "resolution_options",
]
