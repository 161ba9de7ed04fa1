"""The agent's trajectory per attempt in ReAct form: thought -> action -> observation; its file
and the views the record and the reflector get (built by `tracing`).

A stream that is not JSON, truncated or huge never fails an iteration: the trajectory keeps what
parsed and counts what did not. Every field is trimmed and redacted, the number of steps is
capped (head and tail kept) and what was dropped counted: `NNN/trace.jsonl` small, secret-free.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from ralph.actors.tail import OUTPUT_LINES
from ralph.glyphs import plural
from ralph.reading import open_regular
from ralph.redact import redact

MAX_JSON_DEPTH = 64  # agent events nest a few levels; deeper is not an event ralph reads
MAX_JSON_CHARS = 16 << 20
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
BRACKET = re.compile(r"[\[\]{}]")

if TYPE_CHECKING:
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
    unread: int = 0  # lines of a stored trace past what a reader takes (`read`), never written
    # the actor's last output lines (`tail.last_lines`), kept when no stream gave steps
    output: list[str] = field(default_factory=list)

    def meta(self) -> dict[str, Any]:
        data: dict[str, Any] = {"source": self.source, "steps": len(self.steps)}
        data.update(dropped=self.dropped, unparsed=self.unparsed)
        optional = {"error": self.error, "output": self.output, "unread": self.unread}
        return data | {key: value for key, value in optional.items() if value}


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
    return clean[:limit] + f"… [{plural(more, 'more char')}]"


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


def memory_tool(tool: str) -> bool:
    """A call of ralph's memory (`ralph mcp`) as each CLI names it: `mcp__ralph__search_reflections`
    (Claude Code), `mcp:ralph/lessons_for` (Codex), `mcp_ralph_list_loops` or the bare name."""
    from ralph.memory.tools import SERVER_NAME, TOOL_NAMES

    name = tool.lower()
    return any(name == t or (name.endswith(t) and SERVER_NAME in name) for t in TOOL_NAMES)


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def paths_of(args: dict[str, Any]) -> list[str]:
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
    """A stored trace through a bounded reader: a file ralph wrote reads back as it was; a
    corrupt or foreign one never fails the reader nor takes long. Lines that are not a JSON
    object are counted as unparsed, fields of the wrong type are left out, strings are cut at
    `READ_FIELD_CHARS`, and the steps past `READ_STEPS` are only counted (`unread`).

    Raises `Unreadable` (a FIFO, a folder) with the reason."""
    trajectory = Trajectory("unknown")
    with open_regular(path) as handle:
        while raw := handle.readline(READ_LINE_BYTES + 1):
            if len(trajectory.steps) >= READ_STEPS:
                trajectory.unread = _count_lines(raw, handle)  # counted, not parsed
                break
            if len(raw) > READ_LINE_BYTES and not raw.endswith(b"\n"):
                _skip_line(handle)  # a line no step ralph writes fills
                trajectory.unparsed += 1
                continue
            _read_line(trajectory, raw)
    return trajectory


def _skip_line(handle: BinaryIO) -> None:
    """Read on to the end of the current line, a bounded piece at a time."""
    while (rest := handle.readline(READ_LINE_BYTES)) and not rest.endswith(b"\n"):
        pass


def _count_lines(head: bytes, handle: BinaryIO) -> int:
    """The lines from `head` to the end of the file, counted in chunks, none held whole."""
    count, last = head.count(b"\n"), head
    while chunk := handle.read(1 << 20):
        count, last = count + chunk.count(b"\n"), chunk
    return count + (not last.endswith(b"\n"))


READ_STEPS = 2 * (HEAD_STEPS + TAIL_STEPS)  # steps read from one file; ralph writes HEAD + TAIL
READ_LINE_BYTES = 1 << 20  # a longer line is no step ralph wrote: skipped, never held whole
READ_FIELD_CHARS = 4 * OBSERVATION_CHARS  # a field longer than ralph writes is cut
TEXT_FIELDS = ("thought", "tool", "kind", "target", "input", "observation", "ts")
COUNT_FIELDS = ("tokens_in", "tokens_out")


def _read_line(trajectory: Trajectory, raw: bytes) -> None:
    if not raw.strip():
        return
    try:
        data = json.loads(raw.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):  # RecursionError: `[[[[...` nested past the stack
        trajectory.unparsed += 1
        return
    if not isinstance(data, dict):
        trajectory.unparsed += 1
    elif "meta" in data:
        meta = as_dict(data["meta"])
        trajectory.source = _text(meta.get("source")) or "unknown"
        trajectory.dropped = _count(meta.get("dropped"))
        trajectory.unparsed += _count(meta.get("unparsed"))
        trajectory.error = _text(meta.get("error"))
        output = meta.get("output")
        texts = (_text(line) for line in output[-OUTPUT_LINES:]) if isinstance(output, list) else ()
        trajectory.output = [line for line in texts if line is not None]
    else:
        trajectory.steps.append(_step(data))


def _step(data: dict[str, Any]) -> Step:
    """A stored step, each field of its type or left out."""
    step = Step()
    for name in TEXT_FIELDS:
        setattr(step, name, _text(data.get(name)))
    ok = data.get("ok")
    step.ok = ok if isinstance(ok, bool) else None
    files = data.get("files")
    if isinstance(files, list):
        step.files = [
            f[:READ_FIELD_CHARS] for f in files[: SUMMARY_ITEMS * 5] if isinstance(f, str)
        ]
    for name in COUNT_FIELDS:
        value = data.get(name)
        setattr(step, name, value if type(value) is int and value >= 0 else None)
    return step


def _text(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    if len(value) <= READ_FIELD_CHARS:
        return value
    return value[:READ_FIELD_CHARS] + f"… [{plural(len(value) - READ_FIELD_CHARS, 'more char')}]"


def _count(value: Any) -> int:
    """A count from the file: a non-negative integer, anything else 0."""
    return value if type(value) is int and value >= 0 else 0


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
        parts.insert(
            min(HEAD_STEPS, len(parts)), f"… {plural(trajectory.dropped, 'step')} left out …"
        )
    line = "; ".join(parts)
    if len(line) > COMPACT_CHARS:
        line = line[: COMPACT_CHARS // 2] + " … " + line[-COMPACT_CHARS // 2 :]
    return line


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
