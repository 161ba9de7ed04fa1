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

Codex runs the model's commands and edits in a bubblewrap sandbox of its own, and ralph's
sandbox holds codex itself: the two compose, with one change (`Preset.confined`). In
`workspace-write` codex makes `/tmp` writable and re-mounts a `.git` in each writable root
read-only; under ralph's sandbox `/tmp` is read-only, so its bwrap could not create
`/tmp/.git` and every command and edit failed (0.171.0: "bwrap: Can't mkdir /tmp/.git:
Read-only file system"). Confined, codex leaves `/tmp` out of its writable roots
(`sandbox_workspace_write.exclude_slash_tmp`); its TMPDIR, ralph's private one, stays
writable. Codex's own sandbox is kept rather than turned off (`danger-full-access`): it still
cuts the network from the model's commands while codex itself, inside ralph's, reaches its
model; the nested bwrap starts under ralph's (also with every capability dropped, its own PID
namespace and root mapped to nobody). Without ralph's sandbox codex runs as configured.
Codex reads its endpoint from its configuration, not from OPENAI_BASE_URL: a user's
OPENAI_BASE_URL is passed on as `-c openai_base_url=...` (`Preset.settings`).
"""

from __future__ import annotations

import json
import os
import shlex
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ralph import process
from ralph.actors import tracing
from ralph.actors.agent_output import (
    AgentOutput,
    parse_aider,
    parse_claude,
    parse_codex,
    parse_gemini,
    parse_opencode,
)
from ralph.actors.base import Actor, ActorContext, ActorResult
from ralph.actors.command import combined_output, ralph_env, search_path, write_log, write_prompt
from ralph.actors.mcp_wiring import (
    MemoryWirer,
    MemoryWiring,
    claude_memory,
    codex_memory,
    gemini_memory,
)
from ralph.actors.readiness import credentials
from ralph.actors.unreachable import ModelWatch, hint
from ralph.config import model_args
from ralph.errors import PreflightError, ProviderError
from ralph.memory.server import sdk_available, server_command
from ralph.memory.store import MemoryStore
from ralph.providers.base import ChatResponse, Message
from ralph.sandbox import Sandbox, denials
from ralph.usage_limits import EventSignal, LimitSignals, Signal, UsageLimited, recognise

# (prompt file, scratch directory) -> (arguments before actor_args, arguments after them)
ArgvBuilder = Callable[[Path, Path], tuple[list[str], list[str]]]
CHAT_TIMEOUT = 300.0  # the default --reflector-timeout


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
    memory: MemoryWirer | None = None  # how it takes an MCP server per run (None: it cannot)
    limits: LimitSignals | None = None  # how it says a usage limit stopped it (usage_limits)
    confined: tuple[str, ...] = ()  # arguments for a run inside ralph's sandbox
    # the arguments that carry a user's settings from its environment to the CLI
    settings: Callable[[Mapping[str, str]], list[str]] | None = None


def _claude(mode: str) -> ArgvBuilder:
    # stream-json (which needs --verbose with -p) keeps output flowing, so the idle timeout
    # measures a stuck agent rather than a long silent run, and carries the tool-use trace.
    flags = ["-p", "--output-format", "stream-json", "--verbose", "--permission-mode", mode]
    return lambda prompt, scratch: (list(flags), [])


# codex 0.171.0 waits for the network without end ("Reconnecting... waiting for network"): an
# attempt whose model is out of reach then sat out the wall timeout. Off, it gives up after its
# retries (about 30 s) with its own line. An older codex ignores the unknown setting.
CODEX_GIVE_UP = ("-c", "features.unbounded_connection_retries=false")


def _codex(sandbox: str) -> ArgvBuilder:
    # `-` makes codex read the prompt from stdin; it stays last, after any actor_args.
    flags = ["exec", "--json", "--sandbox", sandbox, "--skip-git-repo-check", *CODEX_GIVE_UP]
    return lambda prompt, scratch: (list(flags), ["-"])


# codex's own sandbox inside ralph's: no `/tmp` among its writable roots (see the docstring)
CODEX_CONFINED = ("-c", "sandbox_workspace_write.exclude_slash_tmp=true")


def codex_settings(environ: Mapping[str, str]) -> list[str]:
    """OPENAI_BASE_URL as codex's `openai_base_url` (0.171.0 reads it only from its config)."""
    url = environ.get("OPENAI_BASE_URL", "").strip()
    return ["-c", f"openai_base_url={json.dumps(url)}"] if url else []


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


