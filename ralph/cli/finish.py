"""After a loop: `apply` (take its work onto your branch) and `prune` (drop finished loops'
branches and worktrees; records stay)."""

from __future__ import annotations

from typing import Annotated

import typer

from ralph.cli.common import JsonFlag, LoopArg, console, loop_in, memory, print_json


def apply(
    loop: LoopArg,
    iteration: Annotated[
        int | None,
        typer.Option("--iteration", help="Apply this iteration; default the best.", min=1),
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="Apply the best iteration of a loop that did not succeed."),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Bring a loop's best (or chosen) iteration onto the current branch as uncommitted changes,
    as `git merge --squash` would; refuses a tree with uncommitted changes, and a loop that did
    not succeed unless --iteration or --force says so. Applying a success counts as accepted."""
    from ralph.loop.handoff import apply_loop

    store = memory()
    store.require()
    done = apply_loop(store, loop_in(store, loop), iteration, force=force)
    if as_json:
        print_json(done.to_json())
        raise typer.Exit(1 if done.conflicts else 0)
    out = console()
    where = f"iteration {done.iteration} of {done.loop_id} ({done.commit[:12]})"
    if not done.files and not done.conflicts:
        out.print(f"nothing to apply: this branch has {where} already", markup=False)
        return
    count = f"{len(done.files)} file{'' if len(done.files) == 1 else 's'}"
    out.print(f"applied {where}: {count}, staged, not committed", markup=False, soft_wrap=True)
    for name in done.files[:20]:
        out.print(f"  {name}", markup=False)
    if len(done.files) > 20:
        out.print(f"  ... {len(done.files) - 20} more", markup=False)
    if done.conflicts:
        out.print(
            f"conflicts in {', '.join(done.conflicts)}: resolve them and commit, or undo with "
            "`git reset --merge`",
            markup=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)
    out.print("review: git diff --cached    commit: git commit", markup=False)
    if done.accepted:
        out.print("counted as accepted (feedback: implicitly, by apply)", markup=False)


def prune(
    loops: Annotated[
        list[str] | None, typer.Argument(help="Only these loops; default every finished loop.")
    ] = None,
    keep: Annotated[
        int, typer.Option("--keep", help="Keep the N most recent finished loops' branches.", min=0)
    ] = 0,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only list what would be removed.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Delete finished loops' branches, worktrees and rescue refs; never records, never a
    running or paused loop's. A branch dropped unapplied and unmerged counts as not taken."""
    from ralph.loop.handoff import plan_prune
    from ralph.loop.handoff import prune as remove

    store = memory()
    store.require()
    items = plan_prune(store, keep, [loop_in(store, name) for name in loops or []])
    if not dry_run:
        remove(store, items)
    if as_json:
        print_json({"dry_run": dry_run, "loops": [item.to_json() for item in items]})
        return
    out = console()
    verb = "would remove" if dry_run else "removed"
    gone = [item for item in items if not item.kept]
    for item in items:
        if item.kept:
            out.print(f"kept {item.loop_id}: {item.kept}", markup=False, soft_wrap=True)
            continue
        what = []
        if item.worktree:
            what.append(f"worktree {item.worktree}")
        if item.branch:
            what.append(f"branch {item.branch} (was {(item.branch_commit or '')[:12]})")
        if item.rescue_refs:
            what.append(f"{len(item.rescue_refs)} rescue ref(s)")
        taken = ", not taken" if item.not_taken else ""
        out.print(
            f"{verb} {', '.join(what)}  [{item.loop_id}, {item.status}{taken}]",
            markup=False,
            soft_wrap=True,
        )
    if not gone:
        out.print("nothing to prune", markup=False)
    elif not dry_run:
        out.print(
            f"{len(gone)} loop(s) pruned; their records stay in {store.base / 'reflections'}",
            markup=False,
            soft_wrap=True,
        )
