"""A loopback fake of the OpenAI Responses API as the released Codex CLI calls it.

`codex` 0.171.0 reads its endpoint from its own configuration (`openai_base_url`, or a
`model_providers.<id>.base_url` chosen by `model_provider`), not from OPENAI_BASE_URL. Pointed
here with a fake OPENAI_API_KEY, it first asks for a WebSocket (`GET /v1/responses` with
`Upgrade: websocket`): the fake answers 426 Upgrade Required, on which codex falls back to HTTP
at once (404 or 501 would cost five retries). Every model call then arrives as
`POST /v1/responses` with `stream: true` and is answered with the real server-sent event
sequence: `response.created`, `response.in_progress`, per output item
`response.output_item.added`, (`response.output_text.delta` ... for a message),
`response.output_item.done`, and `response.completed` with `usage`.

    with FakeResponses() as api:
        api.script(
            Turn(Shell("pytest -q")),                     # a function_call exec_command
            Turn(Patch("*** Begin Patch\\n...")),          # apply_patch, in the shape offered
            Turn(Say("Fixed.")),                           # a message: the turn ends
        )
        env = {**api.environ(), ...}; args = api.config_args()   # run codex
        assert api.agent_requests[1].function_outputs     # what codex sent back

Codex offers its tools in the request's `tools` list (function tools such as `exec_command`,
namespaces of them, `custom` freeform tools); with an unknown model `apply_patch` is not a tool
but a command codex intercepts, so `Patch` becomes whichever of the three the request allows.
A `Limit` is answered as OpenAI answers a plan's usage limit: 429 with
`{"error": {"type": "usage_limit_reached", "resets_at": ..., "resets_in_seconds": ...}}`.
Any other path gets 404; every request is recorded.
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

FAKE_KEY = "sk-proj-fake-contract-key-000000000000000000000000"
MODEL = "gpt-5.1-codex"


@dataclass(frozen=True)
class Say:
    """An assistant message (`output_text`)."""

    text: str


@dataclass(frozen=True)
class Shell:
    """A shell command through codex's `exec_command` function tool."""

    cmd: str


@dataclass(frozen=True)
class Patch:
    """An edit in apply_patch's format (`*** Begin Patch` ... `*** End Patch`)."""

    patch: str


@dataclass(frozen=True)
class Call:
    """Any function tool by its name (an MCP tool: `mcp__ralph__recall`, ...)."""

    name: str
    arguments: dict[str, Any]


Item = Say | Shell | Patch | Call


@dataclass(frozen=True)
class Turn:
    """One model response: its output items in order. A turn with a call continues."""

    items: tuple[Item, ...]
    tokens_in: int = 100
    tokens_out: int = 20

    def __init__(self, *items: Item, tokens_in: int = 100, tokens_out: int = 20) -> None:
        object.__setattr__(self, "items", items)
        object.__setattr__(self, "tokens_in", tokens_in)
        object.__setattr__(self, "tokens_out", tokens_out)


