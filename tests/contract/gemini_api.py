"""A loopback fake of the Gemini API (`generativelanguage.googleapis.com`, v1beta) as the
released Gemini CLI calls it with an API key and `GOOGLE_GEMINI_BASE_URL`.

What the CLI (0.61.0) sends, seen with this server: before each turn a `generateContent` to a
flash-lite model asking for a routing score (`responseJsonSchema` with `complexity_score`), then
the agent's turn as `streamGenerateContent?alt=sse` carrying its tools as `functionDeclarations`
(`read_file`, `replace`, `write_file`, `glob`, `grep_search`, ... and an MCP server's tools);
after a tool call the next turn carries the `functionResponse`. Side questions (next speaker,
loop checks) are `generateContent` calls with a JSON schema too. Every request is recorded::

    with GeminiAPI() as api:
        api.script(Turn([call("replace", file_path=..., old_string=..., new_string=...,
                                   instruction="fix")]), Turn([text("Done.")]))
        env = api.environ()   # GOOGLE_GEMINI_BASE_URL, GEMINI_API_KEY
        ...
        assert api.turns[0].tool_names  # what the agent's first model request offered

Paths answered:
    POST /v1beta/models/{model}:streamGenerateContent   the next scripted turn, as SSE events
    POST /v1beta/models/{model}:generateContent          a JSON object fitting the schema asked
    POST /v1beta/models/{model}:countTokens              {"totalTokens": ...}
    anything else                                        404 in Google's error shape
A turn comes from the queue (`script`), else from `responder(request)`, else "Done.".
A `Turn` with `status` other than 200 answers that status with `error` as the body: see
`daily_quota_exhausted` for what Google sends when a daily quota is spent.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAKE_KEY = "fake-gemini-api-key-0000000000000000"


@dataclass(frozen=True)
class Request:
    """One request as the server saw it; header names lower-case."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def model(self) -> str:
        tail = self.path.split("/models/", 1)[-1]
        return tail.split(":", 1)[0]

    @property
    def kind(self) -> str:
        """stream (an agent turn), generate (a side question), count, or other."""
        verb = self.path.split("?", 1)[0].rsplit(":", 1)[-1]
        names = {"streamGenerateContent": "stream", "generateContent": "generate"}
        return names.get(verb, "count" if verb == "countTokens" else "other")

    @property
    def contents(self) -> list[dict[str, Any]]:
        found = self.body.get("contents") if isinstance(self.body, dict) else None
        return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []

    @property
    def tool_names(self) -> list[str]:
        tools = self.body.get("tools") if isinstance(self.body, dict) else None
        return [
            str(declaration.get("name"))
            for tool in tools or []
            for declaration in tool.get("functionDeclarations") or []
        ]

    def tool(self, name: str) -> dict[str, Any]:
        """The declaration of tool `name` this request offered."""
        tools = self.body.get("tools") if isinstance(self.body, dict) else None
        for tool in tools or []:
            for declaration in tool.get("functionDeclarations") or []:
                if declaration.get("name") == name:
                    return dict(declaration)
        raise KeyError(name)

    @property
    def text(self) -> str:
        """Every text part of the conversation and the system instruction, joined."""
        texts = []
        system = self.body.get("systemInstruction") if isinstance(self.body, dict) else None
        for content in [*([system] if isinstance(system, dict) else []), *self.contents]:
            texts += [str(p["text"]) for p in content.get("parts") or [] if "text" in p]
        return "\n".join(texts)

    @property
    def function_responses(self) -> list[dict[str, Any]]:
        """The tool results the last user content carries (a turn that follows tool calls)."""
        last = self.contents[-1] if self.contents else {}
        return [p["functionResponse"] for p in last.get("parts") or [] if "functionResponse" in p]


@dataclass
class Turn:
    """One answer to an agent turn: parts streamed one SSE event each, usage on the last."""

    parts: list[dict[str, Any]] = field(default_factory=list)
    tokens_in: int = 1200
    tokens_out: int = 40
    status: int = 200
    error: dict[str, Any] | None = None  # the body of an error status


def text(words: str) -> dict[str, Any]:
    return {"text": words}


def call(name: str, **args: Any) -> dict[str, Any]:
    """A functionCall part: the model asks the CLI to run its tool `name`."""
    return {"functionCall": {"name": name, "args": args}}


