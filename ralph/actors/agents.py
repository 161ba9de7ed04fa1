"""Agent CLI presets: claude, codex, aider, gemini, opencode, run non-interactively.

Each preset is a known command line (flags checked against each tool's documentation and
source) and a parser for what the tool prints. The prompt never goes through argv: it is piped
on stdin, or for aider passed as `--message-file`, so long prompts are safe. File edits are
approved automatically and nothing wider where the tool can say so (Claude Code `acceptEdits`,
Gemini `auto_edit`, Codex's `workspace-write` sandbox); in print mode whatever the tool would
have asked about is denied, not waited on. Wider permissions (`--dangerously-skip-permissions`,
`--allowedTools "Bash(pytest:*)"`, ...) are the user's explicit choice through `actor_args`.
The same CLI doubles as the default reflector (`chat_client`), run read-only: Claude `plan`,
Codex `read-only`, aider `ask` + `--dry-run`, Gemini `default`, opencode's `plan` agent.
"""

from __future__ import annotations

import math
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from ralph import process
from ralph.actors import trace
from ralph.actors.base import ActorContext, ActorResult, ToolCall
from ralph.actors.command import combined_output, ralph_env, search_path, write_log, write_prompt
from ralph.actors.trace import load_json
from ralph.config import model_args
from ralph.errors import PreflightError, ProviderError
from ralph.providers.base import ChatResponse, Message

# (prompt file, scratch directory) -> (arguments before actor_args, arguments after them)
ArgvBuilder = Callable[[Path, Path], tuple[list[str], list[str]]]
CHAT_TIMEOUT = 300.0  # the default --reflector-timeout


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


def parse_claude(stdout: str) -> AgentOutput:
    """`claude -p --output-format stream-json|json`: assistant tool_use blocks, a result event."""
    out = AgentOutput()
    last_text = ""
    for event in _events(stdout):
        kind = event.get("type")
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
    out.text = out.text or last_text
    return out


def parse_codex(stdout: str) -> AgentOutput:
    """`codex exec --json`: item.completed events, usage on turn.completed, no cost."""
    out = AgentOutput()
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
    return out


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
        out.tool_calls.append(ToolCall(str(name), f"{_dict(info).get('count', '?')} calls"))
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


@dataclass(frozen=True)
class Preset:
    name: str
    binary: str
    install: str
    act_argv: ArgvBuilder
    chat_argv: ArgvBuilder
    parse: Callable[[str], AgentOutput]
    prompt_on_stdin: bool = True
    env: tuple[tuple[str, str], ...] = ()  # variables the tool needs to run headless


def _claude(mode: str) -> ArgvBuilder:
    # stream-json (which needs --verbose with -p) keeps output flowing, so the idle timeout
    # measures a stuck agent rather than a long silent run, and carries the tool-use trace.
    flags = ["-p", "--output-format", "stream-json", "--verbose", "--permission-mode", mode]
    return lambda prompt, scratch: (list(flags), [])


def _codex(sandbox: str) -> ArgvBuilder:
    # `-` makes codex read the prompt from stdin; it stays last, after any actor_args.
    flags = ["exec", "--json", "--sandbox", sandbox, "--skip-git-repo-check"]
    return lambda prompt, scratch: (list(flags), ["-"])


def _aider(*mode: str) -> ArgvBuilder:
    def build(prompt: Path, scratch: Path) -> tuple[list[str], list[str]]:
        return [
            *mode,
            "--message-file",
            str(prompt),
            "--yes-always",
            "--no-auto-commits",  # ralph commits iterations itself
            "--no-dirty-commits",
            "--no-gitignore",
            "--no-pretty",
            "--no-stream",
            "--no-check-update",
            # aider's history files would otherwise show up as changes in the working tree
            "--input-history-file",
            str(scratch / "aider.input.history"),
            "--chat-history-file",
            str(scratch / "aider.chat.history.md"),
        ], []

    return build


def _gemini(approval: str) -> ArgvBuilder:
    flags = ["--output-format", "stream-json", "--approval-mode", approval]
    return lambda prompt, scratch: (list(flags), [])


def _opencode(*agent: str) -> ArgvBuilder:
    return lambda prompt, scratch: (["run", "--format", "json", *agent], [])


PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset(
            "claude",
            "claude",
            "npm install -g @anthropic-ai/claude-code",
            _claude("acceptEdits"),
            _claude("plan"),
            parse_claude,
        ),
        Preset(
            "codex",
            "codex",
            "npm install -g @openai/codex (or: brew install codex)",
            _codex("workspace-write"),
            _codex("read-only"),
            parse_codex,
        ),
        Preset(
            "aider",
            "aider",
            "python -m pip install aider-install && aider-install",
            _aider(),
            _aider("--chat-mode", "ask", "--dry-run"),
            parse_aider,
            prompt_on_stdin=False,
        ),
        Preset(
            "gemini",
            "gemini",
            "npm install -g @google/gemini-cli",
            _gemini("auto_edit"),
            _gemini("default"),
            parse_gemini,
            # gemini >= 0.39 exits (code 55) in a folder it was never told to trust; ralph only
            # runs it in the repository the user pointed it at. The variable (not --skip-trust)
            # works across versions: older ones ignore it, unknown flags would be an error.
            env=(("GEMINI_CLI_TRUST_WORKSPACE", "true"),),
        ),
        Preset(
            "opencode",
            "opencode",
            "npm install -g opencode-ai (or: curl -fsSL https://opencode.ai/install | bash)",
            _opencode(),
            _opencode("--agent", "plan"),
            parse_opencode,
        ),
    )
}


