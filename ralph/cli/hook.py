"""`ralph hook …`: ralph inside an interactive agent. `claude-stop` is Claude Code's Stop hook
(the checks decide whether Claude may stop: loop/stop_hook.py); `install claude` adds it to the
project's `.claude/settings.json`."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from ralph.cli.common import clean, console, print_json
from ralph.errors import RalphError

hook_app = typer.Typer(
    help="Hooks for interactive agents: let the project's checks decide when Claude may stop.",
    no_args_is_help=True,
)
install_app = typer.Typer(help="Install a hook into an agent's settings.", no_args_is_help=True)
hook_app.add_typer(install_app, name="install")


@hook_app.command("claude-stop")
def claude_stop(
    max_blocks: Annotated[
        int,
        typer.Option(
            "--max-blocks",
            min=1,
            metavar="N",
            help="Let Claude stop after this many blocked stops in a row.",
        ),
    ] = 5,
    project: Annotated[
        Path | None,
        typer.Option(
            "--project",
            metavar="DIR",
            help="The project the hook serves (default: $CLAUDE_PROJECT_DIR, else here); a "
            "`cwd` outside it is refused.",
        ),
    ] = None,
) -> None:
    """Claude Code's Stop hook: reads the hook's JSON on stdin, runs ralph's checks in its
    `cwd`; blocks the stop with the failing checks' diagnostics, lets it happen when they pass."""

    from ralph.loop.stop_hook import decide, hook_project, parse_input, read_input

    hook = parse_input(read_input(sys.stdin))  # unreadable or too large: one line, exit 2
    try:
        answer = decide(hook, max_blocks=max_blocks, project=hook_project(project, os.environ))
    except RalphError as error:  # the checks cannot run: never trap Claude on ralph's problem
        message = f"ralph: error: {clean(error.message)}"
        sys.stderr.write(message + "\n")
        answer = {"systemMessage": message + " (the stop was not judged)"}
    if answer is not None:  # through the one output exit: redacted, control characters escaped
        print_json(answer)


@install_app.command("claude")
def install_claude(
    project: Annotated[
        Path | None,
        typer.Option(
            "--project", metavar="DIR", help="The project (default: the repository here)."
        ),
    ] = None,
) -> None:
    """Add `ralph hook claude-stop` as a Stop hook to .claude/settings.json, keeping what is
    there; running it again changes nothing."""
    from ralph.loop.assembly import project_root
    from ralph.loop.stop_hook import install_claude as install

    path, changed = install(project_root(project))
    what = "added the Stop hook to" if changed else "the Stop hook is already in"
    console().print(f"{what} {path}", markup=False, soft_wrap=True)
