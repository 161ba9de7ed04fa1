"""Tracing an attempt: the trajectory built from an agent CLI's JSON event stream (claude
stream-json, codex exec --json, gemini stream-json, opencode run --format json) or, for other
actors, from their answer and applied edits; then stored with its summary (`store_attempt`).
The model, the file format and the views are in `trace`."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ralph.actors.base import ActorResult
from ralph.actors.tail import last_lines
from ralph.actors.trace import (
    BRACKET,
    HEAD_STEPS,
    INPUT_CHARS,
    MAX_EVENTS,
    MAX_JSON_CHARS,
    MAX_JSON_DEPTH,
    OBSERVATION_CHARS,
    STRING,
    TAIL_STEPS,
    TARGET_CHARS,
    THOUGHT_CHARS,
    Step,
    Trajectory,
    as_dict,
    compact,
    paths_of,
    summarize,
    tool_kind,
    trim,
    unwrap_command,
    write,
)
from ralph.records import TraceSummary


class _Builder:
    """Collects steps in order: text waits for the next action and becomes its thought."""

    def __init__(self, source: str) -> None:
        self.trajectory = Trajectory(source)
        self.pending: list[str] = []
        self.open: dict[str, Step] = {}

    def think(self, text: Any) -> None:
        if isinstance(text, str) and text.strip():
            self.pending.append(text.strip())

    def act(
        self,
        tool: str,
        args: Any,
        *,
        call_id: str | None = None,
        ts: str | None = None,
        target: str | None = None,
        files: Sequence[str] = (),
    ) -> Step:
        args = args if isinstance(args, dict) else {}
        kind = tool_kind(tool)
        command = args.get("command")
        if isinstance(command, list):
            command = " ".join(str(c) for c in command)
        paths = list(files) or paths_of(args)
        if target is None:
            if kind == "command" and isinstance(command, str):
                target = unwrap_command(command)
            elif paths:
                target = ", ".join(paths)
            else:
                for key in ("pattern", "query", "url", "description"):
                    if isinstance(args.get(key), str):
                        target = args[key]
                        break
        step = Step(
            thought=trim("\n".join(self.pending), THOUGHT_CHARS),
            tool=tool,
            kind=kind,
            target=trim(target, TARGET_CHARS),
            input=trim(args, INPUT_CHARS) if args else None,
            files=[p for p in (trim(p, TARGET_CHARS) for p in paths) if p],
            ts=ts,
            call_id=call_id,
        )
        self.pending = []
        self.trajectory.steps.append(step)
        if call_id:
            self.open[call_id] = step
        return step

    def observe(self, call_id: Any, output: Any, *, ok: bool | None = None) -> None:
        step = self.open.pop(str(call_id), None) if call_id is not None else None
        if step is None:
            return
        step.observation = trim(_text_of(output), OBSERVATION_CHARS)
        step.ok = ok

    def tokens(self, step: Step | None, tokens_in: Any, tokens_out: Any) -> None:
        if step is None:
            return
        if _count(tokens_in) is not None:
            step.tokens_in = (step.tokens_in or 0) + int(tokens_in)
        if _count(tokens_out) is not None:
            step.tokens_out = (step.tokens_out or 0) + int(tokens_out)

    def finish(self) -> Trajectory:
        if self.pending:
            self.trajectory.steps.append(Step(thought=trim("\n".join(self.pending), 2000)))
            self.pending = []
        return bounded(self.trajectory)


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    if value < 0 or value == float("inf"):
        return None
    return int(value)


def _text_of(output: Any) -> Any:
    """Tool results come as a string or a list of content blocks ({type: text, text})."""
    if isinstance(output, list):
        parts = [as_dict(b).get("text") for b in output]
        return "\n".join(p for p in parts if isinstance(p, str)) or output
    return output


def bounded(trajectory: Trajectory) -> Trajectory:
    steps = trajectory.steps
    if len(steps) > HEAD_STEPS + TAIL_STEPS:
        trajectory.dropped += len(steps) - HEAD_STEPS - TAIL_STEPS
        trajectory.steps = steps[:HEAD_STEPS] + steps[-TAIL_STEPS:]
    return trajectory


def load_json(text: str) -> Any:
    """`json.loads` for untrusted output: None instead of an error when `text` is not JSON, is
    too large, or nests deeper than MAX_JSON_DEPTH (200,000 `[` would blow Python's stack)."""
    if len(text) > MAX_JSON_CHARS:
        return None
    depth = deepest = 0
    for bracket in BRACKET.findall(STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
        if deepest > MAX_JSON_DEPTH:
            return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _document(stdout: str) -> list[dict[str, Any]] | None:
    """The events of output that is one JSON document (an object, or a list of events)."""
    if not stdout.lstrip().startswith(("[", "{")):
        return None
    document = load_json(stdout)
    if document is None:
        return None
    items = document if isinstance(document, list) else [document]
    return [item for item in items if isinstance(item, dict)]


def _iso(value: Any) -> str | None:
    """An event's time: ISO text as given, or epoch milliseconds (opencode)."""
    if isinstance(value, str) and value:
        return value[:40]
    count = _count(value)
    if count is None:
        return None
    try:
        return datetime.fromtimestamp(count / 1000, UTC).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):
        return None


# the streams --------------------------------------------------------------------------------
def _claude(events: Iterable[dict[str, Any]], b: _Builder) -> None:
    """assistant messages: text, thinking and tool_use blocks; user messages: tool_result.
    claude (2.1.197) prints one assistant event per content block, each with the message's
    usage as it stood at `message_start`: its input counted once per message, its output left
    out (the start's count, 1, not the message's; the result event has the true totals)."""
    counted: set[str] = set()
    for event in events:
        kind = event.get("type")
        message = as_dict(event.get("message"))
        content = message.get("content")
        blocks = [as_dict(c) for c in content] if isinstance(content, list) else []
        if kind == "assistant":
            first: Step | None = None
            for block in blocks:
                if block.get("type") in ("text", "thinking"):
                    b.think(block.get("text") or block.get("thinking"))
                elif block.get("type") == "tool_use":
                    step = b.act(
                        str(block.get("name") or "tool"),
                        block.get("input"),
                        call_id=str(block.get("id") or "") or None,
                    )
                    first = first or step
            usage = as_dict(message.get("usage"))
            key = str(message.get("id") or id(event))
            if first is not None and key not in counted:
                counted.add(key)
                b.tokens(first, usage.get("input_tokens"), None)
        elif kind == "user":
            for block in blocks:
                if block.get("type") == "tool_result":
                    ok = not block.get("is_error")
                    b.observe(block.get("tool_use_id"), block.get("content"), ok=ok)
        elif kind == "result" and not b.trajectory.steps and not b.pending:
            b.think(event.get("result"))


def _codex(events: Iterable[dict[str, Any]], b: _Builder) -> None:
    """item.completed events: reasoning, agent_message, command_execution, file_change, mcp."""
    for event in events:
        if event.get("type") != "item.completed":
            continue
        item = as_dict(event.get("item"))
        kind = item.get("type")
        if kind in ("reasoning", "agent_message"):
            b.think(item.get("text"))
        elif kind == "command_execution":
            command = item.get("command")
            step = b.act("command", {"command": command}, call_id=str(item.get("id")))
            code = item.get("exit_code")
            ok = None if code is None else code == 0 and item.get("status") != "failed"
            b.observe(item.get("id"), item.get("aggregated_output"), ok=ok)
            if code not in (None, 0):
                step.observation = trim(
                    f"exit {code}\n{step.observation or ''}".strip(), OBSERVATION_CHARS
                )
        elif kind == "file_change":
            changes = [as_dict(c) for c in item.get("changes") or []]
            paths = [str(c.get("path")) for c in changes if c.get("path")]
            target = ", ".join(f"{c.get('kind')} {c.get('path')}" for c in changes)
            step = b.act("file_change", {"changes": changes}, target=target, files=paths)
            step.ok = item.get("status") != "failed"
        elif kind == "mcp_tool_call":
            name = f"mcp:{item.get('server')}/{item.get('tool')}"
            b.act(name, item.get("arguments"), call_id=str(item.get("id")))
            error = as_dict(item.get("error")).get("message")
            result = as_dict(item.get("result")).get("content")
            # 0.171.0: a tool's own error is `status: failed` with the text as its result
            ok = not error and item.get("status") != "failed"
            b.observe(item.get("id"), error or result, ok=ok)
        elif kind == "web_search":
            b.act("web_search", {"query": item.get("query")})


def _gemini(events: Iterable[dict[str, Any]], b: _Builder) -> None:
    """message (assistant, maybe delta), tool_use and tool_result events, each with a time."""
    text = ""
    for event in events:
        kind = event.get("type")
        if kind == "message" and event.get("role") == "assistant":
            content = event.get("content")
            if isinstance(content, str):
                text += content if event.get("delta") else ("\n" if text else "") + content
        elif kind == "tool_use":
            b.think(text)
            text = ""
            b.act(
                str(event.get("tool_name") or "tool"),
                event.get("parameters"),
                call_id=str(event.get("tool_id") or "") or None,
                ts=_iso(event.get("timestamp")),
            )
        elif kind == "tool_result":
            error = as_dict(event.get("error")).get("message")
            ok = event.get("status") != "error"
            b.observe(event.get("tool_id"), error or event.get("output"), ok=ok)
        elif kind is None and isinstance(event.get("response"), str):
            text = event["response"]  # the single `--output-format json` document
    b.think(text)


def _opencode(events: Iterable[dict[str, Any]], b: _Builder) -> None:
    """text, reasoning and tool_use events (a tool_use carries input and output); step_finish."""
    last: Step | None = None
    for event in events:
        kind = event.get("type")
        part = as_dict(event.get("part"))
        if kind in ("text", "reasoning"):
            b.think(part.get("text"))
        elif kind == "tool_use":
            state = as_dict(part.get("state"))
            started = as_dict(state.get("time")).get("start", event.get("timestamp"))
            last = b.act(
                str(part.get("tool") or "tool"),
                state.get("input"),
                call_id=str(part.get("callID") or part.get("id") or "") or None,
                ts=_iso(started),
            )
            status = state.get("status")
            output = state.get("output") if status != "error" else state.get("error")
            b.observe(last.call_id, output, ok=None if status is None else status != "error")
        elif kind == "step_finish":
            tokens = as_dict(part.get("tokens"))
            b.tokens(last, tokens.get("input"), tokens.get("output"))


STREAMS = {"claude": _claude, "codex": _codex, "gemini": _gemini, "opencode": _opencode}
EVENT_STRING_CHARS = 4000  # strings kept per event while the stream flows (fields trim later)
MAX_LINE_CHARS = 2_000_000  # a longer unfinished line is noise, not an event


def _shrunk(value: Any) -> Any:
    """An event with every string cut to EVENT_STRING_CHARS: bounded memory per event."""
    if isinstance(value, str):
        return value[:EVENT_STRING_CHARS]
    if isinstance(value, list):
        return [_shrunk(v) for v in value[:200]]
    if isinstance(value, dict):
        return {k: _shrunk(v) for k, v in value.items()}
    return value


class StreamTracer:
    """Reads the agent's stdout as it flows (an `on_output` tee), so the trajectory sees every
    event even where the captured output keeps only its head and tail."""

    def __init__(self, forward: Callable[[str, str], None] | None = None) -> None:
        self.forward = forward
        self.partial = ""
        self.events: list[dict[str, Any]] = []
        self.unparsed = 0
        self.dropped = 0
        self.seen = False

    def on_output(self, stream: str, text: str) -> None:
        if self.forward is not None:
            self.forward(stream, text)
        if stream == "stdout":
            self.feed(text)

    def feed(self, text: str) -> None:
        self.seen = True
        lines = (self.partial + text).split("\n")
        self.partial = lines.pop()
        if len(self.partial) > MAX_LINE_CHARS:
            self.partial, self.unparsed = "", self.unparsed + 1
        for line in lines:
            self._line(line)

    def _line(self, line: str) -> None:
        line = line.strip()
        if not line:
            return
        value = load_json(line) if line.startswith("{") else None
        if not isinstance(value, dict):
            self.unparsed += 1
        elif len(self.events) >= MAX_EVENTS:
            self.dropped += 1
        else:
            self.events.append(_shrunk(value))

    def trajectory(self, source: str, stdout: str) -> Trajectory | None:
        """The trajectory of what flowed; from `stdout` when nothing came through the tee."""
        reader = STREAMS.get(source)
        if reader is None:
            return None
        if not self.seen:
            self.feed(stdout)
        self._line(self.partial)  # the last line, maybe cut off: counted when it is not JSON
        self.partial = ""
        document = None if self.events else _document(stdout)
        if document:  # `--output-format json`: one document, maybe over many lines
            self.events, self.unparsed = [_shrunk(e) for e in document[:MAX_EVENTS]], 0
            self.dropped = max(0, len(document) - MAX_EVENTS)
        b = _Builder(source)
        b.trajectory.unparsed, b.trajectory.dropped = self.unparsed, self.dropped
        try:
            reader(iter(self.events), b)
        except Exception as exc:  # a malformed stream keeps what parsed
            b.trajectory.error = f"{type(exc).__name__}: {exc}"[:200]
        return b.finish()


def parse_stream(source: str, stdout: str) -> Trajectory | None:
    """The trajectory in an agent CLI's output; None for a tool without a JSON stream."""
    return StreamTracer().trajectory(source, stdout)


def from_result(acted: ActorResult, source: str) -> Trajectory:
    """The trajectory of an attempt: the parsed stream, else the applied edits and the answer."""
    if acted.trajectory is not None:
        return acted.trajectory
    b = _Builder(source)
    for call in acted.tool_calls:
        args = {"file_path": call.detail} if tool_kind(call.name) == "edit" else {}
        b.act(call.name, args, target=call.detail)
    b.think(acted.summary)
    return b.finish()


def store_attempt(
    artifacts: Path, acted: ActorResult, source: str, check_commands: Iterable[str], workdir: Path
) -> tuple[TraceSummary | None, str]:
    """Write the attempt's trace.jsonl; its summary for the record and its compact line.

    A trace is evidence, not the attempt: failing to build or write it costs the trace only.
    An attempt no stream gave steps of keeps the actor's last output lines instead.
    """
    try:
        trajectory = from_result(acted, source)
        if acted.trajectory is None or not trajectory.steps:
            trajectory.output = last_lines(acted.output)
        write(artifacts, trajectory)
        summary = summarize(trajectory, check_commands=check_commands, workdir=workdir)
        return summary, compact(trajectory, workdir=workdir)
    except (OSError, ValueError, TypeError) as exc:
        return None, f"(no trace: {type(exc).__name__})"
