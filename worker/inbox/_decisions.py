"""Approve or reject from the page, signed with the approver's passkey.

The decision names the saga, the step and tool the saga shows pending, the payload
SHA-256 the page showed, approve or reject and the reason; it is signed and sent by the
inbox's one path for every signed action (worker.inbox.signing). The answer is shown on
the next page.
"""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from sagacity.approval._models import ApprovalDecision, is_sha256_hex
from sagacity.worker.inbox._pages import render
from sagacity.worker.inbox._signing import PageAction

__all__ = ["decision_routes"]

MAX_REASON = 2_000


async def _decision(request: Request, body: dict[str, Any], saga_id: str) -> ApprovalDecision:
    """The decision the page's fields describe (400 naming what is missing)."""
    digest, step = body.get("payload_sha256"), body.get("step")
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
    review = await request.app.state.source.approval(saga_id)
    return ApprovalDecision(
        saga_id=saga_id,
        step=step,
        tool=review.review.pending.tool,
        payload_sha256=digest,
        approve=approve,
        reason=reason.strip(),
    )


DECISION = PageAction("decision", _decision, "decided")


async def decided(request: Request) -> Response:
    """The saga's answer to the decision just sent."""

    saga_id, answer = DECISION.answer(request)
    status = 200 if answer.get("accepted") else 409
    return render(request, "decided.html", status, saga_id=saga_id, answer=answer)


def decision_routes() -> list[Route]:
    return [
        Route("/sagas/{saga_id:path}/decision/draft", DECISION.draft, methods=["POST"]),
        Route("/sagas/{saga_id:path}/decision/finish", DECISION.finish, methods=["POST"]),
        Route("/sagas/{saga_id:path}/decision", decided, name="decided"),
    ]
