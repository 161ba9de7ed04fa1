"""What each agent CLI printed, read: its answer, tokens, cost, tool calls, from claude's and
codex's JSON, aider's text, gemini's and opencode's JSON. Formats are the tools' documented
machine-readable outputs; anything unexpected is kept as text, never an error."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from ralph.actors.base import ToolCall
from ralph.actors.tracing import load_json
from ralph.glyphs import plural


@dataclass
class AgentOutput:
    """What a parser reads from a tool's output; None where the tool does not say."""

    text: str = ""
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    error: str | None = None
    notes: list[str] = field(default_factory=list)  # values ralph ignored, and why
    unreachable: str | None = None  # the CLI's own words: it could not reach its model

    def add_tokens(
        self, tokens_in: Any, tokens_out: Any, *, names: tuple[str, str] = ("", "")
    ) -> None:
        self.tokens_in = self._plus(self.tokens_in, tokens_in, names[0] or "input tokens")
        self.tokens_out = self._plus(self.tokens_out, tokens_out, names[1] or "output tokens")

    def _plus(self, total: int | None, value: Any, name: str) -> int | None:
        count = self.usage_count(value, name)
        return total if count is None else (total or 0) + count

    def usage_count(self, value: Any, name: str) -> int | None:
        """A token count: only a finite, non-negative integer; anything else is noted."""
        if value is None:
            return None
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        self.notes.append(f"ignored {name} {_shown(value)}: not a non-negative whole number")
        return None

    def usage_cost(self, value: Any, name: str = "cost") -> float | None:
        """A cost in USD: only a finite, non-negative number; anything else is noted."""
        if value is None:
            return None
        if _number(value) and math.isfinite(value) and value >= 0:
            return float(value)
        self.notes.append(f"ignored {name} {_shown(value)}: not a finite amount >= 0")
        return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _events(stdout: str) -> Iterator[dict[str, Any]]:
    """The JSON objects a tool printed: one JSON document, or one object per line (JSONL)."""
    document = load_json(stdout)
    if document is not None:
        items = document if isinstance(document, list) else [document]
        yield from (item for item in items if isinstance(item, dict))
        return
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        value = load_json(line)
        if isinstance(value, dict):
            yield value


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _message(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    value = _dict(value)
    data = _dict(value.get("data"))
    for candidate in (value.get("message"), data.get("message"), value.get("name")):
        if isinstance(candidate, str) and candidate:
            return candidate
    return None


DETAIL_KEYS = (
    "file_path",
    "filePath",
    "absolute_path",
    "notebook_path",
    "path",
    "command",
    "pattern",
    "url",
    "query",
    "description",
)


def _detail(args: Any) -> str | None:
    """The most telling argument of a tool call: the file, the command, the pattern."""
    args = _dict(args)
    for key in DETAIL_KEYS:
        value = args.get(key)
        if isinstance(value, list) and value:
            value = " ".join(str(v) for v in value)
        if isinstance(value, str) and value:
            return value[:200]
    return None


# claude's `api_retry` event names a failed model request by these words (2.1.197's bundle);
# `unknown` with no HTTP status is a request that never got an answer (no connection)
CLAUDE_RETRY_WORDS = {
    "unknown": "no answer from the model API",
    "authentication_failed": "the model API refused the credentials",
    "server_error": "the model API failed",
    "overloaded": "the model API is overloaded",
    "rate_limit": "the model API's rate limit",
}


def _claude_retry(event: dict[str, Any]) -> str:
    """A `system`/`api_retry` event in words: `retry 7 of 10: no answer from the model API`."""
    words = CLAUDE_RETRY_WORDS.get(str(event.get("error")), str(event.get("error") or "?"))
    status = event.get("error_status")
    shown = f"{words} (HTTP {status})" if isinstance(status, int) else words
    return f"retry {event.get('attempt')} of {event.get('max_retries')}: {shown}"


def _claude_system(event: dict[str, Any], out: AgentOutput) -> str | None:
    """The init event's memory server when it was not connected (a note); a retry's words."""
    if event.get("subtype") == "api_retry" and event.get("error") != "rate_limit":
        return _claude_retry(event)  # a limit is not a model out of reach
    if event.get("subtype") == "init":
        for server in event.get("mcp_servers") or []:
            server = _dict(server)
            if server.get("name") == "ralph" and server.get("status") != "connected":
                status = server.get("status")
                out.notes.append(f"the memory server was {status} when the attempt began")
    return None


def parse_claude(stdout: str) -> AgentOutput:
    """`claude -p --output-format stream-json|json`: assistant tool_use blocks, a result event.
    Retries of a model request that never succeeded name a model it could not reach: with the
    result's own line when it gave up, else (stopped while retrying) the last retry's words."""
    out = AgentOutput()
    last_text = ""
    retrying: str | None = None  # the last retry not followed by an answer
    for event in _events(stdout):
        kind = event.get("type")
        if kind == "system":
            retrying = _claude_system(event, out) or retrying
        elif kind == "assistant" and _dict(event.get("message")).get("model") != "<synthetic>":
            retrying = None
        if kind == "assistant":
            content = _dict(event.get("message")).get("content")
            for block in content if isinstance(content, list) else []:
                block = _dict(block)
                if block.get("type") == "tool_use":
                    name = str(block.get("name") or "tool")
                    out.tool_calls.append(ToolCall(name, _detail(block.get("input"))))
                elif block.get("type") == "text" and isinstance(block.get("text"), str):
                    last_text = block["text"]
        elif kind == "result":
            if isinstance(event.get("result"), str):
                out.text = event["result"]
            usage = _dict(event.get("usage"))
            for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
                out.add_tokens(usage.get(key), None, names=(key, ""))
            out.add_tokens(None, usage.get("output_tokens"), names=("", "output_tokens"))
            cost = out.usage_cost(event.get("total_cost_usd", event.get("cost_usd")))
            out.cost_usd = cost if cost is not None else out.cost_usd
            if event.get("is_error"):
                out.error = out.text or str(event.get("subtype") or "error")
                if retrying is not None:
                    out.unreachable = out.error
    if retrying is not None and out.unreachable is None and out.error is None:
        out.unreachable = out.error = f"stopped while retrying ({retrying})"
    out.text = out.text or last_text
    return out


def parse_codex(stdout: str) -> AgentOutput:
    """`codex exec --json`: item.completed events, usage on turn.completed, no cost.

    A model codex cannot reach shows as `error` events "Reconnecting... 2/5 (...)", then (0.171.0)
    "Reconnecting... waiting for network (...)" for as long as it is let run: the last of them
    not followed by any answer of the model names it, with a turn.failed's line when it gave up.
    """
    out = AgentOutput()
    retrying: str | None = None  # the last reconnection not followed by an answer
    for event in _events(stdout):
        kind = event.get("type")
        if kind == "turn.completed":
            usage = _dict(event.get("usage"))
            out.add_tokens(usage.get("input_tokens"), usage.get("output_tokens"))
        elif kind == "item.completed":
            _codex_item(_dict(event.get("item")), out)
        elif kind == "turn.failed":
            out.error = _message(event.get("error")) or "turn failed"
        elif kind == "error":
            out.error = _message(event) or "error"
        if kind == "error" and (out.error or "").startswith(CODEX_RECONNECTING):
            retrying = out.error
        elif kind in ("item.started", "item.completed", "turn.completed") and not _codex_notice(
            event
        ):
            retrying = None
    if retrying is not None:
        out.unreachable = out.error if out.error != retrying else f"stopped while {retrying}"
    return out


CODEX_RECONNECTING = "Reconnecting..."


def _codex_notice(event: dict[str, Any]) -> bool:
    """An item codex adds on its own (a warning, its fallback from WebSockets): no answer."""
    return _dict(event.get("item")).get("type") == "error"


def _codex_item(item: dict[str, Any], out: AgentOutput) -> None:
    kind = item.get("type")
    if kind == "agent_message" and isinstance(item.get("text"), str):
        out.text = item["text"]
    elif kind == "command_execution":
        out.tool_calls.append(ToolCall("command", _detail(item)))
    elif kind == "file_change":
        changes = item.get("changes")
        paths = [f"{_dict(c).get('kind')} {_dict(c).get('path')}" for c in changes or []]
        out.tool_calls.append(ToolCall("file_change", ", ".join(paths) or None))
    elif kind == "mcp_tool_call":
        out.tool_calls.append(ToolCall(f"mcp:{item.get('server')}/{item.get('tool')}"))
    elif kind == "web_search":
        out.tool_calls.append(ToolCall("web_search", _detail(item)))


TOKENS_LINE = re.compile(
    r"^Tokens: (?P<sent>[\d.,]+[kKmM]?) sent,.*? (?P<received>[\d.,]+[kKmM]?) received\."
    r"(?:.*?\$(?P<session>[\d.]+) session\.)?"
)
APPLIED_LINE = re.compile(r"^Applied edit to (?P<path>.+?)\s*$")
AIDER_NOISE = re.compile(
    r"^(Aider v|Main model:|Weak model:|Editor model:|Model:|Git repo:|Repo-map:|Use /help|"
    r"Added .* to the chat|Tokens:|Cost:|https://aider\.chat|Applied edit to|Commit |"
    r"Newer aider version|Run pip install|Scanning repo|Initial repo scan|Cur working dir:|"
    r"Git working dir:|Note: in-chat filenames)"
)


def parse_aider(stdout: str) -> AgentOutput:
    """aider has no JSON mode: read its `Tokens: … sent, … received. Cost: …` report lines."""
    out = AgentOutput()
    kept: list[str] = []
    for raw in stdout.splitlines():
        line = raw.strip()
        tokens = TOKENS_LINE.match(line)
        if tokens:
            out.add_tokens(_count(tokens["sent"]), _count(tokens["received"]))
            if tokens["session"]:  # the whole run is one aider session
                out.cost_usd = out.usage_cost(_float(tokens["session"]), "session cost")
        applied = APPLIED_LINE.match(line)
        if applied:
            out.tool_calls.append(ToolCall("edit", applied["path"]))
        if not AIDER_NOISE.match(line):
            kept.append(raw)
    out.text = "\n".join(kept).strip()
    return out


def _count(text: str) -> int | str:
    """aider's token counts: `1,234`, `2.3k`, `1.2M` (the text itself when it is none)."""
    number = text.replace(",", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(number[-1:].lower(), 1)
    value = _float(number.rstrip("kKmM"))
    return round(value * scale) if isinstance(value, float) else text


def _float(text: str) -> float | str:
    try:
        return float(text)
    except ValueError:
        return text


def parse_gemini(stdout: str) -> AgentOutput:
    """`gemini --output-format stream-json` events (or the single `json` object)."""
    out = AgentOutput()
    text, new_message = "", True
    for event in _events(stdout):
        kind = event.get("type")
        if kind == "message" and event.get("role") == "assistant":
            content = event.get("content")
            if isinstance(content, str):
                text += ("\n" if text and new_message else "") + content
                new_message = not event.get("delta")
        elif kind == "tool_use":
            name = str(event.get("tool_name") or "tool")
            out.tool_calls.append(ToolCall(name, _detail(event.get("parameters"))))
            new_message = True
        elif kind == "result":
            stats = _dict(event.get("stats"))
            out.add_tokens(stats.get("input_tokens"), stats.get("output_tokens"))
            if event.get("status") == "error":
                out.error = _message(event.get("error")) or "error"
        elif kind == "error" and event.get("severity") == "error":
            out.error = _message(event)
        elif kind is None:
            text = _gemini_json(event, out) or text
    out.text = text
    return out


def _gemini_json(document: dict[str, Any], out: AgentOutput) -> str:
    stats = _dict(document.get("stats"))
    for model in _dict(stats.get("models")).values():
        tokens = _dict(_dict(model).get("tokens"))
        out.add_tokens(tokens.get("prompt"), tokens.get("candidates"))
    for name, info in _dict(_dict(stats.get("tools")).get("byName")).items():
        count = _dict(info).get("count")
        calls = plural(count, "call") if isinstance(count, int) else "? calls"
        out.tool_calls.append(ToolCall(str(name), calls))
    if document.get("error"):
        out.error = _message(document.get("error")) or "error"
    response = document.get("response")
    return response if isinstance(response, str) else ""


def parse_opencode(stdout: str) -> AgentOutput:
    """`opencode run --format json`: text, tool_use and step_finish (tokens, cost) events."""
    out = AgentOutput()
    texts: list[str] = []
    cost = 0.0
    for event in _events(stdout):
        kind = event.get("type")
        part = _dict(event.get("part"))
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"].strip())
        elif kind == "tool_use":
            state = _dict(part.get("state"))
            detail = _detail(state.get("input")) or state.get("title")
            name = str(part.get("tool") or "tool")
            out.tool_calls.append(ToolCall(name, detail if isinstance(detail, str) else None))
        elif kind == "step_finish":
            tokens = _dict(part.get("tokens"))
            cache = _dict(tokens.get("cache"))
            out.add_tokens(tokens.get("input"), tokens.get("output"))
            out.add_tokens(cache.get("read"), tokens.get("reasoning"))
            out.add_tokens(cache.get("write"), None)
            cost += out.usage_cost(part.get("cost")) or 0.0
        elif kind == "error":
            out.error = _message(event.get("error")) or "error"
    out.text = "\n\n".join(t for t in texts if t)
    out.cost_usd = cost or None  # opencode prints 0 for models it has no price for: unknown
    return out
