"""The inbox web app: server-rendered pages over an InboxSource.

Pages: the inbox (every pending approval, every saga needing a human), one approval
(payload table, warnings, canonical JSON and its SHA-256, what the policy still needs,
the journal with its verify badge, the Temporal UI link, the passkey decision), the
sagas needing a human with their actions, and passkey enrollment. Every value shown is
escaped by Jinja (autoescape) and its hidden characters written as escapes; sessions
live on the server (the cookie is an opaque id: worker.inbox.sessions); every POST
checks the session's CSRF token and the inbox's Origin; an error is a page that says
what went wrong, never a traceback.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from sagacity._errors import JournalError, SagacityError
from sagacity.approval._models import is_sha256_hex
from sagacity.approval._registry import ApproverRegistry, EnrolledKey, RegistryError
from sagacity.worker.client import _client as api
from sagacity.worker.client._resolutions import ResolutionRefusedError
from sagacity.worker.inbox._formatting import payload_rows, shown_text
from sagacity.worker.inbox._pages import render, saga_id_of, source_of
from sagacity.worker.inbox._passkey_registry import usable_passkeys
from sagacity.worker.inbox._security import LOOPBACK_HOSTS, CsrfError, SecurityHeaders
from sagacity.worker.inbox._sessions import ServerSessions, SessionStore
from sagacity.worker.inbox._source import InboxSource, temporal_ui_link

__all__ = ["InboxConfig", "create_app", "render"]

HERE = Path(__file__).parent
log = logging.getLogger("sagacity.inbox")


@dataclass
class InboxConfig:
    """How the app runs. `rp_id` and `origin` are what WebAuthn binds a passkey to: a
    passkey made for http://localhost:8200 answers there only."""

    rp_id: str = "localhost"
    origin: str = "http://localhost:8200"
    hosts: frozenset[str] | None = LOOPBACK_HOSTS
    """Host names the app answers to: loopback ones and the origin's (DNS rebinding)."""
    registry: Path | None = None
    """The approver registry file passkeys are enrolled into and looked up in."""
    https: bool = False


async def inbox(request: Request) -> Response:
    source = source_of(request)
    page = await source.pending()
    dirty = await source.dirty()
    return render(
        request,
        "inbox.html",
        pending=page.items,
        more=page.more_note(),
        searched=page.searched,
        dirty=dirty,
    )


async def approval(request: Request) -> Response:
    source = source_of(request)
    shown = await source.approval(saga_id_of(request))
    pending = shown.review.pending
    rows, warnings = payload_rows(pending.payload)
    passkeys, problem = _passkeys(request.app.state.config)
    return render(
        request,
        "approval.html",
        shown=shown,
        pending=pending,
        rows=rows,
        warnings=warnings,
        canonical=shown_text(pending.canonical_payload, frozenset(w.char for w in warnings)),
        passkeys=passkeys,
        passkeys_problem=problem,
        ui_link=temporal_ui_link(source.temporal_ui, source.namespace, shown.summary),
    )


def _passkeys(config: InboxConfig) -> tuple[list[EnrolledKey], str]:
    """The passkeys a person may decide with here, or why there are none."""
    if config.registry is None:
        return [], (
            "this inbox has no approver registry, so it cannot take passkey decisions: "
            "start it with --approvers FILE (the worker's registry); or decide with "
            "`sagacity approve`"
        )
    keys = usable_passkeys(ApproverRegistry.load(config.registry), config.rp_id)
    if not keys:
        return [], "no passkey is enrolled for this inbox yet: enroll one first"
    return keys, ""


async def dirty_page(request: Request) -> Response:
    """Sagas needing a human, with their actions: signed with the person's passkey where
    the inbox has a registry, else sent under the name they give."""
    config: InboxConfig = request.app.state.config
    passkeys, problem = _passkeys(config) if config.registry is not None else ([], "")
    return render(
        request,
        "dirty.html",
        dirty=await source_of(request).dirty(),
        passkeys=passkeys,
        passkeys_problem=problem,
    )


async def journal_page(request: Request) -> Response:
    saga_id = saga_id_of(request)
    entries, report = await source_of(request).journal(saga_id)
    return render(request, "journal.html", saga_id=saga_id, entries=entries, report=report)


_STATUS: list[tuple[type[BaseException], int, str]] = [
    (CsrfError, 403, "Refused"),
    (api.SagaNotFoundError, 404, "No such saga"),
    (api.NothingPendingError, 409, "Nothing to decide"),
    (api.SagaAlreadyClosedError, 409, "The saga has finished"),
    (api.RefusedError, 409, "Refused by the saga"),
    (api.PendingHashMismatchError, 409, "The payload's hash does not match"),
    (api.TemporalUnavailableError, 503, "Temporal is unreachable"),
    (api.NoWorkerError, 503, "No worker answered"),
]

