"""The typer app: the commands of `loops`, `reflections` and `many`, registered in the order
`--help` lists them; every command is a few lines over a service module.

Errors of the RalphError family are caught once, in `main`, and printed as one line plus a hint;
a traceback only with `--debug` (or RALPH_DEBUG=1).
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, NoReturn

import typer

from ralph import __version__
from ralph.cli import doctor, examples, finish, hook, loops, many, project, reflections, serve
from ralph.cli.common import clean
from ralph.errors import RalphError

app = typer.Typer(
    name="ralph",
    help="Run a coding agent in a Reflexion loop until the project's own checks pass.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion; loop ids complete (common.complete_loop_id)
    rich_markup_mode=None,  # plain help: no <bool> or boxes, readable at 80 columns and in pipes
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120},
)

app.command()(loops.run)
app.command()(loops.resume)
app.command()(loops.status)
app.command()(loops.abort)
app.command()(project.check)
app.command("doctor")(doctor.doctor_command)
app.command()(project.init)
app.command()(project.demo)
app.command()(finish.apply)
app.command()(finish.prune)
app.add_typer(reflections.reflections_app, name="reflections")
app.command("trace")(reflections.trace_command)
app.command("prompt")(reflections.prompt_command)
app.command()(reflections.feedback)
app.command()(many.analyze)
app.command("batch")(many.batch_command)
app.command("bench")(many.bench_command)
app.command("mcp")(serve.mcp_command)
app.add_typer(hook.hook_app, name="hook")
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


def fail(error: RalphError) -> NoReturn:
    sys.stderr.write(f"ralph: error: {clean(error.message)}\n")
    if error.hint:
        sys.stderr.write(f"hint: {clean(error.hint)}\n")
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
            sys.stderr.write(
                f"ralph: internal error: {type(error).__name__}: {clean(str(error))}\n"
            )
            sys.stderr.write("hint: run again with `ralph --debug ...` for the traceback\n")
            sys.exit(2)
        show()
        sys.exit(int(getattr(error, "exit_code", 2)))
    sys.exit(code if isinstance(code, int) else 0)