class AgentActor:
    """One preset agent CLI, a fresh process per iteration."""

    def __init__(
        self,
        preset: Preset,
        *,
        actor_args: Sequence[str] = (),
        environ: Mapping[str, str] | None = None,
        base_dir: Path | None = None,
    ) -> None:
        self.preset = preset
        self.name = preset.name
        self.actor_args = list(actor_args)
        self.environ = dict(environ) if environ is not None else None
        self.base_dir = base_dir or Path.cwd()

    def binary(self) -> str:
        found = process.which(self.preset.binary, path=search_path(self.environ))
        if found is None:
            raise PreflightError(
                f"{self.preset.binary} not found on PATH (needed by --actor {self.name})",
                hint=f"install it: {self.preset.install}",
            )
        return found

    def preflight(self) -> None:
        """The binary, and credentials it can use unattended (never a login prompt that would
        sit out the iteration timeout): see actors/readiness.py."""
        import os

        from ralph.actors.readiness import credentials

        binary = self.binary()
        environ = self.environ if self.environ is not None else os.environ
        found = credentials(
            self.name, environ, root=self.base_dir, actor_args=self.actor_args, binary=binary
        )
        if not found.ok:
            raise PreflightError(
                f"{self.name} cannot run unattended here: {found.source}", hint=found.hint
            )

    def describe(self) -> str:
        """The command line of an attempt, for `ralph run --dry-run`."""
        import shlex

        head, tail = self.preset.act_argv(Path("<prompt.md>"), Path("<artifacts>"))
        argv = shlex.join([self.preset.binary, *head, *self.actor_args, *tail])
        return argv + (" < prompt.md" if self.preset.prompt_on_stdin else "")

    def run_env(self) -> dict[str, str]:
        return {**dict(self.preset.env), **(self.environ or {})}

    def act(self, prompt: str, ctx: ActorContext) -> ActorResult:
        binary = self.binary()
        prompt_file = write_prompt(ctx, prompt)
        head, tail = self.preset.act_argv(prompt_file, ctx.artifacts_dir)
        tracer = trace.StreamTracer(ctx.on_output)  # sees every event, not only the capped output
        result = process.run(
            [binary, *head, *self.actor_args, *tail],
            cwd=ctx.workdir,
            env={**self.run_env(), **ralph_env(ctx, prompt_file)},
            stdin=prompt if self.preset.prompt_on_stdin else None,
            wall_timeout=ctx.iteration_timeout,
            idle_timeout=ctx.idle_timeout,
            on_output=tracer.on_output,
        )
        output = combined_output(result)
        write_log(ctx, output)
        parsed = self.preset.parse(result.stdout)
        summary = parsed.text.strip() or (f"error: {parsed.error}" if parsed.error else None)
        return ActorResult(
            output=output,
            exit_code=result.exit_code,
            duration_ms=result.duration_ms,
            timed_out=result.timed_out,
            tokens_in=parsed.tokens_in,
            tokens_out=parsed.tokens_out,
            cost_usd=parsed.cost_usd,
            tool_calls=parsed.tool_calls,
            summary=summary,
            trajectory=tracer.trajectory(self.name, result.stdout),
            notes=[f"{self.name}: {note}" for note in parsed.notes],
        )

    def chat_client(self) -> AgentChatClient:
        return AgentChatClient(self)


class AgentChatClient:
    """The agent CLI in print mode as a ChatClient: one read-only run per question."""

    def __init__(self, actor: AgentActor, *, timeout: float | None = CHAT_TIMEOUT) -> None:
        self.actor = actor
        self.timeout = timeout
        self.model_args = model_args(actor.actor_args)
        self.model = self.model_args[-1] if self.model_args else actor.name

    def chat(
        self,
        messages: list[Message],
        *,
        json_mode: bool = False,
        max_tokens: int | None = None,
    ) -> ChatResponse:
        preset = self.actor.preset
        prompt = render_messages(messages, json_mode=json_mode)
        binary = self.actor.binary()
        with tempfile.TemporaryDirectory(prefix="ralph-chat-") as scratch:
            prompt_file = Path(scratch, "prompt.md")
            prompt_file.write_text(prompt, encoding="utf-8")
            head, tail = preset.chat_argv(prompt_file, Path(scratch))
            result = process.run(
                [binary, *head, *self.model_args, *tail],
                cwd=self.actor.base_dir,
                env=self.actor.run_env(),
                stdin=prompt if preset.prompt_on_stdin else None,
                wall_timeout=self.timeout,
            )
        parsed = preset.parse(result.stdout)
        if result.timed_out or not parsed.text.strip():
            why = (
                f"timed out after {self.timeout:g}s (--reflector-timeout)"
                if result.timed_out
                else f"gave no answer (exit {result.exit_code})"
            )
            detail = (parsed.error or result.stderr.strip() or result.stdout.strip())[-300:]
            raise ProviderError(f"{preset.name} {why}", hint=detail or None)
        return ChatResponse(
            text=parsed.text,
            model=self.model,
            tokens_in=parsed.tokens_in,
            tokens_out=parsed.tokens_out,
            cost_usd=parsed.cost_usd,
        )


def render_messages(messages: list[Message], *, json_mode: bool) -> str:
    """One prompt from a conversation: system text first, then the turns, labelled."""
    parts = [m.content.strip() for m in messages if m.role == "system"]
    turns = [m for m in messages if m.role != "system"]
    for message in turns:
        label = "" if message.role == "user" and len(turns) == 1 else f"{message.role.upper()}:\n"
        parts.append(label + message.content.strip())
    if json_mode:
        parts.append("Answer with one JSON object only: no prose, no code fence.")
    return "\n\n".join(part for part in parts if part) + "\n"
