"""Approve or reject from the page, signed with the approver's passkey.

The server builds the decision (sagacity.passkeys.decision_draft: saga, step, tool,
the payload SHA-256 the page showed, approve or reject, reason, approver and key id of
the chosen passkey, issued now) and keeps it on the server with the session
(worker.inbox.sessions.Shelf: for this saga, used once, ten minutes); the challenge is
the SHA-256 of that decision's statement, so the authenticator's signature covers
exactly this decision. The browser's assertion comes back, joins the draft
(passkey_decision) and goes to the saga through SagaClient.send_decision, the `decide`
update the CLI's approve uses. The saga judges it (signature, key, policy) and journals
it, accepted or refused: the inbox checks nothing in its place, so every refusal is
evidence. The answer is shown on the next page.
"""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sagacity.approval_models import is_sha256_hex
from sagacity.passkeys import (
    PasskeyDecisionDraft,
    decision_draft,
    draft_options,
    passkey_decision,
)
from sagacity.worker import client as api
from sagacity.worker.inbox.passkey_registry import load_registry, usable_passkeys
from sagacity.worker.inbox.security import csrf_json
from sagacity.worker.inbox.sessions import session_of, shelf_of

__all__ = ["decision_routes"]

MAX_REASON = 2_000

DRAFT, ANSWER = "decision-draft", "decision-answer"


async def draft(request: Request) -> Response:
    """The decision to sign and the WebAuthn request options whose challenge is its
    statement's SHA-256."""
    from sagacity.worker.inbox.app import saga_id_of

    body = await csrf_json(request)
    saga_id = saga_id_of(request)
    config = request.app.state.config
    registry = load_registry(config.registry)
    key_id, digest, step = body.get("key_id"), body.get("payload_sha256"), body.get("step")
    approve, reason = body.get("approve"), body.get("reason", "")
    if not isinstance(approve, bool):
        raise HTTPException(400, "say whether to approve or reject")
    if not isinstance(reason, str) or len(reason) > MAX_REASON:
        raise HTTPException(400, f"the reason must be text of at most {MAX_REASON} characters")
    if not approve and not reason.strip():
        raise HTTPException(400, "a rejection needs a reason: it is journaled")
    if not isinstance(digest, str) or not is_sha256_hex(digest):
        raise HTTPException(400, "the payload SHA-256 the page showed is missing")
    if not isinstance(step, int) or isinstance(step, bool) or step < 1:
        raise HTTPException(400, "the step the page showed is missing")
    key = next((k for k in usable_passkeys(registry, config.rp_id) if k.key_id == key_id), None)
    if key is None:
        raise HTTPException(400, "that passkey is not enrolled (or no longer valid) here")
    # The step, tool and hash the person saw on the page are what they sign: if the saga
    # moved on since, it refuses the decision and journals the refusal.
    review = await request.app.state.source.approval(saga_id)
    pending = review.review.pending
    made = decision_draft(
        saga_id=saga_id,
        step=step,
        tool=pending.tool,
        payload_sha256=digest,
        key=key,
        approve=approve,
        reason=reason.strip(),
    )
    # One decision waits per session (a new draft replaces it), for this saga only.
    shelf_of(request).put(session_of(request), DRAFT, made.to_json(), saga_id)
    return JSONResponse({"options": draft_options(made, key), "statement": made.statement})


async def finish(request: Request) -> Response:
    """The assertion joins the draft and the decision goes to the saga."""
    from sagacity.worker.inbox.app import saga_id_of, source_of

    body = await csrf_json(request)
    saga_id = saga_id_of(request)
    kept = shelf_of(request).take(session_of(request), DRAFT, saga_id)  # used once
    if not isinstance(kept, str):
        raise HTTPException(409, "no decision is waiting for a passkey here: start again")
    made = PasskeyDecisionDraft.from_json(kept)
    decision = passkey_decision(made, body.get("credential") or {})
    answer: dict[str, Any] = {"approve": made.decision.approve}
    try:
        result = await source_of(request).send_decision(saga_id, decision.model_dump(mode="json"))
        answer |= {"accepted": True, "result": result.model_dump(mode="json")}
    except api.ApprovalRefusedError as exc:
        answer |= {
            "accepted": False,
            "reason": exc.reason,
            "detail": exc.detail,
            "journaled": exc.journaled,
        }
    shelf_of(request).put(session_of(request), ANSWER, answer, saga_id)
    return JSONResponse({"next": request.url_for("decided", saga_id=saga_id).path})


async def decided(request: Request) -> Response:
    """The saga's answer to the decision just sent."""
    from sagacity.worker.inbox.app import render, saga_id_of

    saga_id = saga_id_of(request)
    answer = shelf_of(request).take(session_of(request), ANSWER, saga_id)
    if not isinstance(answer, dict):
        raise HTTPException(404, "no decision was sent for this saga in this session")
    status = 200 if answer.get("accepted") else 409
    return render(request, "decided.html", status, saga_id=saga_id, answer=answer)


def decision_routes() -> list[Route]:
    return [
        Route("/sagas/{saga_id:path}/decision/draft", draft, methods=["POST"]),
        Route("/sagas/{saga_id:path}/decision/finish", finish, methods=["POST"]),
        Route("/sagas/{saga_id:path}/decision", decided, name="decided"),
    ]
