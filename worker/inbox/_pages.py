"""What every inbox page shares: the templates, how a page is rendered (with the session's
CSRF token), and the saga and source a request is about. The app and its route modules
all use these, so none of them imports another."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.templating import Jinja2Templates

from sagacity.text._visible import visible
from sagacity.worker.client._ended_sagas import live_lines
from sagacity.worker.inbox._security import csrf_token
from sagacity.worker.inbox._source import InboxSource

__all__ = ["TEMPLATES", "render", "saga_id_of", "source_of"]

HERE = Path(__file__).parent


def _when(value: datetime | None) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["vis"] = lambda value: visible("" if value is None else str(value))
    env.filters["when"] = _when
    env.globals["live_lines"] = live_lines
    return env


TEMPLATES = Jinja2Templates(env=_environment())


def render(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A page, with the session's CSRF token for its forms."""
    context.setdefault("csrf", csrf_token(request))
    context["config"] = request.app.state.config
    response: HTMLResponse = TEMPLATES.TemplateResponse(request, name, context, status_code=status)
    return response


def source_of(request: Request) -> InboxSource:
    source: InboxSource = request.app.state.source
    return source


def saga_id_of(request: Request) -> str:
    saga_id = request.path_params["saga_id"]
    if not isinstance(saga_id, str) or not saga_id or len(saga_id) > 1000:
        raise HTTPException(404, "no such saga")
    return saga_id
