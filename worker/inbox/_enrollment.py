"""Enrolling a passkey for an approver of the registry, from the page.

Whoever enrolls a passkey for "alice" can approve as alice, so the page does not take
a name on trust: it asks for a one-time enrollment code the operator made for that
approver (`sagacity keys enroll-code --approver alice`, sagacity.approval._enrollment_codes): a
code enrolls only its approver, is spent by the enrollment it starts, expires, and has
its own attempt limit (a wrong guess counts against that approver's code only, so
nobody can lock enrollment for everyone).

The ceremony's state (approver, challenge, the registry standing) stays on the server
with the session (worker.inbox.sessions.Shelf), taken out by the finish whether it
succeeds or fails, gone after ten minutes: a replayed cookie finds nothing to finish,
and the challenge never leaves the server except in the options sent to this browser.
The passkey gets exactly the groups its owner's valid keys have and ends no later than
they do. The browser's answer is verified by sagacity.approval._passkeys.verify_registration
(challenge, origin, RP id) and written with enroll_passkey (locked, atomic, version
+ 1); the worker re-reads the file.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sagacity.approval._enrollment_codes import EnrollmentCodeError, spend_code
from sagacity.approval._passkeys import (
    enroll_passkey,
    new_challenge,
    registration_options,
    verify_registration,
)
from sagacity.worker.inbox._pages import render
from sagacity.worker.inbox._passkey_registry import approver_standing, load_registry
from sagacity.worker.inbox._security import csrf_json
from sagacity.worker.inbox._sessions import session_of, shelf_of

__all__ = ["enrollment_hint", "enrollment_routes"]

CEREMONY, ENROLLED = "enroll-ceremony", "enrolled"


def enrollment_hint(registry: Path) -> str:
    """What `sagacity inbox` and `sagacity dev` print: how a person gets a passkey here."""
    return (
        "passkey enrollment: make a one-time code for each person with `sagacity keys "
        f"enroll-code --registry {registry} --approver NAME` and give it only to them"
    )


async def enroll_page(request: Request) -> Response:

    config = request.app.state.config
    problem = None
    if config.registry is None:
        problem = "this inbox has no approver registry (start it with --approvers FILE)"
    return render(request, "enroll.html", problem=problem)


async def options(request: Request) -> Response:
    body = await csrf_json(request)
    config = request.app.state.config
    registry = load_registry(config.registry)
    approver = body.get("approver")
    if not isinstance(approver, str) or not approver.strip() or len(approver) > 256:
        raise HTTPException(400, "give the approver's name as the registry spells it")
    approver = approver.strip()
    if approver_standing(registry, approver) is None:
        raise HTTPException(
            400,
            "the registry has no valid key for this approver: a passkey is enrolled for a "
            "person the registry already knows (`sagacity keys enroll` first)",
        )
    try:
        spend_code(config.registry, approver, body.get("code"))
    except EnrollmentCodeError as exc:
        raise HTTPException(403, str(exc)) from None
    challenge = new_challenge()
    made = registration_options(
        approver=approver,
        rp_id=config.rp_id,
        rp_name="sagacity inbox",
        challenge=challenge,
        exclude=registry.passkeys_of(approver),
    )
    shelf_of(request).put(session_of(request), CEREMONY, (approver, challenge))
    return JSONResponse({"options": made})


async def finish(request: Request) -> Response:
    body = await csrf_json(request)
    config = request.app.state.config
    kept = shelf_of(request).take(session_of(request), CEREMONY)  # used once, even if it fails
    if not isinstance(kept, tuple):
        raise HTTPException(
            409, "no enrollment is waiting in this session: start again with a new code"
        )
    approver, challenge = kept
    registry = load_registry(config.registry)
    standing = approver_standing(registry, approver)
    if standing is None:
        raise HTTPException(409, "the approver's keys are no longer valid in the registry")
    key = verify_registration(
        body.get("credential") or {},
        approver=approver,
        challenge=challenge,
        rp_id=config.rp_id,
        origins=[config.origin],
        valid_from=datetime.now(UTC),
        groups=standing.groups,
        valid_until=standing.valid_until,
    )
    saved = enroll_passkey(config.registry, key)
    enrolled = {
        "approver": key.approver,
        "key_id": key.key_id,
        "groups": key.groups,
        "valid_until": key.valid_until,
        "version": saved.version,
    }
    shelf_of(request).put(session_of(request), ENROLLED, enrolled)
    return JSONResponse({"next": "/enroll/done"})


async def done(request: Request) -> Response:

    enrolled = shelf_of(request).take(session_of(request), ENROLLED)
    if not isinstance(enrolled, dict):
        raise HTTPException(404, "no passkey was enrolled in this session")
    return render(request, "enrolled.html", enrolled=enrolled)


def enrollment_routes() -> list[Route]:
    return [
        Route("/enroll", enroll_page),
        Route("/enroll/options", options, methods=["POST"]),
        Route("/enroll/finish", finish, methods=["POST"]),
        Route("/enroll/done", done),
    ]
