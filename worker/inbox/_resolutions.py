"""The actions on a saga that needs a human, from the page: resolve (it happened / it
did not happen), retry the compensation, close accepting what is dirty.

With an approver registry (the worker's, `--approvers`), each action is signed with the
person's own passkey by the inbox's one path for every signed action, exactly as a
decision is (worker.inbox.signing): the resolution names the saga, the action, the step
or the steps shown dirty, the result's SHA-256 and the reason.

Without a registry (a worker that takes unsigned resolutions), the form sends the
action unsigned under the name the person gives, as `sagacity resolve` without --key.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from sagacity.approval._resolutions import ACTIONS, Action, Resolution
from sagacity.journal._bounds import MAX_DEPTH, depth_of
from sagacity.worker.client._resolutions import resolution_of
from sagacity.worker.inbox._pages import render, saga_id_of, source_of
from sagacity.worker.inbox._security import csrf_form
from sagacity.worker.inbox._signing import PageAction
from sagacity.workflows._models import ResolutionResult

__all__ = ["resolution_routes"]

MAX_RESULT_BYTES = 64 * 1024


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
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deep"
        raise HTTPException(400, f"the result is not JSON ({detail}); write null for none") from (
            None
        )
    # The decoder's own limit is the interpreter's recursion limit, which a process may
    # have raised: the saga's bound is checked here, before anything is drafted.
    if depth_of(value) > MAX_DEPTH:
        raise HTTPException(
            400, f"the result's JSON is nested deeper than {MAX_DEPTH} levels; a saga keeps none"
        )
    return value


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

    form = await csrf_form(request)
    saga_id = saga_id_of(request)
    if request.app.state.config.registry is not None:
        raise HTTPException(
            409,
            "this inbox has an approver registry, so a name alone resolves nothing: sign "
            "the action with your passkey on the page of sagas needing a human",
        )
    action, fields = _fields(form)
    made = resolution_of(saga_id, action, actor=_text(form, "actor", 256), **fields)
    source = source_of(request)
    result = await source.send(saga_id, made)
    entries, report = await source.journal(saga_id)
    return render(
        request, "resolved.html", saga_id=saga_id, result=result, entries=entries, report=report
    )


async def _resolution(request: Request, body: dict[str, Any], saga_id: str) -> Resolution:
    """The resolution the page's fields describe (400 naming what is wrong)."""
    action, fields = _fields(body)
    return Resolution(saga_id=saga_id, action=action, **fields)


RESOLUTION = PageAction("resolution", _resolution, "resolution")


async def answered(request: Request) -> Response:
    """The saga's answer to the resolution just sent, with its journal."""

    saga_id, answer = RESOLUTION.answer(request)
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
        Route("/sagas/{saga_id:path}/resolve/draft", RESOLUTION.draft, methods=["POST"]),
        Route("/sagas/{saga_id:path}/resolve/finish", RESOLUTION.finish, methods=["POST"]),
        Route("/sagas/{saga_id:path}/resolution", answered, name="resolution"),
        Route("/sagas/{saga_id:path}/resolve", resolve, methods=["POST"]),
    ]
