"""`ralph run --dry-run`'s screen: the actor's command line and the checks with their roles on
stderr, the first prompt on stdout exactly as the actor would get it (so `> prompt.md` keeps
just the prompt); `--json`: one object with all of it."""

from __future__ import annotations

from typing import Any

from ralph.cli.common import console, print_json, text_out


def show_preview(task: str, flags: dict[str, Any], *, as_json: bool) -> int:
    from ralph.cli.progress import check_progress
    from ralph.loop.preview import preview_run

    names = _check_names(flags)
    with check_progress(names, enabled=not as_json) as done:
        preview = preview_run(task, flags, on_done=done)
    if as_json:
        print_json(preview.to_json())
        return 0
    err = console(stderr=True)
    err.print(f"actor    {preview.actor}", markup=False, soft_wrap=True)
    err.print(f"command  {preview.command}", markup=False, soft_wrap=True)
    err.print("checks (baseline on the untouched tree):", markup=False)
    rows = preview.checks()
    width = max((len(row["name"]) for row in rows), default=0)
    for row in rows:
        role = row["role"] or "-"
        err.print(
            f"  {row['name']:<{width}}  {row['status']:<5}  {role:<6}  {row['command']}",
            markup=False,
            soft_wrap=True,
        )
    for note in preview.notes:
        err.print(f"note: {note}", markup=False, soft_wrap=True)
    if preview.prompt is None:
        err.print(
            "nothing to do: no target fails on the untouched tree (the loop would end at once, "
            "exit 0, already_green)",
            markup=False,
            soft_wrap=True,
        )
        return 0
    err.print(
        "dry run: the first prompt follows; no actor ran, no branch or record was made",
        markup=False,
        soft_wrap=True,
    )
    text_out().write(preview.prompt if preview.prompt.endswith("\n") else preview.prompt + "\n")
    return 0


def _check_names(flags: dict[str, Any]) -> list[str]:
    """The checks the baseline will run, for the progress view (empty if settings are bad:
    preview_run then says why)."""
    from ralph import config
    from ralph.errors import RalphError
    from ralph.loop.assembly import project_root
    from ralph.memory.store import MemoryStore

    try:
        home = MemoryStore.discover(project_root()).root
        return [c.name for c in config.load(home, flags).all_checks()]
    except RalphError:
        return []
