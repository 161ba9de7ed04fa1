"""What every command shares: where output goes (a rich console, plain without a terminal or in
CI; JSON), the project's memory, and the argument types used by several commands."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from ralph.memory.store import MemoryStore

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")]
LoopArg = Annotated[str, typer.Argument(help="Loop id (see `ralph reflections list`).")]
IterationArg = Annotated[
    int | None, typer.Argument(help="Iteration number; default the last one.", min=0)
]


def console(stderr: bool = False) -> Console:
    """Rich on a terminal; plain lines without a TTY or with CI=true. Text is wrapped only on
    a terminal (or at an explicit COLUMNS): a pipe or a file gets whole lines, not lines cut
    at 80 columns."""
    from rich.console import Console

    plain = os.environ.get("CI", "").lower() == "true" or os.environ.get("NO_COLOR") is not None
    out = Console(stderr=stderr, no_color=plain, highlight=False, soft_wrap=plain)
    if not out.is_terminal and "COLUMNS" not in os.environ:
        out.soft_wrap = True
    return out


def print_json(data: Any) -> None:
    """One JSON document on stdout: what `--json` prints, for scripts and CI."""
    import json

    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n")


def memory(start: Path | None = None) -> MemoryStore:
    """The project's memory (`MemoryStore.discover`), imported late so `--help` stays fast."""
    from ralph.memory.store import MemoryStore

    return MemoryStore.discover(start)
