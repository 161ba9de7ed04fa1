"""The agent's trajectory per attempt in ReAct form: thought -> action -> observation.

Read from the agent CLIs' JSON streams (claude stream-json, codex exec --json, gemini
stream-json, opencode run --format json); for other actors the trajectory is their answer and
the edits they applied. A stream that is not JSON, truncated or huge never fails an iteration:
the trajectory keeps what parsed and counts what did not. Every field is trimmed and redacted,
the number of steps is capped (head and tail kept) and what was dropped is counted, so
`NNN/trace.jsonl` stays small and free of secrets.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ralph.redact import redact

MAX_JSON_DEPTH = 64  # agent events nest a few levels; deeper is not an event ralph reads
MAX_JSON_CHARS = 16 << 20
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
BRACKET = re.compile(r"[\[\]{}]")

if TYPE_CHECKING:
    from ralph.actors.base import ActorResult
    from ralph.records import TraceSummary

TRACE_FILE = "trace.jsonl"
HEAD_STEPS = 150  # steps kept from the start of a long trajectory
TAIL_STEPS = 50  # and from its end: what the agent did last matters most for credit
THOUGHT_CHARS = 1000
INPUT_CHARS = 500
OBSERVATION_CHARS = 1000
TARGET_CHARS = 200
MAX_EVENTS = 20_000  # events read from one stream; the rest are counted as dropped
SUMMARY_ITEMS = 20  # files and commands listed in the record's summary
COMPACT_CHARS = 1500

EDIT_TOOLS = {
    "edit",
    "multiedit",
    "write",
    "notebookedit",
    "file_change",
    "apply_patch",
    "patch",
    "replace",
    "write_file",
    "edit_file",
    "str_replace",
    "str_replace_editor",
    "create_file",
}
READ_TOOLS = {
    "read",
    "read_file",
    "read_many_files",
    "view",
    "notebookread",
    "ls",
    "list",
    "list_directory",
}
SEARCH_TOOLS = {
    "grep",
    "glob",
    "search",
    "search_file_content",
    "codesearch",
    "web_search",
    "websearch",
    "webfetch",
    "web_fetch",
    "google_web_search",
}
READ_COMMANDS = {"cat", "head", "tail", "nl", "less", "more"}
COMMAND_TOOLS = {"bash", "shell", "run_shell_command", "command", "command_execution", "exec"}
PATH_KEYS = ("file_path", "filePath", "absolute_path", "notebook_path", "path", "paths")
WRAPPERS = {"python", "python3", "-m", "uv", "run", "poetry", "npx", "pipx", "hatch", "pdm"}


@dataclass
class Step:
    """One ReAct step: the thought before an action, the action, what the agent observed."""

    thought: str | None = None
    tool: str | None = None  # None: a thought or the final answer without an action
    kind: str | None = None  # edit, read, search, command or other (from the tool)
    target: str | None = None  # the file, the command or the pattern the action was about
    input: str | None = None  # the action's input, compact JSON, trimmed
    observation: str | None = None
    ok: bool | None = None  # False: the tool reported an error or a command exited non-zero
    files: list[str] = field(default_factory=list)
    ts: str | None = None  # ISO time, where the stream gives one
    tokens_in: int | None = None
    tokens_out: int | None = None
    call_id: str | None = None  # pairs an action with its result while parsing; not stored

    def to_json(self, index: int) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if v not in (None, []) and k != "call_id"}
        return {"step": index, **data}


@dataclass
class Trajectory:
    source: str
    steps: list[Step] = field(default_factory=list)
    dropped: int = 0  # steps (or events) left out to bound the size
    unparsed: int = 0  # lines of the stream that were not JSON (noise, a truncated last line)
    error: str | None = None  # why parsing stopped early, if it did

    def meta(self) -> dict[str, Any]:
        data: dict[str, Any] = {"source": self.source, "steps": len(self.steps)}
        data.update(dropped=self.dropped, unparsed=self.unparsed)
        if self.error:
            data["error"] = self.error
        return data


def trim(text: Any, limit: int) -> str | None:
    """Redacted and cut to `limit` characters (the cut says how much it left out)."""
    if text is None:
        return None
    raw = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, default=str)
    raw = raw.strip()
    # cut before redacting (a huge tool output costs no time); the margin keeps a secret that
    # straddles the limit whole for redact to see
    clean = redact(raw[: limit + 400])
    if not clean:
        return None
    if len(raw) <= limit and len(clean) <= limit:
        return clean
    more = max(len(raw), len(clean)) - limit
    return clean[:limit] + f"… [{more} more chars]"


def tool_kind(tool: str) -> str:
    name = tool.lower().split(":")[-1].split("/")[-1].split(".")[-1]
    for kind, names in (
        ("edit", EDIT_TOOLS),
        ("read", READ_TOOLS),
        ("search", SEARCH_TOOLS),
        ("command", COMMAND_TOOLS),
    ):
        if name in names:
            return kind
    return "other"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _paths(args: dict[str, Any]) -> list[str]:
    for key in PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value:
            return [value]
        if isinstance(value, list):
            return [str(v) for v in value if isinstance(v, str)]
    return []


def unwrap_command(command: str) -> str:
    """`bash -lc 'pytest -q'` (codex's form) -> `pytest -q`."""
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    shell = len(words) == 3 and words[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh")
    return words[2] if shell and words[1] in ("-c", "-lc") else command


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
        paths = list(files) or _paths(args)
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
        parts = [_dict(b).get("text") for b in output]
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
    """assistant messages: text, thinking and tool_use blocks; user messages: tool_result."""
    for event in events:
        kind = event.get("type")
        message = _dict(event.get("message"))
        content = message.get("content")
        blocks = [_dict(c) for c in content] if isinstance(content, list) else []
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
            usage = _dict(message.get("usage"))
            b.tokens(first, usage.get("input_tokens"), usage.get("output_tokens"))
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
        item = _dict(event.get("item"))
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
            changes = [_dict(c) for c in item.get("changes") or []]
            paths = [str(c.get("path")) for c in changes if c.get("path")]
            target = ", ".join(f"{c.get('kind')} {c.get('path')}" for c in changes)
            step = b.act("file_change", {"changes": changes}, target=target, files=paths)
            step.ok = item.get("status") != "failed"
        elif kind == "mcp_tool_call":
            name = f"mcp:{item.get('server')}/{item.get('tool')}"
            b.act(name, item.get("arguments"), call_id=str(item.get("id")))
            error = _dict(item.get("error")).get("message")
            result = _dict(item.get("result")).get("content")
            b.observe(item.get("id"), error or result, ok=not error)
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
            error = _dict(event.get("error")).get("message")
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
        part = _dict(event.get("part"))
        if kind in ("text", "reasoning"):
            b.think(part.get("text"))
        elif kind == "tool_use":
            state = _dict(part.get("state"))
            started = _dict(state.get("time")).get("start", event.get("timestamp"))
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
            tokens = _dict(part.get("tokens"))
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


# storage ------------------------------------------------------------------------------------
def write(artifacts: Path, trajectory: Trajectory) -> Path:
    """`NNN/trace.jsonl`: a meta line, then one step a line."""
    from ralph.files import atomic_write_text

    lines = [json.dumps({"meta": trajectory.meta()}, ensure_ascii=False)]
    lines += [
        json.dumps(step.to_json(i), ensure_ascii=False)
        for i, step in enumerate(trajectory.steps, 1)
    ]
    path = artifacts / TRACE_FILE
    atomic_write_text(path, "\n".join(lines) + "\n", durable=False)
    return path


def read(path: Path) -> Trajectory:
    """A stored trace; lines that do not read are counted as unparsed."""
    trajectory = Trajectory("unknown")
    fields = set(Step.__dataclass_fields__)
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            trajectory.unparsed += 1
            continue
        if not isinstance(data, dict):
            trajectory.unparsed += 1
        elif "meta" in data:
            meta = _dict(data["meta"])
            trajectory.source = str(meta.get("source", "unknown"))
            trajectory.dropped = int(meta.get("dropped") or 0)
            trajectory.unparsed += int(meta.get("unparsed") or 0)
            trajectory.error = meta.get("error")
        else:
            trajectory.steps.append(Step(**{k: v for k, v in data.items() if k in fields}))
    return trajectory


# summaries ----------------------------------------------------------------------------------
def _relative(path: str, workdir: Path | None) -> str:
    if workdir is not None and path.startswith("/"):
        try:
            return str(Path(path).relative_to(workdir))
        except ValueError:
            return path
    return path


def shown_files(command: str, workdir: Path | None) -> list[str]:
    """The files a `cat`/`head`/`tail`/`nl`/`less` command shows: how codex reads a file."""
    try:
        words = shlex.split(command)
    except ValueError:
        return []
    if not words or words[0] not in READ_COMMANDS or any(w in "|;&><" for w in words):
        return []
    return [_relative(w, workdir) for w in words[1:] if not w.startswith("-") and not w.isdigit()]


def check_words(commands: Iterable[str]) -> set[str]:
    """The program each check runs: `python -m pytest -q` -> pytest, `uv run mypy .` -> mypy."""
    words = set()
    for command in commands:
        try:
            parts = shlex.split(command)
        except ValueError:
            parts = command.split()
        for part in parts:
            name = part.rsplit("/", 1)[-1]
            if name not in WRAPPERS and not name.startswith("-"):
                words.add(name)
                break
    return words


def ran_check(step: Step, words: set[str]) -> bool:
    if step.kind != "command" or not step.target:
        return False
    try:
        parts = shlex.split(step.target)
    except ValueError:
        parts = step.target.split()
    return any(p.rsplit("/", 1)[-1] in words for p in parts)


def summarize(
    trajectory: Trajectory, *, check_commands: Iterable[str] = (), workdir: Path | None = None
) -> TraceSummary:
    """The record's `ralph.trace`: counts by tool, files read and edited, commands, checks run."""
    from ralph.records import TraceSummary

    actions: dict[str, int] = {}
    read_files: list[str] = []
    edited: list[str] = []
    commands: list[str] = []
    words = check_words(check_commands)
    for step in trajectory.steps:
        if step.tool is None:
            continue
        actions[step.tool] = actions.get(step.tool, 0) + 1
        files = [_relative(f, workdir) for f in step.files]
        if step.kind == "edit":
            edited += [f for f in files if f not in edited]
        elif step.kind == "read":
            read_files += [f for f in files if f not in read_files]
        elif step.kind == "command" and step.target:
            commands.append(step.target)
            read_files += [f for f in shown_files(step.target, workdir) if f not in read_files]
    return TraceSummary(
        steps=len(trajectory.steps),
        dropped=trajectory.dropped,
        unparsed=trajectory.unparsed,
        actions=actions,
        files_read=read_files[:SUMMARY_ITEMS],
        files_edited=edited[:SUMMARY_ITEMS],
        commands=commands[:SUMMARY_ITEMS],
        ran_checks=any(ran_check(s, words) for s in trajectory.steps) if words else None,
    )


def compact(trajectory: Trajectory, *, workdir: Path | None = None) -> str:
    """One line for the reflector: `read a.py; ran pytest -k x (failed); edited b.py`."""
    parts: list[str] = []
    for step in trajectory.steps:
        if step.tool is None:
            continue
        target = _relative(step.target or "", workdir)
        if step.kind == "edit":
            text = f"edited {', '.join(_relative(f, workdir) for f in step.files) or target}"
        elif step.kind == "read":
            text = f"read {target}"
        elif step.kind == "command":
            text = f"ran {target}"
        elif step.kind == "search":
            text = f"searched {target}"
        else:
            text = f"{step.tool} {target}".strip()
        if step.ok is False:
            text += " (failed)"
        if parts and parts[-1] == text:
            continue
        parts.append(text)
    if trajectory.dropped:
        parts.insert(min(HEAD_STEPS, len(parts)), f"… {trajectory.dropped} steps left out …")
    line = "; ".join(parts)
    if len(line) > COMPACT_CHARS:
        line = line[: COMPACT_CHARS // 2] + " … " + line[-COMPACT_CHARS // 2 :]
    return line


def store_attempt(
    artifacts: Path, acted: ActorResult, source: str, check_commands: Iterable[str], workdir: Path
) -> tuple[TraceSummary | None, str]:
    """Write the attempt's trace.jsonl; its summary for the record and its compact line.

    A trace is evidence, not the attempt: failing to build or write it costs the trace only.
    """
    try:
        trajectory = from_result(acted, source)
        write(artifacts, trajectory)
        summary = summarize(trajectory, check_commands=check_commands, workdir=workdir)
        return summary, compact(trajectory, workdir=workdir)
    except (OSError, ValueError, TypeError) as exc:
        return None, f"(no trace: {type(exc).__name__})"


def check_note(line: str, name: str, command: str) -> tuple[str, str] | None:
    """What a compact trajectory says about a failing check, and what to do instead: never run,
    run only before the last edit, or run and left failing.

    None when the trace cannot tell (it shows no commands and no reads: a `cmd:` actor or an
    LLM provider, whose work ralph does not see) or when the agent's last run passed.
    """
    parts = line.split("; ") if line else []
    if not any(p.startswith(("ran ", "read ", "searched ")) for p in parts):
        return None
    words = check_words([command])
    runs = [
        i
        for i, p in enumerate(parts)
        if p.startswith("ran ") and words & {w.rsplit("/", 1)[-1] for w in p[4:].split()}
    ]
    if not runs:
        return (
            f"I never ran {name} (`{command}`) myself before stopping, so I never saw it fail.",
            f"Run `{command}` yourself and read its output before you stop.",
        )
    last = parts[runs[-1]]
    if any(p.startswith("edited ") for p in parts[runs[-1] + 1 :]):
        return (
            f"I edited the code after my last run of {name} ({last[4:]}) and did not run it "
            "again before stopping.",
            f"After your last edit, run `{command}` again and stop only when it passes.",
        )
    if last.endswith("(failed)"):
        return (
            f"My last run of {name} failed ({last[4:]}) and I stopped anyway.",
            f"Do not stop while `{command}` fails: read its output and fix what it reports.",
        )
    return None
