"""Approve or reject from the page, signed with a passkey (filled in with the registry's
passkey support)."""

from __future__ import annotations

from starlette.routing import Route

__all__ = ["decision_routes"]


def decision_routes() -> list[Route]:
    return []
