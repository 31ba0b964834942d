"""`sagacity inbox`: serve the web approval inbox (worker.inbox) on this machine.

It binds 127.0.0.1 by default and refuses any other address without --allow-remote:
the inbox has no login of its own (see worker.inbox.security for why). Passkeys answer
on the address people open, http://localhost:PORT (browsers allow WebAuthn over http
on localhost only); behind a TLS proxy, give --origin https://inbox.example.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sagacity.worker.cli._common import global_options, run, settings_of, user_errors
from sagacity.worker.cli._output import say

__all__ = ["inbox"]

HostOpt = Annotated[
    str, typer.Option(help="address to listen on; only a loopback one without --allow-remote")
]
PortOpt = Annotated[int, typer.Option(min=1, max=65535, help="port to listen on")]


@global_options
def inbox(
    ctx: typer.Context,
    host: HostOpt = "127.0.0.1",
    port: PortOpt = 8200,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            help="listen on a non-loopback address (put a reverse proxy with TLS and a login "
            "in front: the inbox has no login)",
        ),
    ] = False,
    origin: Annotated[
        str | None,
        typer.Option(help="the URL people open, for passkeys \\[default: http://localhost:PORT]"),
    ] = None,
    temporal_ui: Annotated[
        str | None,
        typer.Option(help="the Temporal UI's address, for links to each saga"),
    ] = None,
    approvers: Annotated[
        str | None,
        typer.Option(
            help="approver registry file passkeys are enrolled into \\[env: SAGACITY_APPROVERS]"
        ),
    ] = None,
) -> None:
    """Serve the approval inbox: pending approvals decided, and dirty sagas resolved, with
    each person's passkey, in a browser."""
    with user_errors():  # the inbox extra may not be installed: a one-line hint
        from sagacity.worker.inbox._server import InboxOptions, serve_inbox

    settings = settings_of(ctx)
    registry = approvers or settings.approvers
    options = InboxOptions(
        host=host,
        port=port,
        allow_remote=allow_remote,
        origin=origin,
        temporal_ui=temporal_ui or settings.temporal_ui_url,
        registry=Path(registry) if registry else None,
    )
    run(serve_inbox(options, settings, say))