# How each CLI says a usage limit stopped it, as its released versions print it (the texts
# from its own source; `usage_limits.py` reads them). The first that matches wins.
CLAUDE_LIMITS = LimitSignals(
    texts=(
        Signal(r"^Claude AI usage limit reached\|(?P<epoch>\d{9,13})"),
        Signal(
            r"You[’']ve hit your [^·\n]*limit\s*·\s*resets\s+(?P<clock>[^(\n]+?)"
            r"(?:\s*\((?P<zone>[^)\n]+)\))?\s*$"
        ),
        Signal(
            r"You[’']ve hit your [^\n]*limit|Claude AI usage limit reached|out of usage credits|"
            r"Your org is out of usage|usage limit is set to \$0|"
            r"usage allocation has been disabled|seat type doesn[’']t include",
            reset="none",
        ),
        # an API key's 429 after claude's own retries (2.1.197 prints no reset time for it)
        Signal(r"^API Error: Request rejected \(429\)", reset="none"),
    ),
    events=(
        EventSignal("rate_limit_event", "rate_limit_info", ("status", "rejected"), "resetsAt"),
    ),
)
CODEX_LIMITS = LimitSignals(
    texts=(
        Signal(r"usage_limit_reached[^\n]*?\"resets_at\"\s*:\s*(?P<epoch>\d+)"),
        Signal(r"usage_limit_reached[^\n]*?\"resets_in_seconds\"\s*:\s*(?P<seconds>\d+)"),
        Signal(r"hit your usage limit[^\n]*?try again at (?P<clock>[^.\n]+)"),
        Signal(r"hit your usage limit[^\n]*?try again in (?P<after>[^.\n]+)"),
        Signal(r"hit your usage limit|usage_limit_reached", reset="none"),
    )
)
GEMINI_LIMITS = LimitSignals(
    texts=(
        # Google resets a daily quota at midnight Pacific time
        Signal(r"exhausted your daily quota", reset="midnight:America/Los_Angeles"),
        Signal(
            r"(?:quota|exhausted|RESOURCE_EXHAUSTED)[^\n]*?(?:Please retry in|Suggested retry "
            r"after)\s+(?P<after>[0-9.]+m?s)\b"
        ),
    )
)

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
            # no traffic a loop does not need: each attempt's paid title-generation request
            # (seen at a fake Messages API), telemetry, error reports, an update mid-loop. A
            # user's own value wins (set it empty to turn them back on).
            env=(("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),),
            memory=claude_memory,
            limits=CLAUDE_LIMITS,
        ),
        Preset(
            "codex",
            "codex",
            "npm install -g @openai/codex (or: brew install codex)",
            _codex("workspace-write"),
            _codex("read-only"),
            parse_codex,
            memory=codex_memory,
            limits=CODEX_LIMITS,
            confined=CODEX_CONFINED,
            settings=codex_settings,
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
            memory=gemini_memory,
            limits=GEMINI_LIMITS,
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
        self.sandbox: Sandbox | None = None  # `actors/confine.confine`
        self.memory_server: list[str] | None = None  # `ralph mcp`'s command line, when offered

    def offer_memory(self, server: Sequence[str]) -> bool:
        """Give each attempt the memory server, when this CLI can take one; whether it can."""
        if self.preset.memory is None:
            return False
        self.memory_server = list(server)
        return True

    def memory_wiring(self, folder: Path) -> MemoryWiring:
        if self.memory_server is None or self.preset.memory is None:
            return MemoryWiring([], {}, {})
        environ = self.environ if self.environ is not None else os.environ
        return self.preset.memory(folder, self.memory_server, {**dict(self.preset.env), **environ})

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
        binary = self.binary()
        environ = self.environ if self.environ is not None else os.environ
        found = credentials(
            self.name, environ, root=self.base_dir, actor_args=self.actor_args, binary=binary
        )
        if not found.ok:
            raise PreflightError(
                f"{self.name} cannot run unattended here: {found.source}", hint=found.hint
            )

    def preset_args(self) -> list[str]:
        """The preset's arguments beyond its mode: a user's settings from the environment, and
        those for a run inside ralph's sandbox when it has one."""
        environ = self.environ if self.environ is not None else os.environ
        given = self.preset.settings(environ) if self.preset.settings is not None else []
        return given + (list(self.preset.confined) if self.sandbox is not None else [])

    def describe(self) -> str:
        """The command line of an attempt, for `ralph run --dry-run`."""
        head, tail = self.preset.act_argv(Path("<prompt.md>"), Path("<artifacts>"))
        memory = self.memory_wiring(Path("<artifacts>"))
        env = "".join(f"{k}={shlex.quote(v)} " for k, v in memory.env.items())
        argv = env + shlex.join(
            [self.preset.binary, *head, *self.preset_args(), *memory.args, *self.actor_args, *tail]
        )
        return argv + (" < prompt.md" if self.preset.prompt_on_stdin else "")

    def run_env(self) -> dict[str, str]:
        return {**dict(self.preset.env), **(self.environ or {})}

    def act(self, prompt: str, ctx: ActorContext) -> ActorResult:
        binary = self.binary()
        prompt_file = write_prompt(ctx, prompt)
        head, tail = self.preset.act_argv(prompt_file, ctx.artifacts_dir)
        memory = self.memory_wiring(ctx.artifacts_dir)
        memory.write()
        tracer = tracing.StreamTracer(ctx.on_output)  # sees every event, not only the capped output
        watch = ModelWatch(self.name, tracer.on_output)
        result = process.run(
            [binary, *head, *self.preset_args(), *memory.args, *self.actor_args, *tail],
            cwd=ctx.workdir,
            env={**self.run_env(), **memory.env, **ralph_env(ctx, prompt_file)},
            stdin=prompt if self.preset.prompt_on_stdin else None,
            wall_timeout=ctx.iteration_timeout,
            idle_timeout=ctx.idle_timeout,
            on_output=watch.on_output,
            on_start=watch.started,
            sandbox=self._confinement(memory),
            contain=True,
        )
        output = combined_output(result)
        write_log(ctx, output)
        said = watch.unreachable()
        if said is not None:
            cut = self.sandbox is not None and not self.sandbox.network
            environ = self.environ if self.environ is not None else os.environ
            message = f"{self.name} cannot reach its model: {said}"
            raise ProviderError(message, hint=hint(environ, cut))
        parsed = self.preset.parse(result.stdout)
        signals = self.preset.limits
        if signals and result.timed_out is None and (result.exit_code != 0 or parsed.error):
            failed = (parsed.error, result.stderr, parsed.text)  # a failed run's words only
            limit = recognise(self.name, signals, stdout=result.stdout, errors=failed)
            if limit is not None:
                raise UsageLimited(limit)
        summary = parsed.text.strip() or (f"error: {parsed.error}" if parsed.error else None)
        unreachable = parsed.unreachable
        return ActorResult(
            unreachable=f"{self.name} could not reach its model: {unreachable}"
            if unreachable
            else None,
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
            notes=[f"{self.name}: {note}" for note in parsed.notes]
            + (denials(output) if self.sandbox is not None else [])
            + result.notes,
        )

    def _confinement(self, memory: MemoryWiring) -> Sandbox | None:
        """The sandbox, keeping the memory wiring's variables and the folders it writes."""
        if self.sandbox is None:
            return None
        writable = (*self.sandbox.writable, *memory.writable)
        return replace(self.sandbox, writable=writable).keeping(memory.env)

    def chat_client(self) -> AgentChatClient:
        return AgentChatClient(self)


def offer_memory_tools(actor: Actor, root: Path) -> bool:
    """Give an agent CLI that can take it the memory server of the repository at `root` in
    each attempt, when the MCP SDK is installed; whether it was given."""
    if not isinstance(actor, AgentActor) or not sdk_available():
        return False
    return actor.offer_memory(server_command(MemoryStore.discover(root).root))


class AgentChatClient:
    """The agent CLI in print mode as a ChatClient: one read-only run per question."""

    def __init__(self, actor: AgentActor, *, timeout: float | None = CHAT_TIMEOUT) -> None:
        self.actor = actor
        self.timeout = timeout
        self.model_args = model_args(actor.actor_args)
        self.model = self.model_args[-1] if self.model_args else actor.name

    def sandbox(self, scratch: Path) -> Sandbox | None:
        """The actor's own sandbox (a hook or MCP server planted in the agent's configuration
        or the tree runs confined, never as ralph), its scratch folder writable."""
        box = self.actor.sandbox
        return None if box is None else replace(box, writable=(*box.writable, scratch))

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
                [binary, *head, *self.actor.preset_args(), *self.model_args, *tail],
                cwd=self.actor.base_dir,
                env=self.actor.run_env(),
                stdin=prompt if preset.prompt_on_stdin else None,
                wall_timeout=self.timeout,
                sandbox=self.sandbox(Path(scratch)),
                contain=True,
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
