"""The inbox's defences: loopback by default, server-side sessions (worker.inbox.sessions),
CSRF token and Origin on every POST, a strict Content-Security-Policy, and no traceback
ever sent to a browser.

Why loopback: the inbox has no login. What it protects is signed by each person's own
passkey (a decision the saga checks against the approver registry), but anyone who can
open the pages reads every pending payload and can press "resolve" where resolutions are
not signed. Bound to 127.0.0.1 only the machine's own users reach it; serving it wider
takes an explicit flag (and belongs behind a reverse proxy with TLS and a login).
The Host header is checked too, so a web page whose DNS name is rebound to 127.0.0.1
cannot read the inbox from the person's own browser.

Why every POST must name the inbox's own Origin (a missing one is refused): browsers
send Origin on every POST, fetch or form, so only a non-browser client can leave it
out, and the cookie is sent to every port of localhost, so another local app may hold
it. A browser page on another port is stopped by its Origin; a local program that
replays a stolen cookie can forge any header, but the cookie is only a session id: the
session's ceremonies need what the program lacks (an enrollment code made for one
approver, or the person's passkey over a challenge it never saw).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sagacity._errors import SagacityError
from sagacity.worker.inbox._sessions import session_of

__all__ = [
    "CSP",
    "CsrfError",
    "RemoteBindError",
    "SecurityHeaders",
    "check_bind",
    "csrf_form",
    "csrf_json",
    "csrf_token",
    "is_loopback",
]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
"""No inline script or style, nothing from another origin, no framing: a payload that
slipped HTML past the escaping still could not run or load anything."""

CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"


class RemoteBindError(SagacityError, ValueError):
    """A non-loopback address was asked for without --allow-remote."""


class CsrfError(SagacityError):
    """A POST without the session's CSRF token (or from another origin)."""


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and the name localhost; nothing else (0.0.0.0 is every address)."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(host: str, *, allow_remote: bool) -> None:
    """Refuse to serve on a non-loopback address unless `allow_remote` says so."""
    if is_loopback(host) or allow_remote:
        return
    raise RemoteBindError(
        f"refusing to serve the inbox on {host!r}: it has no login of its own, and whoever "
        "reaches it reads every pending payload and can act on sagas that need a human. "
        "Serve it on 127.0.0.1 (the default) and reach it through an SSH tunnel, or put it "
        "behind a reverse proxy with TLS and a login and pass --allow-remote"
    )


def csrf_token(request: Request) -> str:
    """The session's CSRF token (kept server-side with the session, never in the cookie)."""
    return session_of(request).csrf


def _same_origin(request: Request) -> bool:
    """A browser names the page a POST came from in Origin; refuse another site's, an
    opaque "null" one and a missing one (every browser sends it on a POST). The inbox's
    own origin is the one configured (behind a proxy) or the one the request was sent to."""
    origin = request.headers.get("origin")
    if origin is None:
        return False
    own = {f"{request.url.scheme}://{request.headers.get('host', '')}"}
    config = getattr(request.app.state, "config", None)
    if config is not None:
        own.add(config.origin)
    return origin in own


def _check_sent(request: Request, sent: object, what: str, stale: str = "") -> None:
    """Refuse (CsrfError) a POST from another site, or whose CSRF token `sent` is not
    the session's; `what` names what was sent, `stale` says why a token may be old."""
    expected = csrf_token(request)
    if not _same_origin(request):
        raise CsrfError(
            f"refused: this {what} was sent from another site (or without the Origin header "
            "every browser sends)"
        )
    if (
        not isinstance(sent, str)
        or not isinstance(expected, str)
        or not hmac.compare_digest(sent.encode(), expected.encode())
    ):
        raise CsrfError(
            f"refused: the {what}'s CSRF token is missing or is not this session's{stale}: "
            "reload the page and try again"
        )


async def csrf_form(request: Request) -> FormData:
    """The POSTed form, once its CSRF token (form field or X-CSRF-Token header) is the
    session's and its Origin is this site; else CsrfError. Every POST handler starts
    here."""
    form = await request.form()
    sent = request.headers.get(CSRF_HEADER) or form.get(CSRF_FIELD)
    _check_sent(request, sent, "form", " (the page may be stale, or the session expired)")
    return form


MAX_JSON_BYTES = 64 * 1024


async def csrf_json(request: Request) -> dict[str, Any]:
    """A POSTed JSON object (the passkey pages' fetch calls), once its X-CSRF-Token
    header is the session's and its Origin is this site; else CsrfError."""
    _check_sent(request, request.headers.get(CSRF_HEADER), "request")
    body = await request.body()
    if len(body) > MAX_JSON_BYTES:
        raise CsrfError(f"refused: the request is larger than {MAX_JSON_BYTES} bytes")
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        raise CsrfError("refused: the request is not JSON") from None
    if not isinstance(value, dict):
        raise CsrfError("refused: the request is not a JSON object")
    return value


class SecurityHeaders:
    """Adds the CSP and its companions to every response, and refuses a Host header
    that names another site (DNS rebinding) when `hosts` is given."""

    def __init__(self, app: ASGIApp, *, hosts: frozenset[str] | None) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.hosts is not None and _host_name(scope) not in self.hosts:
            await _plain(send, 421, "this inbox answers on its loopback address only")
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"same-origin"),  # no-referrer makes Origin "null"
                    (b"x-frame-options", b"DENY"),
                    (b"cache-control", b"no-store"),
                    (b"cross-origin-opener-policy", b"same-origin"),
                ]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


def _host_name(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name == b"host":
            host = str(value.decode("latin-1")).lower()
            if host.startswith("["):
                return host.split("]")[0] + "]"
            return host.rsplit(":", 1)[0] if ":" in host else host
    return ""


async def _plain(send: Send, status: int, text: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain; charset=utf-8")],
        }
    )
    await send({"type": "http.response.body", "body": text.encode()})


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})

Handler = Callable[[Request], Awaitable[Any]]
