"""The typer app: every command is a few lines over a service module.

Errors of the RalphError family are caught once, in `main`, and printed as one line plus a hint;
a traceback only with `--debug` (or RALPH_DEBUG=1).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from ralph import __version__
from ralph.errors import RalphError

if TYPE_CHECKING:
    from rich.console import Console

    from ralph.store import MemoryStore

app = typer.Typer(
    name="ralph",
    help="Run a coding agent in a Reflexion loop until the project's own checks pass.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
reflections_app = typer.Typer(
    help="Read the episodic memory: list, show, validate and search reflections.",
    no_args_is_help=True,
)
app.add_typer(reflections_app, name="reflections")

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")]


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


def console(stderr: bool = False) -> Console:
    """Rich on a terminal; plain lines without a TTY or with CI=true."""
    from rich.console import Console

    plain = os.environ.get("CI", "").lower() == "true" or os.environ.get("NO_COLOR") is not None
    return Console(stderr=stderr, no_color=plain, highlight=False, soft_wrap=plain)


def store_here() -> MemoryStore:
    from ralph.store import MemoryStore

    return MemoryStore.discover()


def print_json(data: Any) -> None:
    import json

    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


# reflections -------------------------------------------------------------------------------
@reflections_app.command("list")
def reflections_list(
    loop: Annotated[str | None, typer.Option("--loop", help="List this loop's iterations.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List loops (id, task, status, iterations, best reward, updated) or one loop's iterations."""
    from ralph import views

    store = store_here()
    store.require()
    if loop:
        views.list_iterations(store, loop, console(), as_json=as_json)
    else:
        views.list_loops(store, console(), as_json=as_json)


@reflections_app.command("show")
def reflections_show(
    loop: Annotated[str, typer.Argument(help="Loop id (see `ralph reflections list`).")],
    iteration: Annotated[
        int | None, typer.Argument(help="Iteration number; default the last one.", min=0)
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Show one iteration record: actions, failing checks, the reflection, insights, lessons."""
    from ralph import views

    store = store_here()
    store.require()
    views.show_record(store, loop, iteration, console(), as_json=as_json)


@reflections_app.command("validate")
def reflections_validate(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Files or directories; default all of .aiwg/ralph/reflections."),
    ] = None,
) -> None:
    """Validate records (and state files) against the schemas; exit 1 if any is invalid."""
    from ralph import views

    store = store_here()
    if not paths:
        store.require()
        paths = [store.base / "reflections", store.base / "loops"]
    raise typer.Exit(views.validate_paths(paths, console()))


# init --------------------------------------------------------------------------------------
@app.command()
def init(
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing config.")] = False,
) -> None:
    """Write .aiwg/ralph/config.yaml with the checks detected in this repository."""
    from ralph import detect

    store = store_here()
    path, checks = detect.write_config(store, force=force)
    out = console()
    out.print(f"wrote {path}")
    for check in checks:
        out.print(f"  check {check.name}: {check.command}")
    if not checks:
        out.print("  no pytest, mypy or ruff configuration found: add checks to the file")


def fail(error: RalphError) -> NoReturn:
    sys.stderr.write(f"ralph: error: {error.message}\n")
    if error.hint:
        sys.stderr.write(f"hint: {error.hint}\n")
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
            sys.stderr.write(f"ralph: internal error: {type(error).__name__}: {error}\n")
            sys.stderr.write("hint: run again with `ralph --debug ...` for the traceback\n")
            sys.exit(2)
        show()
        sys.exit(int(getattr(error, "exit_code", 2)))
    sys.exit(code if isinstance(code, int) else 0)
