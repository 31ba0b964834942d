"""The actions on a saga that needs a human, from the page: resolve (it happened / it
did not happen), retry the compensation, close accepting what is dirty.

The body is the one the CLI sends (worker.client_resolutions.resolution_body): signed
with the inbox's key when it was started with one (`sagacity inbox --key`, as
`sagacity resolve --key`), otherwise unsigned under the name the person gives, which a
worker with an approver registry refuses (the refusal is shown and journaled by the
saga). Passkey-signed resolutions are not part of the saga's protocol yet.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from sagacity.resolutions import ACTIONS
from sagacity.worker.client_resolutions import resolution_body
from sagacity.worker.inbox.security import csrf_form

__all__ = ["resolution_routes"]

MAX_RESULT_BYTES = 64 * 1024


def _text(form: FormData, name: str, limit: int = 2_000) -> str:
    value = form.get(name, "")
    if not isinstance(value, str):
        raise HTTPException(400, f"the form field {name!r} must be text")
    if len(value) > limit:
        raise HTTPException(400, f"the form field {name!r} is longer than {limit} characters")
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
    except json.JSONDecodeError as exc:
        raise HTTPException(
            400, f"the result is not JSON ({exc.msg}); write null for none"
        ) from None


async def resolve(request: Request) -> Response:
    from sagacity.worker.inbox.app import render, saga_id_of, source_of

    form = await csrf_form(request)
    saga_id = saga_id_of(request)
    action = _text(form, "action", 40)
    if action not in ACTIONS:
        raise HTTPException(400, f"unknown action {action!r}; one of {', '.join(ACTIONS)}")
    config = request.app.state.config
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
    signer = config.signer
    actor = None if signer is not None else _text(form, "actor", 256)
    body = resolution_body(saga_id, action, actor=actor, signer=signer, **fields)
    source = source_of(request)
    result = await source.send_resolution(saga_id, body)
    entries, report = await source.journal(saga_id)
    return render(
        request, "resolved.html", saga_id=saga_id, result=result, entries=entries, report=report
    )


def resolution_routes() -> list[Route]:
    return [Route("/sagas/{saga_id:path}/resolve", resolve, methods=["POST"])]