def daily_quota_exhausted(model: str = "gemini-2.5-pro") -> Turn:
    """What the Gemini API answers when the free tier's requests per day are spent: 429
    RESOURCE_EXHAUSTED with a QuotaFailure naming a per-day quota (the CLI's classifier reads
    `quotaId` and says "You have exhausted your daily quota on this model."). The message's own
    "Please retry in" is the per-minute window's, not the day's: that is how Google sends it."""
    message = (
        "You exceeded your current quota, please check your plan and billing details. For more "
        "information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. "
        "To monitor your current usage, head to: https://ai.dev/rate-limit. \n* Quota exceeded "
        "for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, "
        f"limit: 50, model: {model}\nPlease retry in 27.888016836s."
    )
    violation = {
        "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
        "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
        "quotaDimensions": {"location": "global", "model": model},
        "quotaValue": "50",
    }
    details = [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [violation]},
        {
            "@type": "type.googleapis.com/google.rpc.Help",
            "links": [
                {
                    "description": "Learn more about Gemini API quotas",
                    "url": "https://ai.google.dev/gemini-api/docs/rate-limits",
                }
            ],
        },
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "27s"},
    ]
    body = {
        "error": {
            "code": 429,
            "message": message,
            "status": "RESOURCE_EXHAUSTED",
            "details": details,
        }
    }
    return Turn(status=429, error=body)


def filler(schema: Any) -> Any:
    """A value fitting a (Gemini-flavoured, upper-case types) JSON schema: the CLI's side
    questions get a plain, harmless answer (the user speaks next, a simple task, no loop)."""
    if not isinstance(schema, dict):
        return None
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: _named(name, sub) for name, sub in props.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 10
    if kind == "boolean":
        return False
    return "fake"


def _named(name: str, schema: Any) -> Any:
    known = {"next_speaker": "user", "model_choice": "flash", "complexity_score": 10}
    return known[name] if name in known else filler(schema)


class GeminiAPI:
    """The fake server: a thread on 127.0.0.1, a queue of agent turns, every request kept."""

    def __init__(self, responder: Callable[[Request], Turn] | None = None) -> None:
        self.responder = responder
        self.requests: list[Request] = []
        self._queue: deque[Turn] = deque()
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.api = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> GeminiAPI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def environ(self) -> dict[str, str]:
        return {"GOOGLE_GEMINI_BASE_URL": self.url, "GEMINI_API_KEY": FAKE_KEY}

    def script(self, *turns: Turn) -> None:
        with self._lock:
            self._queue.extend(turns)

    @property
    def turns(self) -> list[Request]:
        """The agent's model requests (streamGenerateContent), in order."""
        with self._lock:
            return [r for r in self.requests if r.kind == "stream"]

    def paths(self) -> list[str]:
        with self._lock:
            return [f"{r.method} {r.path}" for r in self.requests]

    def _record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def _next_turn(self, request: Request) -> Turn:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            return self.responder(request)
        return Turn([text("Done.")])


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    api: GeminiAPI


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read `requests`."""

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")

    def _answer(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        request = Request(method, self.path, headers, body)
        api = self.server.api
        api._record(request)
        if request.kind == "stream":
            self._stream(api._next_turn(request), request.model)
        elif request.kind == "generate":
            config = body.get("generationConfig", {}) if isinstance(body, dict) else {}
            schema = config.get("responseJsonSchema") or config.get("responseSchema")
            answer = json.dumps(filler(schema)) if schema else "fake"
            self._json(200, _chunk([text(answer)], request.model, 200, 10, finished=True))
        elif request.kind == "count":
            self._json(200, {"totalTokens": 1200})
        else:
            error = {"code": 404, "message": f"no such path: {self.path}", "status": "NOT_FOUND"}
            self._json(404, {"error": error})

    def _stream(self, turn: Turn, model: str) -> None:
        if turn.status != 200:
            self._json(turn.status, turn.error or {})
            return
        parts = turn.parts or [text("")]
        events = [
            _chunk([part], model, turn.tokens_in, turn.tokens_out, finished=i == len(parts) - 1)
            for i, part in enumerate(parts)
        ]
        data = b"".join(b"data: " + json.dumps(e).encode() + b"\r\n\r\n" for e in events)
        self._send(200, data, "text/event-stream")

    def _json(self, status: int, body: Any) -> None:
        self._send(status, json.dumps(body).encode(), "application/json; charset=UTF-8")

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _chunk(
    parts: list[dict[str, Any]], model: str, tokens_in: int, tokens_out: int, *, finished: bool
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finished:
        candidate["finishReason"] = "STOP"
    usage = {
        "promptTokenCount": tokens_in,
        "candidatesTokenCount": tokens_out,
        "totalTokenCount": tokens_in + tokens_out,
    }
    return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model}
