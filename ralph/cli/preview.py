"""`ralph run --dry-run`'s screen: the actor's command line and the checks with their roles on
stderr, the first prompt on stdout exactly as the actor would get it (so `> prompt.md` keeps
just the prompt); `--json`: one object with all of it."""

from __future__ import annotations

from typing import Any

from ralph import config
from ralph.cli.common import console, show, text_out
from ralph.cli.progress import check_progress
from ralph.errors import RalphError
from ralph.loop.assembly import project_root
from ralph.loop.preview import preview_run
from ralph.memory.store import MemoryStore


def show_preview(task: str, flags: dict[str, Any], *, as_json: bool) -> int:
    names = _check_names(flags)
    with check_progress(names, enabled=not as_json) as done:
        preview = preview_run(task, flags, on_done=done)
    if as_json:
        show(preview, as_json=True)
        return 0
    console(stderr=True).print(preview, crop=False)
    if preview.prompt is not None:
        text_out().write(preview.prompt if preview.prompt.endswith("\n") else preview.prompt + "\n")
    return 0


def _check_names(flags: dict[str, Any]) -> list[str]:
    """The checks the baseline will run, for the progress view (empty if settings are bad:
    preview_run then says why)."""
    try:
        home = MemoryStore.discover(project_root()).root
        return [c.name for c in config.load(home, flags).all_checks()]
    except RalphError:
        return []
