"""Signing a person's action with their passkey, from the page: one path for every kind
of action (a decision, a resolution of dirty state).

The server builds the action from what the page showed (the kind's own `build`: for a
decision the step, tool and payload SHA-256; for a resolution the action, step or the
steps shown dirty, the result), makes it the chosen passkey's owner's
(sagacity.approval._passkeys.passkey_draft: their name and key id, issued now) and keeps the
draft on the server with the session (worker.inbox.sessions.Shelf: for this saga, used
once, ten minutes). The WebAuthn challenge is the SHA-256 of the draft's statement, so
the authenticator's signature covers exactly this action. The browser's assertion comes
back, joins the draft (passkey_signed) and goes to the saga through SagaClient.send,
the update the CLI uses. The saga judges it (signature, key, policy) and journals it,
accepted or refused: the inbox checks nothing in its place, so every refusal is
evidence. There is no shared inbox key: whoever reaches the page speaks only with a
passkey they hold. The answer waits on the shelf for the kind's answer page.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sagacity.approval._passkeys import PasskeyDraft, draft_options, passkey_draft, passkey_signed
from sagacity.approval._signed_action import SignedAction
from sagacity.worker.client._errors import RefusedError
from sagacity.worker.inbox._pages import saga_id_of, source_of
from sagacity.worker.inbox._passkey_registry import load_registry, usable_passkeys
from sagacity.worker.inbox._security import csrf_json
from sagacity.worker.inbox._sessions import session_of, shelf_of

__all__ = ["PageAction"]

Build = Callable[[Request, dict[str, Any], str], Awaitable[SignedAction]]


@dataclass(frozen=True)
class PageAction:
    """One kind of action signed from the page: how it is built from the page's fields,
    and the route of the page that shows the saga's answer."""

    kind: str
    build: Build
    answer_route: str

    @property
    def draft_key(self) -> str:
        return f"{self.kind}-draft"

    @property
    def answer_key(self) -> str:
        return f"{self.kind}-answer"

    async def draft(self, request: Request) -> Response:
        """The action to sign and the WebAuthn request options whose challenge is its
        statement's SHA-256 (the chosen passkey's, valid now, for this inbox's RP)."""

        body = await csrf_json(request)
        saga_id = saga_id_of(request)
        config = request.app.state.config
        registry = load_registry(config.registry)
        key_id = body.get("key_id")
        usable = usable_passkeys(registry, config.rp_id)
        key = next((k for k in usable if k.key_id == key_id), None)
        if key is None:
            raise HTTPException(400, "that passkey is not enrolled (or no longer valid) here")
        # What the person saw on the page is what they sign: if the saga moved on since,
        # it refuses the action and journals the refusal.
        made = passkey_draft(await self.build(request, body, saga_id), key)
        # One waits per session (a new draft replaces it), on the server, for this saga.
        shelf_of(request).put(session_of(request), self.draft_key, made, saga_id)
        return JSONResponse({"options": draft_options(made, key), "statement": made.statement})

    async def finish(self, request: Request) -> Response:
        """The assertion joins the draft and the action goes to the saga."""

        body = await csrf_json(request)
        saga_id = saga_id_of(request)
        made = shelf_of(request).take(session_of(request), self.draft_key, saga_id)  # once
        if not isinstance(made, PasskeyDraft):
            raise HTTPException(409, f"no {self.kind} is waiting for a passkey here: start again")
        action = passkey_signed(made, body.get("credential") or {})
        answer: dict[str, Any] = {"action": action.body()}
        try:
            result = await source_of(request).send(saga_id, action)
            answer |= {"accepted": True, "result": result.model_dump(mode="json")}
        except RefusedError as exc:
            answer |= {
                "accepted": False,
                "reason": exc.reason,
                "detail": exc.detail[:1_000],
                "journaled": exc.journaled,
            }
        shelf_of(request).put(session_of(request), self.answer_key, answer, saga_id)
        return JSONResponse({"next": request.url_for(self.answer_route, saga_id=saga_id).path})

    def answer(self, request: Request) -> tuple[str, dict[str, Any]]:
        """The saga the answer page is for, and the answer `finish` left for it in this
        session (taken: shown once; 404 when none was sent)."""
        saga_id = saga_id_of(request)
        answer = shelf_of(request).take(session_of(request), self.answer_key, saga_id)
        if not isinstance(answer, dict):
            raise HTTPException(404, f"no {self.kind} was sent for this saga in this session")
        return saga_id, answer
