"""The working tree the actor changes: git (branch, one commit per iteration, rollback, worktrees)
or snapshots without git. The Workspace seam is in base.py.

`open_workspace` picks the implementation; it lives here, above base.py, git.py and
snapshot.py, because it is the one place that knows all three.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from ralph.workspace.base import Workspace
    from ralph.workspace.held import Limits


def open_workspace(root: Path, *, use_git: bool = True, limits: Limits | None = None) -> Workspace:
    """A git workspace inside a git work tree (unless `use_git` is off), else a snapshot one;
    `limits`: what is too large to commit (workspace/held.py)."""
    from ralph.workspace.locate import find_repo_root

    if use_git and find_repo_root(root) is not None:
        from ralph.workspace.git import GitWorkspace

        return GitWorkspace(root, limits)
    from ralph.workspace.snapshot import SnapshotWorkspace

    return SnapshotWorkspace(root)
