"""A loopback fake of the Anthropic Messages API as the released Claude Code CLI calls it.

`claude` reads its endpoint from ANTHROPIC_BASE_URL; pointed here (with a fake
ANTHROPIC_API_KEY) every model call it makes arrives as `POST /v1/messages?beta=true` with
`stream: true`, and is answered with the real server-sent event sequence: `message_start`,
`content_block_start` / `content_block_delta` (`text_delta`, `input_json_delta`) /
`content_block_stop` per block, `message_delta` (stop_reason, usage), `message_stop`.

    with FakeAnthropic() as api:
        api.script(
            Turn(Text("Reading it."), ToolUse("Read", {"file_path": path})),
            Turn(ToolUse("Edit", {"file_path": path, "old_string": "-", "new_string": "+"})),
            Turn(Text("Fixed.")),                       # no tool_use: stop_reason end_turn
        )
        env = {**api.environ(), ...}                    # run claude
        assert api.agent_requests[0].tool_names         # what claude sent

Requests that offer tools are the agent's turns: each takes the next scripted `Turn` (or a
`Limit`, answered as Anthropic answers a rate or plan limit), else `Turn(Text("Done."))`.
Requests without tools are claude's side queries (a session title, a topic check): they get a
short text answer and are kept apart (`side_requests`), so a test can assert none was made.
`count_tokens` is answered with a count; any other path gets 404. Every request is recorded.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

FAKE_KEY = "sk-ant-api03-fake-contract-key-0000000000000000000000"
MODEL = "claude-sonnet-4-5"


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class ToolUse:
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class Turn:
    """One model turn: its blocks in order; stop_reason tool_use when any block is one."""

    blocks: tuple[Text | ToolUse, ...]
    tokens_in: int = 100
    tokens_out: int = 20

    def __init__(self, *blocks: Text | ToolUse, tokens_in: int = 100, tokens_out: int = 20):
        object.__setattr__(self, "blocks", blocks)
        object.__setattr__(self, "tokens_in", tokens_in)
        object.__setattr__(self, "tokens_out", tokens_out)


@dataclass(frozen=True)
class Limit:
    """A refused request, as Anthropic refuses one over a rate or plan limit: `status` with
    `headers` (retry-after, anthropic-ratelimit-*) and the error body."""

    message: str = "This request would exceed your account's rate limit. Please try again later."
    status: int = 429
    error_type: str = "rate_limit_error"
    headers: Mapping[str, str] = field(default_factory=dict)


Answer = Turn | Limit
Responder = Callable[["Request"], Answer | None]  # None: take the next scripted answer


@dataclass(frozen=True)
class Request:
    """One request as the fake saw it; header names lower-case, `path` without the query."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any

    def _list(self, key: str) -> list[dict[str, Any]]:
        value = self.body.get(key) if isinstance(self.body, dict) else None
        return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self._list("messages")

    @property
    def tools(self) -> list[dict[str, Any]]:
        return self._list("tools")

    @property
    def tool_names(self) -> list[str]:
        return [str(tool.get("name")) for tool in self.tools]

    def tool(self, name: str) -> dict[str, Any]:
        return next(tool for tool in self.tools if tool.get("name") == name)

    def blocks(self, role: str | None = None) -> Iterator[dict[str, Any]]:
        """Every content block of the conversation sent (strings as text blocks)."""
        for message in self.messages:
            if role is not None and message.get("role") != role:
                continue
            content = message.get("content")
            if isinstance(content, str):
                yield {"type": "text", "text": content}
            elif isinstance(content, list):
                yield from (b for b in content if isinstance(b, dict))

    @property
    def user_text(self) -> str:
        """All text the user side sent, joined: the prompt, claude's reminders."""
        return "\n".join(str(b.get("text")) for b in self.blocks("user") if b.get("type") == "text")

    @property
    def system_text(self) -> str:
        system = self.body.get("system") if isinstance(self.body, dict) else None
        if isinstance(system, str):
            return system
        if isinstance(system, list):
            return "\n".join(str(b.get("text")) for b in system if isinstance(b, dict))
        return ""

    @property
    def tool_results(self) -> list[dict[str, Any]]:
        return [b for b in self.blocks("user") if b.get("type") == "tool_result"]

    def result_text(self, result: dict[str, Any]) -> str:
        content = result.get("content")
        if isinstance(content, list):
            return "\n".join(str(b.get("text")) for b in content if isinstance(b, dict))
        return str(content)

    @property
    def is_agent_turn(self) -> bool:
        return self.method == "POST" and self.path == "/v1/messages" and bool(self.tools)


