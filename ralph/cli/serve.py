"""`ralph mcp`: serve this repository's memory to an agent over MCP (stdio)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ralph.cli.common import memory, raw_stdio
from ralph.errors import ConfigError


def mcp_command(
    project: Annotated[
        Path | None,
        typer.Option(
            "--project",
            metavar="DIR",
            help="Serve the memory of the repository at DIR (default: where ralph starts).",
        ),
    ] = None,
) -> None:
    """Serve ralph's memory (search_reflections, lessons_for, get_reflection, list_loops) as an
    MCP server on stdin/stdout, read-only; needs the extra: pip install 'ralph-reflexion[mcp]'."""
    from ralph.memory.server import serve

    if project is not None and not project.is_dir():
        raise ConfigError(f"--project {project}: not a directory")
    serve(memory(project), *raw_stdio())
