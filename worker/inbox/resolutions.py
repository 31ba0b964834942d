"""The actions on a saga that needs a human, from the page: resolve (it happened / it
did not happen), retry the compensation, close accepting what is dirty.

With an approver registry (the worker's, `--approvers`), each action is signed with the
person's own passkey, exactly as a decision is: the server builds the resolution
(sagacity.passkeys.resolution_draft: saga, action, step or the steps shown dirty, the
result's SHA-256, reason, the chosen passkey's owner and key id, issued now), the
WebAuthn challenge is the SHA-256 of its statement, and the browser's assertion joins it
(passkey_resolution) on its way to the saga's `resolve` update. The saga judges it
(signature, key, resolution policy) and journals it, accepted or refused; the inbox
checks nothing in its place. There is no shared inbox key: whoever reaches the page
speaks only with a passkey they hold.

Without a registry (a worker that takes unsigned resolutions), the form sends the
action unsigned under the name the person gives, as `sagacity resolve` without --key.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sagacity.passkeys import (
    passkey_resolution,
    resolution_draft,
    resolution_options,
)
from sagacity.resolutions import ACTIONS, Action
from sagacity.worker.client_resolutions import ResolutionRefusedError, resolution_body
from sagacity.worker.inbox.passkey_registry import load_registry, usable_passkeys
from sagacity.worker.inbox.security import csrf_form, csrf_json
from sagacity.worker.inbox.sessions import session_of, shelf_of
from sagacity.workflows.models import ResolutionResult

__all__ = ["resolution_routes"]

MAX_RESULT_BYTES = 64 * 1024


DRAFT, ANSWER = "resolution-draft", "resolution-answer"


def _text(form: FormData | dict[str, Any], name: str, limit: int = 2_000) -> str:
    value = form.get(name, "")
    if not isinstance(value, str):
        raise HTTPException(400, f"the field {name!r} must be text")
    if len(value) > limit:
        raise HTTPException(400, f"the field {name!r} is longer than {limit} characters")
    return value.strip()


def _step(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 1_000_000:
        raise HTTPException(400, "the step must be a positive whole number")
    return int(text)


def _result(text: str) -> Any:
    if not text:
        return None
    if len(text.encode()) > MAX_RESULT_BYTES:
        raise HTTPException(400, f"the result is larger than {MAX_RESULT_BYTES} bytes")
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deep"
        raise HTTPException(400, f"the result is not JSON ({detail}); write null for none") from (
            None
        )


def _fields(form: FormData | dict[str, Any]) -> tuple[Action, dict[str, Any]]:
    """The action and its fields, as the page's form (or the passkey script) sent them."""
    action = _text(form, "action", 40)
    if action not in ACTIONS:
        raise HTTPException(400, f"unknown action {action!r}; one of {', '.join(ACTIONS)}")
    fields: dict[str, Any] = {"reason": _text(form, "reason")}
    if action == "accept":
        listed = [s for s in _text(form, "steps", 2_000).split(",") if s.strip()]
        fields["steps"] = [_step(s.strip()) for s in listed]
        if not fields["reason"]:
            raise HTTPException(400, "closing a saga needs a reason: it is journaled")
    else:
        fields["step"] = _step(_text(form, "step", 12))
    if action == "happened":
        fields["result"] = _result(_text(form, "result", MAX_RESULT_BYTES))
    return action, fields


async def resolve(request: Request) -> Response:
    """An unsigned action under the name given: only for an inbox without a registry."""
    from sagacity.worker.inbox.app import render, saga_id_of, source_of

    form = await csrf_form(request)
    saga_id = saga_id_of(request)
    if request.app.state.config.registry is not None:
        raise HTTPException(
            409,
            "this inbox has an approver registry, so a name alone resolves nothing: sign "
            "the action with your passkey on the page of sagas needing a human",
        )
    action, fields = _fields(form)
    body = resolution_body(saga_id, action, actor=_text(form, "actor", 256), **fields)
    source = source_of(request)
    result = await source.send_resolution(saga_id, body)
    entries, report = await source.journal(saga_id)
    return render(
        request, "resolved.html", saga_id=saga_id, result=result, entries=entries, report=report
    )


async def draft(request: Request) -> Response:
    """The resolution to sign and the WebAuthn request options whose challenge is its
    statement's SHA-256 (the chosen passkey's, valid now, for this inbox's RP)."""
    from sagacity.worker.inbox.app import saga_id_of

    body = await csrf_json(request)
    saga_id = saga_id_of(request)
    config = request.app.state.config
    registry = load_registry(config.registry)
    action, fields = _fields(body)
    key_id = body.get("key_id")
    key = next((k for k in usable_passkeys(registry, config.rp_id) if k.key_id == key_id), None)
    if key is None:
        raise HTTPException(400, "that passkey is not enrolled (or no longer valid) here")
    # What the person saw (the step, or the steps listed dirty) is what they sign: if the
    # saga moved on since, it refuses the resolution and journals the refusal.
    made = resolution_draft(saga_id=saga_id, action=action, key=key, **fields)
    # One waits per session, on the server (a result may be 64 KB), for this saga only.
    shelf_of(request).put(session_of(request), DRAFT, made, saga_id)
    return JSONResponse({"options": resolution_options(made, key), "statement": made.statement})


async def finish(request: Request) -> Response:
    """The assertion joins the draft and the resolution goes to the saga."""
    from sagacity.worker.inbox.app import saga_id_of, source_of

    body = await csrf_json(request)
    saga_id = saga_id_of(request)
    made = shelf_of(request).take(session_of(request), DRAFT, saga_id)  # used once
    if made is None:
        raise HTTPException(409, "no resolution is waiting for a passkey here: start again")
    signed = passkey_resolution(made, body.get("credential") or {})
    answer: dict[str, Any]
    try:
        result = await source_of(request).send_resolution(saga_id, signed)
        answer = {"accepted": True, "result": result.model_dump(mode="json")}
    except ResolutionRefusedError as exc:
        answer = {
            "accepted": False,
            "reason": exc.reason,
            "detail": exc.detail[:1_000],
            "journaled": exc.journaled,
        }
    shelf_of(request).put(session_of(request), ANSWER, answer, saga_id)
    return JSONResponse({"next": request.url_for("resolution", saga_id=saga_id).path})


async def answered(request: Request) -> Response:
    """The saga's answer to the resolution just sent, with its journal."""
    from sagacity.worker.inbox.app import render, saga_id_of, source_of

    saga_id = saga_id_of(request)
    answer = shelf_of(request).take(session_of(request), ANSWER, saga_id)
    if not isinstance(answer, dict):
        raise HTTPException(404, "no resolution was sent for this saga in this session")
    if not answer.get("accepted"):
        return render(
            request, "error.html", 409, title="Refused by the saga",
            message=answer.get("detail", ""), refusal=answer, resolution=True,
        )  # fmt: skip
    entries, report = await source_of(request).journal(saga_id)
    result = ResolutionResult.model_validate(answer["result"])
    return render(
        request, "resolved.html", saga_id=saga_id, result=result, entries=entries, report=report
    )


def resolution_routes() -> list[Route]:
    return [
        Route("/sagas/{saga_id:path}/resolve/draft", draft, methods=["POST"]),
        Route("/sagas/{saga_id:path}/resolve/finish", finish, methods=["POST"]),
        Route("/sagas/{saga_id:path}/resolution", answered, name="resolution"),
        Route("/sagas/{saga_id:path}/resolve", resolve, methods=["POST"]),
    ]