class FakeAnthropic:
    """The server (started on construction, on 127.0.0.1 and a free port) and its script."""

    def __init__(self, responder: Responder | None = None) -> None:
        self.responder = responder
        self._queue: deque[Answer] = deque()
        self._requests: list[Request] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    def __enter__(self) -> FakeAnthropic:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def environ(self) -> dict[str, str]:
        """The variables that point claude here."""
        return {"ANTHROPIC_BASE_URL": self.url, "ANTHROPIC_API_KEY": FAKE_KEY}

    def script(self, *answers: Answer) -> FakeAnthropic:
        with self._lock:
            self._queue.extend(answers)
        return self

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[Request]:
        with self._lock:
            return list(self._requests)

    @property
    def agent_requests(self) -> list[Request]:
        return [r for r in self.requests if r.is_agent_turn]

    @property
    def side_requests(self) -> list[Request]:
        """Model calls without tools: claude's own side queries (title, topic, summaries)."""
        return [
            r
            for r in self.requests
            if r.method == "POST" and r.path == "/v1/messages" and not r.is_agent_turn
        ]

    @property
    def paths(self) -> list[str]:
        return [f"{r.method} {r.path}" for r in self.requests]

    def attempts(self) -> list[list[Request]]:
        """The agent's requests grouped by attempt: a new one starts with a conversation without
        an assistant message (a fresh `claude -p`)."""
        groups: list[list[Request]] = []
        for request in self.agent_requests:
            if not any(m.get("role") == "assistant" for m in request.messages) or not groups:
                groups.append([])
            groups[-1].append(request)
        return groups

    # called from the server's threads
    def _record(self, request: Request) -> None:
        with self._lock:
            self._requests.append(request)

    def _answer(self, request: Request) -> Answer:
        if self.responder is not None:
            answer = self.responder(request)
            if answer is not None:
                return answer
        with self._lock:
            return self._queue.popleft() if self._queue else Turn(Text("Done."))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeAnthropic


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _events(turn: Turn, model: str, serial: int) -> Iterator[bytes]:
    """The stream of one turn, event by event, as the Messages API sends it."""
    uses = any(isinstance(block, ToolUse) for block in turn.blocks)
    yield _sse(
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": f"msg_fake_{serial:04d}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": turn.tokens_in,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                    "output_tokens": 1,
                },
            },
        },
    )
    yield _sse("ping", {"type": "ping"})
    for index, block in enumerate(turn.blocks):
        if isinstance(block, Text):
            start: dict[str, Any] = {"type": "text", "text": ""}
            half = len(block.text) // 2
            deltas = [
                {"type": "text_delta", "text": part}
                for part in (block.text[:half], block.text[half:])
                if part
            ]
        else:
            start = {
                "type": "tool_use",
                "id": f"toolu_fake_{serial:04d}_{index}",
                "name": block.name,
                "input": {},
            }
            text = json.dumps(block.input)
            half = len(text) // 2
            deltas = [
                {"type": "input_json_delta", "partial_json": part}
                for part in ("", text[:half], text[half:])
            ]
        yield _sse(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
        for delta in deltas:
            event = {"type": "content_block_delta", "index": index, "delta": delta}
            yield _sse("content_block_delta", event)
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
    yield _sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use" if uses else "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": turn.tokens_out},
        },
    )
    yield _sse("message_stop", {"type": "message_stop"})


def _message(turn: Turn, model: str, serial: int) -> dict[str, Any]:
    """The same turn as one JSON message (a request with `stream: false`)."""
    content: list[dict[str, Any]] = []
    for index, block in enumerate(turn.blocks):
        if isinstance(block, Text):
            content.append({"type": "text", "text": block.text})
        else:
            content.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_fake_{serial:04d}_{index}",
                    "name": block.name,
                    "input": block.input,
                }
            )
    uses = any(isinstance(block, ToolUse) for block in turn.blocks)
    return {
        "id": f"msg_fake_{serial:04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if uses else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": turn.tokens_in, "output_tokens": turn.tokens_out},
    }


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read `requests`."""

    def _read(self, method: str) -> Request:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        parts = urlsplit(self.path)
        headers = {name.lower(): value for name, value in self.headers.items()}
        request = Request(method, parts.path, parts.query, headers, body)
        self.server.fake._record(request)
        return request

    def do_GET(self) -> None:
        self._read("GET")
        self._json(404, _error("not_found_error", "Not found"))

    def do_HEAD(self) -> None:
        self._read("HEAD")
        self._send(200, b"", {})

    def do_POST(self) -> None:
        request = self._read("POST")
        fake = self.server.fake
        body = request.body if isinstance(request.body, dict) else {}
        model = str(body.get("model") or MODEL)
        if request.path == "/v1/messages/count_tokens":
            self._json(200, {"input_tokens": 1000})
            return
        if request.path != "/v1/messages":
            self._json(404, _error("not_found_error", "Not found"))
            return
        answer = fake._answer(request) if request.is_agent_turn else Turn(Text("Fix the test"))
        if isinstance(answer, Limit):
            self._json(answer.status, _error(answer.error_type, answer.message), answer.headers)
            return
        serial = next(fake._ids)
        if not body.get("stream"):
            self._json(200, _message(answer, model, serial))
            return
        self.send_response(200)
        for name, value in {
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-cache",
            "Connection": "close",
            "request-id": f"req_fake_{serial:04d}",
        }.items():
            self.send_header(name, value)
        self.end_headers()
        for chunk in _events(answer, model, serial):
            self.wfile.write(chunk)
            self.wfile.flush()
        self.close_connection = True

    def _json(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        payload = json.dumps(body).encode()
        self._send(status, payload, {"Content-Type": "application/json", **(headers or {})})

    def _send(self, status: int, payload: bytes, headers: Mapping[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("request-id", f"req_fake_{int(time.time() * 1000)}")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)
        self.close_connection = True


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}
