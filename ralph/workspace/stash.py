"""A user's uncommitted work kept as a stash entry when a loop starts over it (`--allow-dirty`),
without touching a file or the user's index."""

from __future__ import annotations

import tempfile
from pathlib import Path

from ralph.workspace.trees import Trees, in_chunks


def stash_user_changes(trees: Trees, where: str) -> str:
    """Your uncommitted work exactly as it is, as a stash entry: the index (what you staged),
    the work tree, and the untracked files apart, like `git stash push -u` would keep them,
    but without touching a file. On your branch, `git stash apply --index` brings back what
    was staged as staged, unstaged as unstaged and untracked as untracked."""
    git = trees.git
    head = git.rev("HEAD") or ""
    index_tree = git.text("write-tree")  # the user's own index, as it is
    index = trees.commit(index_tree, [head], f"index on {where}")
    with trees.scratch() as env:
        git.run("add", "-u", "--", ".", trees.exclude, env=env)
        work_tree = git.text("write-tree", env=env)
    untracked = git.names(
        "ls-files", "--others", "--exclude-standard", "-z", "--", ".", trees.exclude
    )
    parents = [head, index]
    if untracked:
        with tempfile.TemporaryDirectory(prefix="ralph-index-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            for chunk in in_chunks(untracked):
                git.run("add", "-f", "--", *chunk, env=env)
            tree = git.text("write-tree", env=env)
        parents.append(trees.commit(tree, [], f"untracked files on {where}"))
    message = f"ralph: uncommitted changes on {where}"
    stash = trees.commit(work_tree, parents, message)
    git.run("stash", "store", "-m", message, stash)
    return stash
