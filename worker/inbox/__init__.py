"""`sagacity inbox`: the approval inbox on the web.

A small server-rendered app (Starlette and Jinja; JavaScript only for WebAuthn) over the
SagaClient the CLI uses: pending approvals across sagas with their payload, warnings,
hash, policy and journal; approve or reject signed with a passkey; the sagas needing a
human with their actions. See docs/inbox.md.
"""

from sagacity.worker.inbox._app import InboxConfig, create_app

__all__ = ["InboxConfig", "create_app"]
