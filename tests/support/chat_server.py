"""A real chat-completions server on loopback, and sagas whose model is reached through it.

The server is plain `http.server` in a thread: the adapter's real HTTP client talks to a
real socket, so status codes, headers, timeouts and refused connections behave as they do
against OpenAI or Ollama. Each test scripts the replies (a queue: completion bodies or
error statuses) and reads back every request the adapter sent.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from sagacity.activities._openai_model import OpenAIChatModel
from sagacity.examples.orders import Shop
from sagacity.stores import JournalStore
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker.client._client import saga_result
from sagacity.workflows._models import ModelSettings, SagaInput, SagaResult

_ids = itertools.count(1)


@dataclass
class Reply:
    """One scripted answer: a JSON body with a status, optional headers and a delay."""

    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def call(name: str, args: dict[str, Any] | str, call_id: str | None = None) -> dict[str, Any]:
    """A tool call as a server sends it; a str `args` is sent verbatim (malformed JSON)."""
    return {
        "id": call_id or f"call_{next(_ids)}",
        "type": "function",
        "function": {
            "name": name,
            "arguments": args if isinstance(args, str) else json.dumps(args),
        },
    }


def completion(*calls: dict[str, Any], content: str | None = None) -> Reply:
    """A 200 chat completion with the given tool calls, or a final `content`."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return Reply(
        {
            "id": f"chatcmpl-{next(_ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "test-model",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
        }
    )


def error(status: int, message: str, kind: str = "invalid_request_error", **headers: str) -> Reply:
    """An error in OpenAI's shape: {"error": {"message", "type", ...}}."""
    return Reply(
        {"error": {"message": message, "type": kind, "param": None, "code": None}},
        status=status,
        headers=headers,
    )


class ChatServer:
    """POST /v1/chat/completions answering from a script and recording every request."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._http.daemon_threads = True
        self._http.block_on_close = False  # a test may leave a delayed reply sleeping
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def tool_names(self, index: int) -> list[str]:
        """Names of the tools sent with request `index`."""
        return [t["function"]["name"] for t in self.requests[index].get("tools", [])]

    def messages(self, index: int, role: str | None = None) -> list[dict[str, Any]]:
        msgs: list[dict[str, Any]] = self.requests[index]["messages"]
        return [m for m in msgs if role in (None, m["role"])]

    def _answer(self, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        if path != "/v1/chat/completions":
            return error(404, f"no route {path}", "not_found")
        with self._lock:
            self.requests.append(json.loads(raw))
            self.headers.append(headers)
            if not self.replies:
                return error(400, "test server: no scripted reply left", "script_exhausted")
            return self.replies.popleft()

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)


def _handler(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            reply = server._answer(self.path, {k.lower(): v for k, v in self.headers.items()}, raw)
            if reply.delay:
                time.sleep(reply.delay)
            data = json.dumps(reply.body).encode()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in reply.headers.items():
                    self.send_header(name.replace("_", "-"), value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


@pytest.fixture
async def adapter(chat_server: ChatServer) -> AsyncIterator[OpenAIChatModel]:
    model = OpenAIChatModel(base_url=chat_server.url, api_key="test", model="default-model")
    yield model
    await model.aclose()


@dataclass
class ModelSaga:
    """A saga worker whose 'openai' provider is the adapter pointed at `server`."""

    client: Client
    store: JournalStore
    shop: Shop
    toolbox: Toolbox
    server: ChatServer
    task_queue: str

    def input(self, goal: str = "handle the order", **overrides: Any) -> SagaInput:
        return SagaInput(
            goal=goal, model=ModelSettings(provider="openai", model="test-model"), **overrides
        )

    async def start(self, inp: SagaInput) -> WorkflowHandle[object, SagaResult]:
        return await self.client.start_workflow(
            "AgentSaga",
            inp,
            id=f"saga-{uuid.uuid4().hex[:12]}",
            task_queue=self.task_queue,
            result_type=SagaResult,
        )

    async def run(self, inp: SagaInput) -> SagaResult:
        return await saga_result(await self.start(inp))


@pytest.fixture
async def model_saga(
    temporal_env: WorkflowEnvironment,
    journal: JournalStore,
    chat_server: ChatServer,
    adapter: OpenAIChatModel,
    tmp_path: Path,
) -> AsyncIterator[ModelSaga]:
    shop = Shop(tmp_path / "shop.db")
    toolbox = Toolbox.build(shop)
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    worker = new_worker(
        temporal_env.client,
        store=journal,
        toolbox=toolbox,
        task_queue=task_queue,
        models={"openai": adapter},
    )
    async with worker:
        yield ModelSaga(temporal_env.client, journal, shop, toolbox, chat_server, task_queue)
