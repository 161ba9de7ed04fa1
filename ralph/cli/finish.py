"""After a loop: `apply` (take its work onto your branch) and `prune` (drop finished loops'
branches and worktrees; records stay)."""

from __future__ import annotations

from typing import Annotated

import typer

from ralph.cli.common import JsonFlag, OptionalLoopArg, loop_in, memory, show


def apply(
    loop: OptionalLoopArg = None,
    iteration: Annotated[
        int | None,
        typer.Option(
            "--iteration", metavar="N", help="Apply this iteration; default the best.", min=1
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="Apply the best iteration of a loop that did not succeed."),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Bring a loop's best (or chosen) iteration onto the current branch as staged, uncommitted
    changes, as `git merge --squash` would, from the loop's starting point (default: the latest
    loop, as `status`). Your uncommitted edits the loop started from (--allow-dirty) are merged
    with its work: the tree has both, the index the loop's changes alone; your other
    uncommitted files stay as they are. Refuses staged changes, any other uncommitted change to
    a file the loop changed, and a loop that did not succeed unless --iteration or --force says
    so. Applying a success counts as accepted."""
    from ralph.loop.handoff import apply_loop

    store = memory()
    store.require()
    done = apply_loop(store, loop_in(store, loop or "latest"), iteration, force=force)
    show(done, as_json=as_json)
    if done.conflicts:
        raise typer.Exit(1)


def prune(
    loops: Annotated[
        list[str] | None, typer.Argument(help="Only these loops; default every finished loop.")
    ] = None,
    keep: Annotated[
        int,
        typer.Option(
            "--keep", metavar="N", help="Keep the N most recent finished loops' branches.", min=0
        ),
    ] = 0,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only list what would be removed.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Delete finished loops' branches, worktrees and rescue refs; never records, never a
    running or paused loop's. A branch dropped unapplied and unmerged counts as not taken."""
    from ralph.loop.handoff import Pruned, plan_prune
    from ralph.loop.handoff import prune as remove

    store = memory()
    store.require()
    items = plan_prune(store, keep, [loop_in(store, name) for name in loops or []])
    if not dry_run:
        remove(store, items)
    show(Pruned(dry_run, items, store.base / "reflections"), as_json=as_json)
