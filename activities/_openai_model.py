"""A `ModelClient` for any server that speaks OpenAI's chat-completions protocol.

OpenAI itself, or a local model behind Ollama, vLLM or llama.cpp: only the base URL, the
API key and the model name differ, and the worker passes them in from its settings.

Three decisions shape this adapter:

- Retries belong to Temporal, not to the HTTP client (`max_retries=0`). The model call
  is an activity with a retry policy; a client that retried on its own would multiply the
  attempts and hide them from history. Transient answers (5xx, 429, 408, 409, connection
  errors, timeouts) raise a retryable error, honouring the server's Retry-After; any
  other 4xx cannot succeed on retry and raises a non-retryable `ModelRequestError` that
  names the provider's status and message, so the saga fails and compensates.
- A saga cannot redirect the worker's API key. `ModelSettings.base_url` comes from
  whoever starts the saga; sending the worker's key to a URL they choose would hand it
  to them. A base URL other than the worker's own is refused unless the operator listed
  it in `allowed_base_urls`.
- A malformed tool call never crashes the activity. Arguments that are not a JSON object
  become `{INVALID_ARGUMENTS_KEY: <raw text>}`: the toolbox forbids unknown keys, so the
  tool runner refuses the call (CALL_REFUSED, nothing runs), the raw text is kept as
  evidence, and the refusal goes back to the model so it can correct itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import timedelta
from typing import Any, cast

from openai import (
    APIConnectionError,
    APIStatusError,
    AsyncOpenAI,
    omit,
)
from temporalio.exceptions import ApplicationError

from sagacity.activities._models import (
    INVALID_ARGUMENTS_KEY,
    ChatMessage,
    ModelTurn,
    ModelTurnInput,
    ToolCall,
)

__all__ = ["INVALID_ARGUMENTS_KEY", "OpenAIChatModel", "parse_arguments", "to_chat_messages"]

"""The one key of `ToolCall.args` when the model's arguments were not a JSON object."""

RAW_ARGUMENTS_LIMIT = 2_000
"""Characters of unparseable arguments kept (for the journal and for the model)."""

MESSAGE_LIMIT = 2_000
"""Characters of a provider's error message kept in the raised error."""

MAX_RETRY_AFTER_S = 60.0
"""A Retry-After longer than this is capped: the activity's retry policy bounds the rest."""

RETRYABLE_STATUS = frozenset({408, 409, 429})
"""4xx answers that can succeed later (the same set the openai client itself retries)."""


