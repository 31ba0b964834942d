"""The typed errors of the MCP adapter: each names the server, the tool and what to do."""

from __future__ import annotations

from sagacity._errors import SagacityError, ToolboxError


class McpMappingError(ToolboxError):
    """The mapping of a toolset does not fit the server's tools (a name the server does
    not list, a compensation that resolves to nothing or to two things, a tool whose
    definition sagacity cannot serve). Raised when the toolset is opened, before the
    worker starts: never at refund time."""


class McpToolError(SagacityError):
    """The server ran the call and reported it failed (`isError: true` in the result, a
    protocol error, or a request for input no saga can give). The step is FAILED and the
    saga compensates: the failure is never handed on as a successful result."""


class McpToolChangedError(SagacityError):
    """The server no longer lists the tool as the worker took it at start (gone, or its
    input or output schema changed). Nothing was sent: what was validated, and perhaps
    approved, was checked against the old definition."""


class McpConnectionError(SagacityError):
    """The server could not be reached before the call was sent (nothing was sent)."""


__all__ = ["McpConnectionError", "McpMappingError", "McpToolChangedError", "McpToolError"]
