"""Server-side sessions: the cookie carries only an opaque random session id.

Why: cookies are not port-scoped, so any other web app on this machine (another
localhost port) receives the inbox's cookie from the person's browser, and a copy of a
cookie can be replayed at will. So the cookie holds no secret and no state: 32 random
bytes naming a session kept in this process. Everything a session holds lives here:

- its CSRF token (rendered into the pages; never in the cookie);
- its ceremonies and one-shot answers on the Shelf: the enrollment challenge and its
  approver, the decision and resolution drafts waiting for their assertion, the answer
  page of each. One per (session, purpose), bound to its saga, used once (taken out
  when finished, whether the finish succeeded or failed), gone after ten minutes.

Replaying an old cookie after a ceremony finished finds nothing to finish. A session
idle for 30 minutes, older than 8 hours, or from before a restart is gone; the browser
then just gets a new one.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "SESSION_COOKIE",
    "ServerSessions",
    "Session",
    "SessionStore",
    "Shelf",
    "session_of",
    "shelf_of",
]

SESSION_COOKIE = "sagacity_inbox"
SECURE_COOKIE = "__Host-sagacity_inbox"
"""Over https: Secure, Path=/, no Domain (the browser enforces all three)."""


class Shelf:
    """Ceremony state waiting for the browser's next call: one value per (session,
    purpose), bound to a saga, taken out once, gone after `max_age`. Bounded (a
    resolution draft may hold a 64 KB result): the oldest go first."""

    def __init__(self, size: int = 256, max_age: float = 600.0) -> None:
        self._items: OrderedDict[tuple[str, str], tuple[float, str, Any]] = OrderedDict()
        self._size, self._max_age = size, max_age

    def put(self, session: Session, purpose: str, value: Any, saga_id: str = "") -> None:
        """Keep `value` for `session` (replacing the session's earlier one of `purpose`)."""
        key = (session.id, purpose)
        self._items.pop(key, None)
        self._items[key] = (time.monotonic(), saga_id, value)
        while len(self._items) > self._size:
            self._items.popitem(last=False)

    def take(self, session: Session, purpose: str, saga_id: str = "") -> Any:
        """The value kept for `session` and `purpose` (and `saga_id`), or None; either way
        nothing of `purpose` is left for the session."""
        kept = self._items.pop((session.id, purpose), None)
        if kept is None or kept[1] != saga_id or time.monotonic() - kept[0] > self._max_age:
            return None
        return kept[2]

    def drop(self, session_id: str) -> None:
        for key in [k for k in self._items if k[0] == session_id]:
            del self._items[key]


@dataclass
class Session:
    id: str
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)
    created: float = field(default_factory=time.monotonic)
    seen: float = field(default_factory=time.monotonic)


class SessionStore:
    """The live sessions of this process (bounded; idle and old ones expire)."""

    def __init__(
        self, *, idle: float = 1800.0, max_age: float = 8 * 3600.0, size: int = 4096
    ) -> None:
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self.idle, self.max_age, self.size = idle, max_age, size
        self.shelf = Shelf()

    def find(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        now = time.monotonic()
        if now - session.seen > self.idle or now - session.created > self.max_age:
            self.end(session_id)
            return None
        session.seen = now
        self._sessions.move_to_end(session_id)
        return session

    def new(self) -> Session:
        session = Session(id=secrets.token_urlsafe(32))
        self._sessions[session.id] = session
        while len(self._sessions) > self.size:
            oldest, _ = self._sessions.popitem(last=False)
            self.shelf.drop(oldest)
        return session

    def end(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
        self.shelf.drop(session_id)


def session_of(request: Request) -> Session:
    """The request's server-side session (made by ServerSessions)."""
    session: Session = request.scope["inbox_session"]
    return session


def shelf_of(request: Request) -> Shelf:
    """The app's shelf of ceremonies (its SessionStore's)."""
    store: SessionStore = request.app.state.sessions
    return store.shelf


class ServerSessions:
    """Finds the request's session by the cookie's id (or starts one) and sets the cookie
    when the id is new: HttpOnly, SameSite=Strict, Path=/, and over https Secure with the
    __Host- prefix."""

    def __init__(self, app: ASGIApp, *, store: SessionStore, https: bool) -> None:
        self.app, self.store, self.https = app, store, https
        self.name = SECURE_COOKIE if https else SESSION_COOKIE

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        session = self.store.find(_cookie(scope, self.name))
        fresh = session is None
        if session is None:
            session = self.store.new()
        scope["inbox_session"] = session

        async def with_cookie(message: Message) -> None:
            if fresh and message["type"] == "http.response.start":
                attributes = "; Path=/; HttpOnly; SameSite=Strict"
                if self.https:
                    attributes += "; Secure"
                value = f"{self.name}={session.id}{attributes}"
                headers = list(message.get("headers", []))
                headers.append((b"set-cookie", value.encode("latin-1")))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_cookie)


def _cookie(scope: Scope, name: str) -> str | None:
    for key, value in scope.get("headers", []):
        if key == b"cookie":
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(value.decode("latin-1"))
            except Exception:  # a malformed cookie header is no session
                continue
            if name in jar:
                return jar[name].value
    return None