@dataclass(frozen=True)
class Limit:
    """A request refused over a ChatGPT plan's usage limit, as OpenAI refuses it."""

    resets_in_seconds: int | None = 5 * 86400 + 22 * 3600  # None: no reset time given
    plan_type: str = "plus"
    message: str = "The usage limit has been reached"
    error_type: str = "usage_limit_reached"
    status: int = 429
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
    def input(self) -> list[dict[str, Any]]:
        return self._list("input")

    @property
    def tools(self) -> list[dict[str, Any]]:
        """Every tool offered, namespaces opened (`tools`, and an `additional_tools` item)."""
        found: list[dict[str, Any]] = []

        def walk(tools: list[Any], prefix: str) -> None:
            for tool in tools:
                if not isinstance(tool, dict):
                    continue
                if tool.get("type") == "namespace":
                    walk(tool.get("tools") or [], f"{prefix}{tool.get('name')}.")
                else:
                    found.append({**tool, "qualified": f"{prefix}{tool.get('name')}"})

        walk(self._list("tools"), "")
        for item in self.input:
            if item.get("type") == "additional_tools":
                walk(item.get("tools") or [], "")
        return found

    def namespace_of(self, flat: str) -> str | None:
        """The namespace that offers `flat` (`mcp__ralph__lessons_for`: `mcp__ralph`), if any."""
        for tool in self.tools:
            namespace, _, name = str(tool["qualified"]).rpartition(".")
            if namespace and flat == f"{namespace}__{name}":
                return namespace
        return None

    @property
    def flat_tool_names(self) -> list[str]:
        """Each tool as codex names its calls: an MCP tool `mcp__SERVER__TOOL`."""
        return [str(tool["qualified"]).replace(".", "__") for tool in self.tools]

    @property
    def tool_names(self) -> list[str]:
        return [str(tool.get("name")) for tool in self.tools]

    def tool(self, name: str) -> dict[str, Any] | None:
        return next((tool for tool in self.tools if tool.get("name") == name), None)

    def texts(self, role: str) -> list[str]:
        out = []
        for item in self.input:
            if item.get("type") == "message" and item.get("role") == role:
                for part in item.get("content") or []:
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        out.append(part["text"])
        return out

    @property
    def user_text(self) -> str:
        return "\n".join(self.texts("user"))

    @property
    def outputs(self) -> list[str]:
        """What codex sent back for each tool call, in order."""
        kinds = ("function_call_output", "custom_tool_call_output")
        out = []
        for item in self.input:
            if item.get("type") in kinds:
                value = item.get("output")
                out.append(value if isinstance(value, str) else json.dumps(value))
        return out

    @property
    def is_model_call(self) -> bool:
        return self.method == "POST" and self.path.endswith("/responses")


class FakeResponses:
    """The server (started on construction, on 127.0.0.1 and a free port) and its script."""

    def __init__(self, responder: Responder | None = None, *, model: str = MODEL) -> None:
        self.responder = responder
        self.model = model
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

    def __enter__(self) -> FakeResponses:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    @property
    def url(self) -> str:
        """The base URL, `/v1` included, as OPENAI_BASE_URL and `openai_base_url` take it."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def environ(self) -> dict[str, str]:
        return {"OPENAI_API_KEY": FAKE_KEY}

    def config_toml(self) -> str:
        """A `config.toml` for CODEX_HOME that points codex here."""
        return f'model = "{self.model}"\nopenai_base_url = "{self.url}"\n'

    def script(self, *answers: Answer) -> FakeResponses:
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
    def model_requests(self) -> list[Request]:
        return [r for r in self.requests if r.is_model_call]

    @property
    def paths(self) -> list[str]:
        return [f"{r.method} {r.path}" for r in self.requests]

    def attempts(self) -> list[list[Request]]:
        """Model calls grouped by codex session (one `codex exec` each)."""
        groups: dict[str, list[Request]] = {}
        for request in self.model_requests:
            groups.setdefault(request.headers.get("session-id", ""), []).append(request)
        return list(groups.values())

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
            return self._queue.popleft() if self._queue else Turn(Say("Done."))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeResponses

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet: codex drops idle keep-alive connections when it exits."""


def _sse(data: dict[str, Any]) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


def _items(turn: Turn, request: Request, serial: int) -> list[dict[str, Any]]:
    """The turn's output items, each tool call in the shape the request offered."""
    out: list[dict[str, Any]] = []
    for index, item in enumerate(turn.items):
        ids = f"{serial:04d}_{index}"
        if isinstance(item, Say):
            content = [{"type": "output_text", "text": item.text, "annotations": []}]
            out.append(
                {"type": "message", "id": f"msg_{ids}", "role": "assistant",
                 "status": "completed", "content": content}
            )  # fmt: skip
            continue
        if isinstance(item, Patch):
            tool = request.tool("apply_patch")
            if tool is not None and tool.get("type") == "custom":
                out.append(
                    {"type": "custom_tool_call", "id": f"ctc_{ids}", "call_id": f"call_{ids}",
                     "name": "apply_patch", "input": item.patch, "status": "completed"}
                )  # fmt: skip
                continue
            if tool is not None:
                name, arguments = "apply_patch", {"input": item.patch}
            else:  # no apply_patch tool: codex intercepts the command
                name, arguments = "exec_command", {"cmd": f"apply_patch <<'EOF'\n{item.patch}EOF"}
        elif isinstance(item, Shell):
            name, arguments = "exec_command", {"cmd": item.cmd}
        else:
            name, arguments = item.name, item.arguments
        call = {"type": "function_call", "id": f"fc_{ids}", "call_id": f"call_{ids}", "name": name,
                "arguments": json.dumps(arguments), "status": "completed"}  # fmt: skip
        namespace = request.namespace_of(name)
        if namespace is not None:  # `mcp__ralph__lessons_for` offered as lessons_for in mcp__ralph
            call.update(namespace=namespace, name=name[len(namespace) + 2 :])
        out.append(call)
    return out