_PLAIN: list[tuple[type[BaseException], str]] = [
    (api.TemporalUnavailableError, "The inbox cannot reach Temporal; the details are in its log."),
    (api.NoWorkerError, "No worker answered in time; try again, and see the inbox's log."),
    (RegistryError, "The approver registry could not be read; the details are in the log."),
    (JournalError, "The journal could not be read; the details are in the inbox's log."),
]
"""Errors whose own text names files, addresses or a library's exception: the page says
this sentence instead, and the log keeps the text."""

_PATH = re.compile(r"(?<![\w.:/])/(?:[^\s/'\"]+/)+[^\s/'\",;:)]*")
_ADDRESS = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b|\[[0-9a-fA-F:.]+\](?::\d+)?")


def plain_message(exc: BaseException, *, hide: tuple[str, ...] = ()) -> str:
    """What a page may say of `exc`: a fixed sentence for errors about the machine (files,
    Temporal, the journal), else its own sentence with file paths, network addresses and
    the `hide` strings (the Temporal address) cut out. The log has the full text."""
    for kind, sentence in _PLAIN:
        if isinstance(exc, kind):
            return sentence
    text = str(exc)
    for secret in hide:
        if secret:
            text = text.replace(secret, "(see the inbox's log)")
    text = _PATH.sub("(a file: see the inbox's log)", text)
    return _ADDRESS.sub("(an address: see the inbox's log)", text)


def _hidden(request: Request) -> tuple[str, ...]:
    """The strings a page never shows: the Temporal address, the registry's path."""
    config: InboxConfig = request.app.state.config
    source = request.app.state.source
    target = getattr(source, "temporal_address", None)
    return tuple(str(v) for v in (target, config.registry) if v)


def wants_json(request: Request) -> bool:
    """The passkey pages' fetch calls ask for JSON: their errors are JSON too."""
    return "application/json" in request.headers.get("accept", "")


async def sagacity_error(request: Request, exc: Exception) -> Response:
    """A typed error: its own sentence (it says what to do), escaped, on a clear page."""
    status, title = 400, "Cannot do that"
    for kind, code, heading in _STATUS:
        if isinstance(exc, kind):
            status, title = code, heading
            break
    log.warning("inbox: %s %s: %s: %s", request.method, request.url.path, type(exc).__name__, exc)
    message = plain_message(exc, hide=_hidden(request))
    if isinstance(exc, api.SagaNotFoundError):
        saga_id = request.path_params.get("saga_id", "")
        message = f"no saga {saga_id!r} in this inbox's Temporal namespace"
    if wants_json(request):
        return JSONResponse({"error": f"{title}: {message}"}, status_code=status)
    refusal = exc if isinstance(exc, api.RefusedError) else None
    return render(
        request,
        "error.html",
        status,
        title=title,
        message=message,
        refusal=refusal,
        resolution=isinstance(exc, ResolutionRefusedError),
    )


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if wants_json(request):
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)
    return render(request, "error.html", exc.status_code, title="Not here", message=str(exc.detail))


async def server_error(request: Request, exc: Exception) -> Response:
    """Anything unexpected: logged here with its traceback, a plain page there."""
    log.exception("inbox: %s %s failed", request.method, request.url.path, exc_info=exc)
    if wants_json(request):
        return JSONResponse({"error": "the inbox could not do this; see its log"}, 500)
    return HTMLResponse(
        "<!doctype html><title>Error</title><h1>Something went wrong</h1>"
        "<p>The inbox could not answer; the details are in the server's log.</p>",
        status_code=500,
    )


def create_app(
    config: InboxConfig,
    *,
    source: InboxSource,
    extra_routes: list[Route] | None = None,
) -> Starlette:
    """The app over `source` (opened and closed by the caller: worker.inbox.server)."""
    from sagacity.worker.inbox._decisions import decision_routes
    from sagacity.worker.inbox._enrollment import enrollment_routes
    from sagacity.worker.inbox._resolutions import resolution_routes

    routes = [
        Route("/", inbox),
        Route("/sagas/{saga_id:path}/approval", approval),
        Route("/sagas/{saga_id:path}/journal", journal_page),
        Route("/dirty", dirty_page),
        *decision_routes(),
        *resolution_routes(),
        *enrollment_routes(),
        *(extra_routes or []),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    sessions = SessionStore()
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(SecurityHeaders, hosts=config.hosts),
            Middleware(ServerSessions, store=sessions, https=config.https),
        ],
        exception_handlers={
            SagacityError: sagacity_error,
            HTTPException: http_error,
            Exception: server_error,
        },
    )
    app.state.config = config
    app.state.source = source
    app.state.sessions = sessions
    return app


def valid_digest(value: object) -> str:
    """A posted SHA-256, or 400."""
    if not isinstance(value, str) or not is_sha256_hex(value):
        raise HTTPException(400, "the form's payload SHA-256 is not 64 lowercase hex digits")
    return value
