"""A real local HTTP server that speaks the OpenAI, Anthropic and Ollama chat wire formats.

Tests point a provider's base URL at it, script what it answers, and read back what was sent::

    with FakeProvider(default_text="ok") as fake:
        fake.script(kind="answer", text="hello", tokens_in=12, tokens_out=3)
        fake.script(status=429, headers={"Retry-After": "1"})   # then a rate limit
        fake.script(kind="drop")                               # then a dropped connection
        env = fake.environ()          # OPENAI_BASE_URL, ANTHROPIC_BASE_URL, OLLAMA_HOST, keys
        ...
        assert fake.requests[0].path == "/v1/chat/completions"

Paths: POST /v1/chat/completions (OpenAI), POST /v1/messages (Anthropic), POST /api/chat
(Ollama); GET /v1/models and /api/tags list `models`. Each POST to a known path takes the next
scripted response (first in, first out), or the default answer when the queue is empty; the
answer is shaped for the path it arrived on. Unknown paths get 404 and consume nothing.

Script kinds:
    answer     200 with `text` (default: the default answer), `tokens_in`/`tokens_out` usage,
               `usage=False` to leave usage out, `delay=` seconds before answering
    error      `status` (any 4xx/5xx) with `headers` and an error body in the path's format
               carrying `message`; `code` sets OpenAI's error code (e.g. "insufficient_quota")
    drop       read the request, then close the connection without a response
    malformed  200, content-type JSON, a body that is not JSON
    delay      sleep `seconds`, then answer as `answer` does (a slow model)
    raw        `status` (default 200), `headers`, `body` sent verbatim (str/bytes) or as JSON
`kind` may be left out: `status=` alone means error, `body=` alone means raw, else answer.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Kind = Literal["answer", "error", "drop", "malformed", "delay", "raw"]
Responder = Callable[["RecordedRequest"], str]

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
OLLAMA_PATH = "/api/chat"
CHAT_PATHS = (OPENAI_PATH, ANTHROPIC_PATH, OLLAMA_PATH)

FAKE_OPENAI_KEY = "sk-fake-openai-key-0000000000000000"
FAKE_ANTHROPIC_KEY = "sk-ant-fake-anthropic-key-000000000000"


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it. Header names are lower-case."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any  # the decoded JSON body, or None when it was not JSON
    raw: bytes

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages = self.body.get("messages") if isinstance(self.body, dict) else None
        return messages if isinstance(messages, list) else []

    @property
    def prompt(self) -> str:
        """All message contents (and Anthropic's `system`) joined: handy for `in` checks."""
        parts = [str(m.get("content", "")) for m in self.messages if isinstance(m, dict)]
        if isinstance(self.body, dict) and isinstance(self.body.get("system"), str):
            parts.insert(0, self.body["system"])
        return "\n".join(parts)


@dataclass
class Scripted:
    kind: Kind
    text: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    usage: bool = True
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    message: str | None = None
    code: str | None = None
    body: Any = None
    delay: float = 0.0


class FakeProvider:
    """The server (started on construction, on 127.0.0.1 and a free port) and its script."""

    def __init__(
        self,
        default_text: str | Responder = "ok",
        *,
        default_tokens_in: int = 10,
        default_tokens_out: int = 5,
        models: tuple[str, ...] = ("fake-model",),
    ) -> None:
        self.default_text = default_text
        self.default_tokens_in = default_tokens_in
        self.default_tokens_out = default_tokens_out
        self.models = models
        self._queue: deque[Scripted] = deque()
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._served = 0
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> FakeProvider:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving; pending delays end at once. Safe to call twice."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # -- addresses -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """http://127.0.0.1:PORT — the Anthropic base URL and OLLAMA_HOST."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """url + /v1, as OPENAI_BASE_URL is spelled by convention."""
        return f"{self.url}/v1"

    def environ(self, **overrides: str) -> dict[str, str]:
        """Provider variables pointing every provider here, with fake keys; for make_client."""
        env = {
            "OPENAI_BASE_URL": self.openai_base_url,
            "OPENAI_API_KEY": FAKE_OPENAI_KEY,
            "ANTHROPIC_BASE_URL": self.url,
            "ANTHROPIC_API_KEY": FAKE_ANTHROPIC_KEY,
            "OLLAMA_HOST": self.url,
        }
        env.update(overrides)
        return env

    # -- script ----------------------------------------------------------------------------

    def script(
        self,
        kind: Kind | None = None,
        *,
        text: str | None = None,
        tokens_in: int | None = None,
        tokens_out: int | None = None,
        usage: bool = True,
        status: int | None = None,
        headers: Mapping[str, str] | None = None,
        message: str | None = None,
        code: str | None = None,
        body: Any = None,
        seconds: float = 0.0,
        delay: float = 0.0,
    ) -> FakeProvider:
        """Queue one response (see the module docstring). Returns self, so calls chain."""
        if kind is None:
            kind = "error" if status is not None else "raw" if body is not None else "answer"
        if kind == "error" and (status is None or status < 400):
            raise ValueError("kind='error' needs status >= 400")
        entry = Scripted(
            kind=kind,
            text=text,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            usage=usage,
            status=status if status is not None else 200,
            headers=dict(headers or {}),
            message=message,
            code=code,
            body=body,
            delay=seconds if kind == "delay" else delay,
        )
        with self._lock:
            self._queue.append(entry)
        return self

    def answers(self, *texts: str) -> FakeProvider:
        """Queue one plain answer per text."""
        for text in texts:
            self.script(kind="answer", text=text)
        return self

    @property
    def pending(self) -> int:
        """Scripted responses not served yet."""
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, oldest first (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """Only the POSTs to the three chat paths."""
        return [r for r in self.requests if r.method == "POST" and r.path in CHAT_PATHS]

    # -- serving (called from server threads) ----------------------------------------------

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _next(self) -> tuple[Scripted, int]:
        with self._lock:
            self._served += 1
            entry = self._queue.popleft() if self._queue else Scripted(kind="answer")
            return entry, self._served

    def _answer_text(self, entry: Scripted, request: RecordedRequest) -> str:
        if entry.text is not None:
            return entry.text
        default = self.default_text
        return default if isinstance(default, str) else default(request)


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a slow scripted delay never blocks shutdown
    fake: FakeProvider


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read `requests`, not stderr."""

    def do_GET(self) -> None:
        request = self._read("GET")
        fake = self.server.fake
        fake._record(request)
        if request.path == "/api/tags":
            self._send_json(200, {"models": [{"name": m, "model": m} for m in fake.models]})
        elif request.path == "/v1/models":
            data = [{"id": m, "object": "model", "owned_by": "fake"} for m in fake.models]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_json(404, {"error": f"no such path: {request.path}"})

    def do_POST(self) -> None:
        request = self._read("POST")
        fake = self.server.fake
        fake._record(request)
        if request.path not in CHAT_PATHS:
            self._send_json(404, {"error": f"no such path: {request.path}"})
            return
        entry, serial = fake._next()
        if entry.delay and fake._stopping.wait(entry.delay):
            return  # the server is closing
        if entry.kind == "drop":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif entry.kind == "malformed":
            self._send(200, b'{"choices": [ this is not json', {"Content-Type": "application/json"})
        elif entry.kind == "raw":
            self._send_raw(entry)
        elif entry.kind == "error":
            self._send_json(entry.status, _error_body(request.path, entry), entry.headers)
        else:
            text = fake._answer_text(entry, request)
            tokens = (
                entry.tokens_in if entry.tokens_in is not None else fake.default_tokens_in,
                entry.tokens_out if entry.tokens_out is not None else fake.default_tokens_out,
            )
            body = _answer_body(request, text, tokens if entry.usage else None, serial)
            self._send_json(200, body, entry.headers)

    def _read(self, method: str) -> RecordedRequest:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {name.lower(): value for name, value in self.headers.items()}
        return RecordedRequest(method, self.path, headers, body, raw)

    def _send_raw(self, entry: Scripted) -> None:
        if isinstance(entry.body, bytes):
            payload = entry.body
        elif isinstance(entry.body, str):
            payload = entry.body.encode()
        else:
            payload = json.dumps(entry.body).encode()
        headers = {"Content-Type": "application/json", **entry.headers}
        self._send(entry.status, payload, headers)

    def _send_json(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        payload = json.dumps(body).encode()
        self._send(status, payload, {"Content-Type": "application/json", **(headers or {})})

    def _send(self, status: int, payload: bytes, headers: Mapping[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)
        self.close_connection = True


def _answer_body(
    request: RecordedRequest, text: str, tokens: tuple[int, int] | None, serial: int
) -> dict[str, Any]:
    model = request.body.get("model", "fake-model") if isinstance(request.body, dict) else "?"
    if request.path == OPENAI_PATH:
        body: dict[str, Any] = {
            "id": f"chatcmpl-fake-{serial}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
        }
        if tokens:
            body["usage"] = {
                "prompt_tokens": tokens[0],
                "completion_tokens": tokens[1],
                "total_tokens": tokens[0] + tokens[1],
            }
        return body
    if request.path == ANTHROPIC_PATH:
        body = {
            "id": f"msg_fake_{serial}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
        }
        if tokens:
            body["usage"] = {"input_tokens": tokens[0], "output_tokens": tokens[1]}
        return body
    body = {
        "model": model,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "message": {"role": "assistant", "content": text},
        "done": True,
        "done_reason": "stop",
    }
    if tokens:
        body["prompt_eval_count"], body["eval_count"] = tokens
    return body


def _error_body(path: str, entry: Scripted) -> dict[str, Any]:
    message = entry.message or f"fake error {entry.status}"
    if path == ANTHROPIC_PATH:
        kind = {429: "rate_limit_error", 401: "authentication_error", 529: "overloaded_error"}
        error_type = entry.code or kind.get(entry.status, "api_error")
        return {"type": "error", "error": {"type": error_type, "message": message}}
    if path == OLLAMA_PATH:
        return {"error": message}
    return {"error": {"message": message, "type": "fake_error", "param": None, "code": entry.code}}