def _events(turn: Turn, request: Request, model: str, serial: int) -> Iterator[bytes]:
    """The stream of one response, event by event, as the Responses API sends it."""
    response: dict[str, Any] = {
        "id": f"resp_fake_{serial:04d}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "in_progress",
        "model": model,
        "output": [],
    }
    sequence = itertools.count()
    yield _sse(
        {"type": "response.created", "response": response, "sequence_number": next(sequence)}
    )
    yield _sse(
        {"type": "response.in_progress", "response": response, "sequence_number": next(sequence)}
    )
    items = _items(turn, request, serial)
    for index, item in enumerate(items):
        start = {**item, "status": "in_progress"}
        if item["type"] == "message":
            start["content"] = []
        elif item["type"] == "function_call":
            start["arguments"] = ""
        elif item["type"] == "custom_tool_call":
            start["input"] = ""
        yield _sse(
            {"type": "response.output_item.added", "output_index": index, "item": start,
             "sequence_number": next(sequence)}
        )  # fmt: skip
        if item["type"] == "message":
            text = item["content"][0]["text"]
            half = len(text) // 2
            for part in (text[:half], text[half:]):
                if part:
                    yield _sse(
                        {"type": "response.output_text.delta", "item_id": item["id"],
                         "output_index": index, "content_index": 0, "delta": part,
                         "sequence_number": next(sequence)}
                    )  # fmt: skip
        elif item["type"] == "function_call":
            yield _sse(
                {"type": "response.function_call_arguments.delta", "item_id": item["id"],
                 "output_index": index, "delta": item["arguments"],
                 "sequence_number": next(sequence)}
            )  # fmt: skip
        yield _sse(
            {"type": "response.output_item.done", "output_index": index, "item": item,
             "sequence_number": next(sequence)}
        )  # fmt: skip
    usage = {
        "input_tokens": turn.tokens_in,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": turn.tokens_out,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": turn.tokens_in + turn.tokens_out,
    }
    done = {**response, "status": "completed", "output": items, "usage": usage}
    yield _sse({"type": "response.completed", "response": done, "sequence_number": next(sequence)})


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
        request = self._read("GET")
        if request.headers.get("upgrade", "").lower() == "websocket":
            # no WebSocket here: 426 makes codex fall back to HTTP streaming at once
            self._json(426, _error("upgrade_required", "WebSocket is not supported here"))
            return
        if request.path.endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": self.server.fake.model,
                                                         "object": "model"}]})  # fmt: skip
            return
        self._json(404, _error("not_found", "Not found"))

    def do_POST(self) -> None:
        request = self._read("POST")
        fake = self.server.fake
        if not request.is_model_call:
            self._json(404, _error("not_found", "Not found"))
            return
        answer = fake._answer(request)
        if isinstance(answer, Limit):
            error: dict[str, Any] = {
                "type": answer.error_type,
                "message": answer.message,
                "plan_type": answer.plan_type,
            }
            if answer.resets_in_seconds is not None:
                error["resets_at"] = int(time.time()) + answer.resets_in_seconds
                error["resets_in_seconds"] = answer.resets_in_seconds
            self._json(answer.status, {"error": error}, answer.headers)
            return
        serial = next(fake._ids)
        body = request.body if isinstance(request.body, dict) else {}
        model = str(body.get("model") or fake.model)
        self.send_response(200)
        for name, value in {
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-cache",
            "Connection": "close",
            "x-request-id": f"req_fake_{serial:04d}",
        }.items():
            self.send_header(name, value)
        self.end_headers()
        try:
            for chunk in _events(answer, request, model, serial):
                self.wfile.write(chunk)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def _json(
        self, status: int, data: dict[str, Any], headers: Mapping[str, str] | None = None
    ) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"error": {"type": kind, "message": message, "param": None, "code": None}}
