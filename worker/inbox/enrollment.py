"""Enrolling a passkey for an approver of the registry, from the page.

Whoever enrolls a passkey for "alice" can approve as alice, so the page does not take
a name on trust: it asks for the inbox's enrollment code, which `sagacity inbox` prints
on its own terminal at start (the person who runs the inbox is the one who may change
the registry, as with `sagacity keys enroll`) and which locks after a few wrong tries.
Only a person the registry already knows can get a passkey, and it gets exactly the
groups their valid keys have. The browser's answer is verified by
sagacity.passkeys.verify_registration (challenge, origin, RP id) and written with
enroll_passkey (locked, atomic, version + 1); the worker re-reads the file.
"""

from __future__ import annotations

import base64
import hmac
from datetime import UTC, datetime

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sagacity.passkeys import (
    enroll_passkey,
    new_challenge,
    registration_options,
    verify_registration,
)
from sagacity.worker.inbox.passkey_registry import approver_groups, load_registry
from sagacity.worker.inbox.security import csrf_json

__all__ = ["MAX_CODE_TRIES", "enrollment_routes"]

MAX_CODE_TRIES = 5
"""Wrong enrollment codes before enrollment locks until the inbox restarts."""


async def enroll_page(request: Request) -> Response:
    from sagacity.worker.inbox.app import render

    config = request.app.state.config
    problem = None
    if config.registry is None:
        problem = "this inbox has no approver registry (start it with --approvers FILE)"
    elif request.app.state.code_tries >= MAX_CODE_TRIES:
        problem = "enrollment is locked after too many wrong codes: restart the inbox"
    return render(request, "enroll.html", problem=problem)


async def options(request: Request) -> Response:
    body = await csrf_json(request)
    config, state = request.app.state.config, request.app.state
    registry = load_registry(config.registry)
    if state.code_tries >= MAX_CODE_TRIES:
        raise HTTPException(403, "enrollment is locked after too many wrong codes")
    code = body.get("code")
    if not isinstance(code, str) or not hmac.compare_digest(
        code.strip().encode(), config.enroll_code.encode()
    ):
        state.code_tries += 1
        raise HTTPException(
            403,
            "wrong enrollment code: it is printed by `sagacity inbox` on its terminal "
            f"({MAX_CODE_TRIES - state.code_tries} tries left)",
        )
    approver = body.get("approver")
    if not isinstance(approver, str) or not approver.strip() or len(approver) > 256:
        raise HTTPException(400, "give the approver's name as the registry spells it")
    approver = approver.strip()
    if approver_groups(registry, approver) is None:
        raise HTTPException(
            400,
            "the registry has no valid key for this approver: a passkey is enrolled for a "
            "person the registry already knows (`sagacity keys enroll` first)",
        )
    challenge = new_challenge()
    made = registration_options(
        approver=approver,
        rp_id=config.rp_id,
        rp_name="sagacity inbox",
        challenge=challenge,
        exclude=registry.passkeys_of(approver),
    )
    request.session["enroll"] = {
        "approver": approver,
        "challenge": base64.b64encode(challenge).decode("ascii"),
    }
    return JSONResponse({"options": made})


async def finish(request: Request) -> Response:
    body = await csrf_json(request)
    config = request.app.state.config
    kept = request.session.pop("enroll", None)
    if not isinstance(kept, dict):
        raise HTTPException(409, "no enrollment is waiting in this session: start again")
    registry = load_registry(config.registry)
    groups = approver_groups(registry, kept["approver"])
    if groups is None:
        raise HTTPException(409, "the approver's keys are no longer valid in the registry")
    key = verify_registration(
        body.get("credential") or {},
        approver=kept["approver"],
        challenge=base64.b64decode(kept["challenge"]),
        rp_id=config.rp_id,
        origins=[config.origin],
        valid_from=datetime.now(UTC),
        groups=groups,
    )
    saved = enroll_passkey(config.registry, key)
    request.session["enrolled"] = {
        "approver": key.approver,
        "key_id": key.key_id,
        "groups": key.groups,
        "version": saved.version,
    }
    return JSONResponse({"next": "/enroll/done"})


async def done(request: Request) -> Response:
    from sagacity.worker.inbox.app import render

    enrolled = request.session.pop("enrolled", None)
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
