"""Framework adapters: MCP servers' tools, the OpenAI Agents SDK and Pydantic AI, run as
sagas. Each is an optional extra."""

from __future__ import annotations

__all__: list[str] = []
