"""`cmd:"COMMAND"`: any program as the actor, plus the helpers every process-backed actor shares.

The prompt goes both on stdin and into `prompt.md` (path in `RALPH_PROMPT_FILE`), so a script can
read whichever suits it; `RALPH_LOOP_ID`, `RALPH_ITERATION` and `RALPH_WORKDIR` say where it is.
The combined output lands in `actor.log` beside the prompt so a failed iteration can be read
after the fact; its last lines are the attempt's summary. A relative program (`./agent.sh`) is
the file in the directory ralph was started in, wherever the attempt runs (`--worktree`, batch),
and an agent that cannot start at its first attempt stops the loop as the configuration error it is.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from ralph import process
from ralph.actors.base import ActorContext, ActorResult
from ralph.actors.tail import last_lines
from ralph.actors.trace import Trajectory
from ralph.errors import ConfigError, PreflightError
from ralph.files import atomic_write_text
from ralph.process import ProcessResult
from ralph.providers.base import ChatClient
from ralph.sandbox import Sandbox, denials

PROMPT_FILE = "prompt.md"
LOG_FILE = "actor.log"
REQUEST_FILE = "request.md"  # what an LLM actor sent: system text, prompt and the files
SUMMARY_LINES = 5  # of a `cmd:` agent's output, its account of the attempt
SUMMARY_CHARS = 500


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
        base_dir: Path | None = None,
        invoked_from: Path | None = None,
    ) -> None:
        command = command.strip()
        if len(command) >= 2 and command[0] == command[-1] and command[0] in "'\"":
            command = command[1:-1].strip()
        if not command:
            raise ConfigError("cmd: actor has no command", hint='use --actor cmd:"./my-agent.sh"')
        # actor_args are appended shell-quoted, so they reach the (last) program as given
        command = f"{command} {shlex.join(actor_args)}" if actor_args else command
        self.command = anchored(command, invoked_from or Path.cwd())
        self.environ = dict(environ) if environ is not None else None
        self.base_dir = base_dir or Path.cwd()  # where an attempt runs
        self.name = f"cmd:{self.command}"
        self.sandbox: Sandbox | None = None  # `actors/confine.confine`
        self._started = False  # an attempt ran: a later exit of 127 is the agent's own

    def preflight(self) -> None:
        """Fail early when the command's program plainly does not exist."""
        try:
            words = shlex.split(self.command)
        except ValueError as exc:
            raise ConfigError(f"cmd: cannot parse {self.command!r}: {exc}") from exc
        program = process.executable_of(self.command) if words else None
        if program is None or any(c in program for c in "$`;|&<>*?"):
            return
        if "/" in program:  # relative: not in the invocation directory (`anchored`)
            path = self.base_dir / Path(program).expanduser()
            found = path.is_file()
            if found and not os.access(path, os.X_OK):
                raise PreflightError(
                    f"cmd: program {program!r} is not executable",
                    hint=f"chmod +x {shlex.quote(program)}",
                )
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
            contain=True,
        )
        output = combined_output(result)
        write_log(ctx, output)
        first, self._started = not self._started, True
        if first and (why := cannot_start(result, process.executable_of(self.command))):
            raise PreflightError(
                f"the agent of --actor {self.name} could not start ({why}); its output is in "
                f"{ctx.artifacts_dir / LOG_FILE}",
                hint="give the program's path from the directory you run ralph in, or an "
                "absolute one, and make it executable (chmod +x)",
            )
        return ActorResult(
            output=output,
            exit_code=result.exit_code,
            duration_ms=result.duration_ms,
            timed_out=result.timed_out,
            summary=summary_of(result),
            # no step stream: the trace keeps the output's end, not a step made of the summary
            trajectory=Trajectory(self.name),
            notes=(denials(output) if self.sandbox is not None else []) + result.notes,
        )

    def chat_client(self) -> ChatClient | None:
        return None


def summary_of(result: ProcessResult) -> str | None:
    """A `cmd:` agent's account of its attempt: the last lines it printed with text in them
    (stdout's, else stderr's; escapes out, redacted: `tail.last_lines`), at most
    `SUMMARY_LINES` and `SUMMARY_CHARS`, and a non-zero exit. None when it printed nothing:
    the record then gets ralph's stand-in, which no lesson or commit quotes."""
    lines = last_lines(result.stdout, SUMMARY_LINES) or last_lines(result.stderr, SUMMARY_LINES)
    while len(lines) > 1 and len("\n".join(lines)) > SUMMARY_CHARS:  # a line is at most ~320
        lines.pop(0)
    text = "\n".join(lines)
    if text and result.timed_out is None and result.exit_code not in (0, None):
        text += f"\n(the agent exited {result.exit_code})"
    return text or None


def anchored(command: str, here: Path) -> str:
    """`command` with a relative program path (`./agent.sh`, `../agents/fix.sh`) made absolute
    when that file is in `here`, the directory ralph was started in: an attempt runs in the
    loop's tree (a worktree under `--worktree` and `ralph batch`), where the path would name
    another file or none. Anything else is left as written."""
    program = process.executable_of(command)
    if not program or "/" not in program or program.startswith(("/", "~")):
        return command
    if any(c in program for c in "$`;|&<>*?") or not (here / program).is_file():
        return command
    joined = here / program
    tidy = Path(os.path.normpath(joined))  # `a/../b` is not `b` when `a` is a symlink
    absolute = str(tidy if tidy.is_file() and tidy.samefile(joined) else joined)
    for written in dict.fromkeys((program, shlex.quote(program), f'"{program}"')):
        start = re.search(rf"(?:^|(?<=\s)){re.escape(written)}(?=\s|$|[;&|<>)])", command)
        if start:
            return command[: start.start()] + shlex.quote(absolute) + command[start.end() :]
    return command


def anchored_spec(spec: str, here: Path) -> str:
    """An `--actor` spec with a `cmd:` program path relative to `here` made absolute
    (`anchored`), for what outlives this directory: a loop's saved settings, which `ralph resume`
    reads from anywhere, and a tasks file's actor. Any other spec is returned as written."""
    kind, sep, rest = spec.strip().partition(":")
    if kind.strip().lower() != "cmd" or not sep:
        return spec
    command = rest.strip()
    if len(command) >= 2 and command[0] == command[-1] and command[0] in "'\"":
        command = command[1:-1].strip()  # as CommandActor reads it
    absolute = anchored(command, here)
    return spec if absolute == command else f"cmd:{absolute}"


NOT_STARTED = {126: "not executable", 127: "not found"}
# a shell's own word that it could not run a program, as dash and bash say it
SHELL_REFUSAL = re.compile(
    r"^\S*sh: (?:line )?(?:\d+: )?(?P<program>.+?): "
    r"(?P<why>not found|command not found|No such file or directory|Permission denied)\s*$",
    re.MULTILINE,
)


def cannot_start(result: ProcessResult, program: str | None) -> str | None:
    """Why a command's program never ran, in a few words, or None: the shell's exit for a
    program not found (127) or not executable (126), or its complaint about the command's own
    program (a pipeline's exit is its last program's). Only meant for a first attempt: later,
    an agent's own exit of 127 is its business."""
    if result.timed_out is None and result.exit_code in NOT_STARTED:
        said = last_lines(result.stderr, 1)  # the shell's own words: which program, and why
        why = f"exit {result.exit_code}: {NOT_STARTED[result.exit_code]}"
        return f"{why}: {said[0]}" if said else why
    for refusal in SHELL_REFUSAL.finditer(result.stderr):
        if program is not None and refusal["program"] == program:
            return f"{refusal['why'].lower()}: {program}"
    return None
