"""`cmd:"COMMAND"`: any program as the actor, plus the helpers every process-backed actor shares.

The prompt goes both on stdin and into `prompt.md` (path in `RALPH_PROMPT_FILE`), so a script can
read whichever suits it; `RALPH_LOOP_ID`, `RALPH_ITERATION` and `RALPH_WORKDIR` say where it is.
The combined output lands in `actor.log` beside the prompt so a failed iteration can be read
after the fact.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from ralph import process
from ralph.actors.base import ActorContext, ActorResult
from ralph.errors import ConfigError, PreflightError
from ralph.files import atomic_write_text
from ralph.process import ProcessResult
from ralph.providers.base import ChatClient
from ralph.sandbox import Sandbox, denials

PROMPT_FILE = "prompt.md"
LOG_FILE = "actor.log"
REQUEST_FILE = "request.md"  # what an LLM actor sent: system text, prompt and the files


# Artifacts, not memory: atomic but not fsynced (a rerun writes them again), so an iteration
# does not wait twice for the disk before its agent even starts.
def write_prompt(ctx: ActorContext, prompt: str) -> Path:
    """prompt.md in the iteration's artifacts directory; returns its path. The loop writes it
    before the actor starts (it is the one writer: `ralph prompt` shows it); an actor run on its
    own writes it here, redacted as every file ralph writes."""
    path = ctx.artifacts_dir / PROMPT_FILE
    if not path.is_file():
        atomic_write_text(path, prompt, durable=False)
    return path


def combined_output(result: ProcessResult) -> str:
    """stdout, then stderr under a marker when there is any."""
    if not result.stderr.strip():
        return result.stdout
    return f"{result.stdout.rstrip()}\n--- stderr ---\n{result.stderr}".lstrip("\n")


def write_log(ctx: ActorContext, text: str) -> None:
    atomic_write_text(ctx.artifacts_dir / LOG_FILE, text, durable=False)


def ralph_env(ctx: ActorContext, prompt_file: Path) -> dict[str, str]:
    return {
        "RALPH_PROMPT_FILE": str(prompt_file),
        "RALPH_LOOP_ID": ctx.loop_id,
        "RALPH_ITERATION": str(ctx.iteration),
        "RALPH_WORKDIR": str(ctx.workdir),
    }


def search_path(environ: Mapping[str, str] | None) -> str | None:
    """The PATH to look programs up in: the given environment's, else the process's."""
    return (environ if environ is not None else os.environ).get("PATH")


class CommandActor:
    """Runs a shell command once per iteration in the working tree."""

    def __init__(
        self,
        command: str,
        *,
        actor_args: Sequence[str] = (),
        environ: Mapping[str, str] | None = None,
    ) -> None:
        command = command.strip()
        if len(command) >= 2 and command[0] == command[-1] and command[0] in "'\"":
            command = command[1:-1].strip()
        if not command:
            raise ConfigError("cmd: actor has no command", hint='use --actor cmd:"./my-agent.sh"')
        # actor_args are appended shell-quoted, so they reach the (last) program as given
        self.command = f"{command} {shlex.join(actor_args)}" if actor_args else command
        self.environ = dict(environ) if environ is not None else None
        self.name = f"cmd:{self.command}"
        self.sandbox: Sandbox | None = None  # `actors/confine.confine`

    def preflight(self) -> None:
        """Fail early when the command's program plainly does not exist."""
        try:
            words = shlex.split(self.command)
        except ValueError as exc:
            raise ConfigError(f"cmd: cannot parse {self.command!r}: {exc}") from exc
        program = process.executable_of(self.command) if words else None
        if program is None or any(c in program for c in "$`;|&<>*?"):
            return
        if "/" in program:
            found = Path(program).is_file()
        else:
            found = process.which(program, path=search_path(self.environ)) is not None
        if not found:
            raise PreflightError(
                f"cmd: program {program!r} not found",
                hint="check the command, or give its full path",
            )

    def describe(self) -> str:
        return f"sh -c {shlex.quote(self.command)} < prompt.md  (also in $RALPH_PROMPT_FILE)"

    def act(self, prompt: str, ctx: ActorContext) -> ActorResult:
        prompt_file = write_prompt(ctx, prompt)
        result = process.run(
            self.command,
            cwd=ctx.workdir,
            env={**(self.environ or {}), **ralph_env(ctx, prompt_file)},
            stdin=prompt,
            wall_timeout=ctx.iteration_timeout,
            idle_timeout=ctx.idle_timeout,
            on_output=ctx.on_output,
            sandbox=self.sandbox,
        )
        output = combined_output(result)
        write_log(ctx, output)
        return ActorResult(
            output=output,
            exit_code=result.exit_code,
            duration_ms=result.duration_ms,
            timed_out=result.timed_out,
            notes=denials(output) if self.sandbox is not None else [],
        )

    def chat_client(self) -> ChatClient | None:
        return None
