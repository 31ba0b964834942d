"""The inbox's defences: loopback by default, signed sessions, CSRF on every POST, a
strict Content-Security-Policy, and no traceback ever sent to a browser.

Why loopback: the inbox has no login. What it protects is signed by each person's own
passkey (a decision the saga checks against the approver registry), but anyone who can
open the pages reads every pending payload and can press "resolve" where resolutions are
not signed. Bound to 127.0.0.1 only the machine's own users reach it; serving it wider
takes an explicit flag (and belongs behind a reverse proxy with TLS and a login).
The Host header is checked too, so a web page whose DNS name is rebound to 127.0.0.1
cannot read the inbox from the person's own browser.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sagacity.errors import SagacityError

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
    """The session's CSRF token, made on first use (a session cookie carries it)."""
    token = request.session.get("csrf")
    if not isinstance(token, str) or len(token) < 32:
        token = secrets.token_urlsafe(32)
        request.session["csrf"] = token
    return token


def _same_origin(request: Request) -> bool:
    """A browser names the page a POST came from in Origin; refuse another site's (and
    an opaque "null" one). The inbox's own origin is the one configured (behind a proxy)
    or the one the request was sent to."""
    origin = request.headers.get("origin")
    if origin is None:
        return True  # not a browser's cross-site POST: the CSRF token still has to match
    own = {f"{request.url.scheme}://{request.headers.get('host', '')}"}
    config = getattr(request.app.state, "config", None)
    if config is not None:
        own.add(config.origin)
    return origin in own


async def csrf_form(request: Request) -> FormData:
    """The POSTed form, once its CSRF token (form field or X-CSRF-Token header) is the
    session's and its Origin is this site; else CsrfError. Every POST handler starts
    here."""
    form = await request.form()
    sent = request.headers.get(CSRF_HEADER) or form.get(CSRF_FIELD)
    expected = request.session.get("csrf")
    if not _same_origin(request):
        raise CsrfError("refused: this form was sent from another site")
    if (
        not isinstance(sent, str)
        or not isinstance(expected, str)
        or not hmac.compare_digest(sent.encode(), expected.encode())
    ):
        raise CsrfError(
            "refused: the form's CSRF token is missing or is not this session's (the page "
            "may be stale, or the session expired): reload the page and try again"
        )
    return form


MAX_JSON_BYTES = 64 * 1024


async def csrf_json(request: Request) -> dict[str, Any]:
    """A POSTed JSON object (the passkey pages' fetch calls), once its X-CSRF-Token
    header is the session's and its Origin is this site; else CsrfError."""
    expected = request.session.get("csrf")
    sent = request.headers.get(CSRF_HEADER)
    if not _same_origin(request):
        raise CsrfError("refused: this request was sent from another site")
    if (
        not isinstance(sent, str)
        or not isinstance(expected, str)
        or not hmac.compare_digest(sent.encode(), expected.encode())
    ):
        raise CsrfError(
            "refused: the request's CSRF token is missing or is not this session's: reload "
            "the page and try again"
        )
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
