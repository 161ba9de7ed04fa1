"""Back onto a loop's branch (resume, a killed start adopted): git's stale locks refused first,
then the branch checked out with `.aiwg/ralph/` keeping its bytes across the switch."""

from __future__ import annotations

import contextlib
from pathlib import Path

from ralph.errors import PreflightError
from ralph.workspace.base import GitCommands, name_some
from ralph.workspace.trees import Trees


def refuse_stale_locks(git: GitCommands, branch: str) -> None:
    """A git command killed mid-way (say, with a kill -9 of the whole loop) leaves its lock
    file; git then refuses every commit. Say so before an attempt is spent, not after."""
    names = ["HEAD.lock", "index.lock"] + ([f"refs/heads/{branch}.lock"] if branch else [])
    for name in names:
        found = Path(git.text("rev-parse", "--path-format=absolute", "--git-path", name))
        if found.exists():
            raise PreflightError(
                f"git is locked: {found} exists (left by an interrupted git command?)",
                hint="if no git command is running in this repository, delete that file "
                "and resume again",
            )


def checkout_loop_branch(trees: Trees, branch: str) -> None:
    """Check out the loop branch again; `.aiwg/ralph/` keeps its bytes across the switch."""
    git = trees.git
    refuse_stale_locks(git, branch)
    if not branch or git.current_branch() == branch:
        return
    if not git.ok("rev-parse", "-q", "--verify", f"refs/heads/{branch}"):
        raise PreflightError(f"the loop branch {branch} is gone", hint="start a new loop")
    dirty = trees.dirty()
    if dirty:
        raise PreflightError(
            f"cannot switch to {branch}: uncommitted changes: {name_some(dirty, 10)}",
            hint="commit or stash them, then resume again",
        )
    touched = git.names(
        "diff", "--name-only", "-z", "--no-renames", "HEAD", f"refs/heads/{branch}",
        "--", trees.memory,
    )  # fmt: skip
    top = git.toplevel
    saved = {name: _read_or_none(top / name) for name in touched}
    for name in touched:  # out of checkout's way; written back below
        with contextlib.suppress(FileNotFoundError):
            (top / name).unlink()
    if touched:
        git.run("reset", "-q", "HEAD", "--", *[f":(literal){n}" for n in touched])
    git.run("checkout", "-q", branch)
    for name, data in saved.items():
        path = top / name
        if data is None:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes() if path.is_file() else None
    except OSError:
        return None
