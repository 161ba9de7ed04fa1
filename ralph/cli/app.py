"""The typer app: the commands of `loops`, `reflections` and `many`, registered in the order
`--help` lists them; every command is a few lines over a service module.

Errors of the RalphError family are caught once, in `main`, and printed as one line plus a hint;
a traceback only with `--debug` (or RALPH_DEBUG=1).
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any, NoReturn

import typer

from ralph import __version__
from ralph.cli import doctor, examples, finish, hook, loops, many, project, reflections, serve
from ralph.cli.common import console
from ralph.errors import RalphError
from ralph.rendering import Wrapped

app = typer.Typer(
    name="ralph",
    help="Run a coding agent in a Reflexion loop until the project's own checks pass.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion; loop ids complete (common.complete_loop_id)
    rich_markup_mode=None,  # plain help: no <bool> or boxes, readable at 80 columns and in pipes
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120},
)

# what `ralph --help` lists, whole at 80 columns (click would cut each docstring at ~45
# characters with "...")
SHORT_HELP = {
    "run": "Run the loop on TASK until the checks pass.",
    "resume": "Continue a paused or crashed loop.",
    "status": "One loop's state, rewards, usage and branch.",
    "abort": "End a loop for good (a running one is stopped).",
    "check": "Run the checks once; exit 0 when green.",
    "doctor": "Can a loop start here? Every finding, with hints.",
    "init": "Detect the checks, run them once, write the config.",
    "demo": "The whole loop offline on a small buggy repository.",
    "apply": "Stage a loop's best iteration on this branch.",
    "prune": "Delete finished loops' branches and worktrees.",
    "trace": "What the agent did in an attempt, step by step.",
    "prompt": "The prompt an iteration's actor got.",
    "feedback": "Your verdict on a finished loop, kept as memory.",
    "analyze": "Learning curves and what the memory taught.",
    "batch": "Many tasks, each a loop in its own worktree.",
    "bench": "Does the memory help? Arms compared by success@k.",
    "mcp": "Serve the memory to an agent as MCP tools.",
    "reflections": "The episodic memory: list, show, search, export.",
    "hook": "Hooks for interactive agents (Claude Code's Stop).",
}


def _command(name: str) -> Any:
    return app.command(name, short_help=SHORT_HELP[name])


_command("run")(loops.run)
_command("resume")(loops.resume)
_command("status")(loops.status)
_command("abort")(loops.abort)
_command("check")(project.check)
_command("doctor")(doctor.doctor_command)
_command("init")(project.init)
_command("demo")(project.demo)
_command("apply")(finish.apply)
_command("prune")(finish.prune)
app.add_typer(reflections.reflections_app, name="reflections", short_help=SHORT_HELP["reflections"])
_command("trace")(reflections.trace_command)
_command("prompt")(reflections.prompt_command)
_command("feedback")(reflections.feedback)
_command("analyze")(many.analyze)
_command("batch")(many.batch_command)
_command("bench")(many.bench_command)
_command("mcp")(serve.mcp_command)
app.add_typer(hook.hook_app, name="hook", short_help=SHORT_HELP["hook"])

SUB_HELP = {
    "list": "Loops, or one loop's iterations (--loop).",
    "show": "One iteration's record and what the memory knows.",
    "validate": "Check records and states against the schemas.",
    "search": "Reflections of every loop ranked for QUERY.",
    "obsolete": "Keep a reflection's lessons out of prompts.",
    "lessons": "What the memory teaches, and whether it helped.",
    "import": "Merge records from another machine.",
    "export": "Copy loops' records into a .zip or a folder.",
    "claude-stop": "Claude Code's Stop hook: stop only when green.",
    "claude": "Add `ralph hook claude-stop` as Claude's Stop hook.",
}


def _shorten(group: typer.Typer) -> None:
    """Give each command of a group, and of its groups, its short help."""
    for info in group.registered_commands:
        info.short_help = SUB_HELP[info.name or ""]
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            _shorten(sub.typer_instance)


_shorten(reflections.reflections_app)
_shorten(hook.hook_app)
examples.attach_all(app)


def _version(value: bool) -> None:
    if value:
        print(f"ralph {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False,
) -> None:
    if debug:
        os.environ["RALPH_DEBUG"] = "1"


def say(*texts: str) -> None:
    """An error and its hint on stderr: on a terminal wrapped between words under their indent
    (the terminal would split a loop id or a word), whole lines in a pipe; cleaned by the
    console (redacted, escapes taken out)."""
    out = console(stderr=True)
    for text in texts:
        out.print(Wrapped(text), crop=False)


def fail(error: RalphError) -> NoReturn:
    say(f"ralph: error: {error.message}", *([f"hint: {error.hint}"] if error.hint else []))
    say(*error.after)  # a loop the error paused: `ralph resume`, and the way back
    sys.exit(error.exit_code)


def main() -> None:
    """Console-script entry point: run the app, turn errors into one line and an exit code."""
    try:
        code = app(standalone_mode=False)
    except RalphError as error:
        if os.environ.get("RALPH_DEBUG"):
            raise
        fail(error)
    except (KeyboardInterrupt, typer.Abort):
        print("ralph: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as error:
        # Usage errors of the CLI parser (typer's vendored click): they know how to show
        # themselves; exit 2 like every other usage error.
        show = getattr(error, "show", None)
        if os.environ.get("RALPH_DEBUG"):
            raise
        if show is None:
            say(
                f"ralph: internal error: {type(error).__name__}: {error}",
                "hint: run again with `ralph --debug ...` for the traceback",
            )
            sys.exit(2)
        show()
        sys.exit(int(getattr(error, "exit_code", 2)))
    sys.exit(code if isinstance(code, int) else 0)
