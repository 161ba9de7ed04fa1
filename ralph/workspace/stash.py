"""A user's uncommitted work kept as a stash entry when a loop starts over it (`--allow-dirty`),
without touching a file or the user's index; given back, exactly, when the loop ends. Untracked
files are never in it: they stay where they are (`ignored.untracked_at_start`)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from ralph.workspace.base import GitState, GivenBack
from ralph.workspace.trees import Trees


def stash_user_changes(trees: Trees, where: str) -> str:
    """Your uncommitted work exactly as it is, as a stash entry: the index (what you staged)
    and the work tree, like `git stash push` would keep them, but without touching a file. On
    your branch, `git stash apply --index` brings back what was staged as staged and unstaged
    as unstaged. Untracked files are not in it: they stay in place, yours, never the loop's
    (`ignored.untracked_at_start`)."""
    git = trees.git
    head = git.rev("HEAD") or ""
    index_tree = git.text("write-tree")  # the user's own index, as it is
    index = trees.commit(index_tree, [head], f"index on {where}")
    with trees.scratch() as env:
        git.run("add", "-u", "--", ".", trees.exclude, env=env)
        work_tree = git.text("write-tree", env=env)
    message = f"ralph: uncommitted changes on {where}"
    stash = trees.commit(work_tree, [head, index], message)
    git.run("stash", "store", "-m", message, stash)
    return stash


def give_back(trees: Trees, state: GitState) -> GivenBack | None:
    """Back on the branch the loop started from, the uncommitted work `--allow-dirty` saved
    applied exactly as it was (staged, unstaged, untracked) and its stash entry dropped.

    Left on the loop's branch, the user's files would stay inside its starting-point commit:
    `git switch` would delete their untracked files and `apply` would count their edits as the
    loop's work. Only from a clean tree on the loop's branch, to a branch still where it was;
    otherwise nothing moves and the note says how to get the work back."""
    git, saved = trees.git, state.user_changes
    if not saved or not state.branch or not state.original_commit:
        return None
    if saved not in git.text("stash", "list", "--format=%H").split():
        return None  # given back already (or dropped by the user)
    kept = GivenBack(state.user_changes_note(held=False) or "", restored=False)
    where = state.original_branch or state.original_commit[:12]
    if git.current_branch() != state.branch or trees.dirty(untracked=False):  # untracked: yours
        return kept
    branch = state.original_branch
    if branch and git.rev(f"refs/heads/{branch}") != state.original_commit:
        return kept
    modes = _modes_of_saved(trees, saved)  # git keeps only 644 and 755: a 600 stays 600
    target = [branch] if branch else ["--detach", state.original_commit]
    if git.run("checkout", "-q", *target, check=False)[0] != 0:
        return kept
    status, _, err = git.run("stash", "apply", "--index", "-q", saved, check=False)
    for path, mode in modes.items():
        with contextlib.suppress(OSError):
            if path.is_file() and not path.is_symlink() and path.stat().st_mode != mode:
                path.chmod(mode & 0o7777)
    if status != 0:
        first = (err.strip().splitlines() or ["no output"])[0]
        return GivenBack(
            f"back on {where}, but `git stash apply --index {saved[:12]}` failed ({first}): "
            "your uncommitted changes stay saved in `git stash list`",
            restored=False,
        )
    entries = git.text("stash", "list", "--format=%H").split()
    if saved in entries:  # wherever newer entries have pushed it
        git.run("stash", "drop", "-q", f"stash@{{{entries.index(saved)}}}")
    return GivenBack(
        f"back on {where} with your uncommitted changes as they were (staged and unstaged; "
        f"untracked files never left); the loop's work is on {state.branch}",
        restored=True,
    )


def _modes_of_saved(trees: Trees, saved: str) -> dict[Path, int]:
    """The file modes of what the stash entry `saved` holds, as they are in the tree."""
    git = trees.git
    names = git.names("diff", "--name-only", "-z", "--no-renames", f"{saved}^1", saved)
    if git.rev(f"{saved}^3") is not None:  # its untracked files
        names += git.names("ls-tree", "-r", "-z", "--name-only", f"{saved}^3")
    modes: dict[Path, int] = {}
    for name in names:
        path = git.toplevel / name
        with contextlib.suppress(OSError):
            if path.is_file() and not path.is_symlink():
                modes[path] = path.stat().st_mode
    return modes