class OpenAIChatModel:
    """Asks an OpenAI-compatible chat-completions endpoint for the saga's next turn.

    `timeout` must stay below the model activity's start-to-close timeout (5 minutes), so
    a slow server surfaces as a retryable timeout rather than a killed attempt.
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None = None,
        model: str | None = None,
        timeout: float = 120.0,
        allowed_base_urls: Iterable[str] = (),
    ) -> None:
        self.base_url = _normalized(base_url)
        self.model = model
        self._api_key = api_key or "unset"  # local servers ignore it; OpenAI answers 401
        self._timeout = timeout
        self.allowed_base_urls = frozenset(_normalized(u) for u in allowed_base_urls) - {
            self.base_url
        }
        self._clients: dict[str, AsyncOpenAI] = {self.base_url: self._new_client(self.base_url)}

    def _new_client(self, base_url: str) -> AsyncOpenAI:
        return AsyncOpenAI(
            base_url=base_url, api_key=self._api_key, max_retries=0, timeout=self._timeout
        )

    async def aclose(self) -> None:
        """Close the HTTP connection pools (call when the worker stops)."""
        for client in self._clients.values():
            await client.close()

    async def next_turn(
        self, req: ModelTurnInput, tool_schemas: list[dict[str, object]]
    ) -> ModelTurn:
        base_url = self._base_url_for(req)
        client = self._clients.get(base_url)
        if client is None:
            client = self._clients[base_url] = self._new_client(base_url)
        model = req.settings.model or self.model
        if not model:
            raise ApplicationError(
                "no model name: set ModelSettings.model on the saga or SAGACITY_OPENAI_MODEL "
                "on the worker",
                type="ModelRequestError",
                non_retryable=True,
            )
        temperature = req.settings.temperature
        try:
            completion = await client.chat.completions.create(
                model=model,
                messages=cast(Any, to_chat_messages(req.messages)),
                tools=cast(Any, tool_schemas) if tool_schemas else omit,
                temperature=temperature if temperature is not None else omit,
            )
        # Raised `from None`: the message already carries the provider's words, and the
        # workflow reports the innermost cause of a failure, which would otherwise be the
        # SDK's terser exception instead of this one.
        except APIStatusError as exc:
            raise _status_error(exc, base_url) from None
        except APIConnectionError as exc:  # includes APITimeoutError
            reason = f"{exc} ({exc.__cause__})" if exc.__cause__ else str(exc)
            raise ApplicationError(
                f"could not reach the model server at {base_url}: {reason}; the model "
                "activity retries",
                type="ModelUnavailable",
            ) from None
        turn_index = req.turn + 1  # the saga's own count: stable when old turns are trimmed
        return _turn(completion, base_url, model, turn_index)

    def _base_url_for(self, req: ModelTurnInput) -> str:
        requested = req.settings.base_url
        if requested is None:
            return self.base_url
        wanted = _normalized(requested)
        if wanted == self.base_url or wanted in self.allowed_base_urls:
            return wanted
        allowed = sorted({self.base_url, *self.allowed_base_urls})
        raise ApplicationError(
            f"the saga asks for model base_url {requested!r}, but this worker sends its API "
            f"key only to {allowed}; drop base_url from the saga's model settings or have the "
            "operator allow it on the worker (SAGACITY_OPENAI_ALLOWED_BASE_URLS)",
            type="ModelBaseUrlNotAllowed",
            non_retryable=True,
        )


def to_chat_messages(messages: Iterable[ChatMessage]) -> list[dict[str, Any]]:
    """The saga's conversation as chat-completions request messages.

    Arguments are re-serialized from the recorded dict, so a call whose arguments were
    unparseable is shown back to the model as its marker object: valid JSON that tells
    the model what was received, where the raw text might break a server's chat template.
    """
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            out.append(
                {"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content or ""}
            )
        elif m.role == "assistant" and m.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": m.content,
                    "tool_calls": [
                        {
                            "id": c.call_id or "",
                            "type": "function",
                            "function": {"name": c.tool, "arguments": json.dumps(c.args)},
                        }
                        for c in m.tool_calls
                    ],
                }
            )
        else:
            out.append({"role": m.role, "content": m.content or ""})
    return out


def parse_arguments(raw: object) -> dict[str, Any]:
    """The model's arguments as a dict; anything but a JSON object becomes the marker.

    Empty arguments mean "no arguments" (some local servers send "" for a tool without
    parameters). NaN and Infinity are not JSON and are treated as unparseable: they
    would otherwise be silently rewritten on their way through Temporal.
    """
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return {str(k): v for k, v in raw.items()}
    text = raw if isinstance(raw, str) else str(raw)
    if not text.strip():
        return {}
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, dict):
        return value
    return {INVALID_ARGUMENTS_KEY: text[:RAW_ARGUMENTS_LIMIT]}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _turn(completion: Any, base_url: str, model: str, turn_index: int) -> ModelTurn:
    """The reply as a turn. Read defensively: "OpenAI-compatible" servers vary, and a
    reply that is not a completion at all is retried like any other bad answer."""
    choices = getattr(completion, "choices", None)
    first = choices[0] if isinstance(choices, list) and choices else None
    message = getattr(first, "message", None)
    if message is None:
        raise ApplicationError(
            f"the model server at {base_url} answered without a message: "
            f"{str(completion)[:MESSAGE_LIMIT]}",
            type="ModelResponseError",
        )
    calls = [
        _tool_call(raw, f"call_{turn_index}_{i}")
        for i, raw in enumerate(getattr(message, "tool_calls", None) or (), start=1)
    ]
    if calls:
        return ModelTurn(tool_calls=calls)
    content = getattr(message, "content", None)
    if getattr(first, "finish_reason", None) == "content_filter" and not content:
        raise ApplicationError(
            f"the model's answer was withheld by the provider's content filter (model "
            f"{model!r}); change the goal or the model",
            type="ModelRequestError",
            non_retryable=True,
        )
    refusal = getattr(message, "refusal", None)
    return ModelTurn(final=str(content or refusal or ""))


def _tool_call(raw: Any, fallback_id: str) -> ToolCall:
    """One tool call of the reply; servers that omit the id get a stable stand-in, since
    the tool result must name the call it answers."""
    function = getattr(raw, "function", None)
    name = getattr(function, "name", None)
    return ToolCall(
        tool=name if isinstance(name, str) else "",
        args=parse_arguments(getattr(function, "arguments", None)),
        call_id=getattr(raw, "id", None) or fallback_id,
    )


def _status_error(exc: APIStatusError, base_url: str) -> ApplicationError:
    status = exc.status_code
    detail = _provider_message(exc)
    if status >= 500 or status in RETRYABLE_STATUS:
        return ApplicationError(
            f"model server at {base_url} answered HTTP {status}: {detail}; the model "
            "activity retries",
            type="ModelUnavailable",
            next_retry_delay=_retry_after(exc),
        )
    return ApplicationError(
        f"model request refused by the provider (HTTP {status}): {detail}",
        type="ModelRequestError",
        non_retryable=True,
    )


def _provider_message(exc: APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        message = body.get("message")
        kind = body.get("type") or body.get("code")
        if isinstance(message, str) and message:
            text = f"{message} ({kind})" if isinstance(kind, str) and kind else message
            return text[:MESSAGE_LIMIT]
        return json.dumps(body, default=str)[:MESSAGE_LIMIT]
    if isinstance(body, str) and body.strip():
        return body.strip()[:MESSAGE_LIMIT]
    return exc.response.reason_phrase or "no error message"


def _retry_after(exc: APIStatusError) -> timedelta | None:
    """The server's Retry-After (OpenAI's `retry-after-ms`, or seconds), capped."""
    headers = exc.response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue  # an HTTP date: leave the delay to the retry policy
        if seconds >= 0:
            return timedelta(seconds=min(seconds, MAX_RETRY_AFTER_S))
    return None


def _normalized(url: str) -> str:
    return url.strip().rstrip("/")
