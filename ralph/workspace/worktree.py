"""Linked worktrees for `ralph run --worktree`: a loop works in its own checkout."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path

from ralph.errors import PreflightError
from ralph.files import forget_bytecode, write_atomically
from ralph.ids import validate_loop_id
from ralph.workspace.git import Git, base_branch_path
from ralph.workspace.locate import find_repo_root, main_worktree

WORKTREES_DIR = "ralph-worktrees"  # under the git dir: see add_worktree


def add_worktree(root: Path, loop_id: str) -> Path:
    """A new worktree for `loop_id` at HEAD (detached; the loop then makes its branch there,
    and takes the checkout's branch, noted in the worktree's git dir, as the one it started from).

    It lives under the repository's git dir, `.git/ralph-worktrees/<loop-id>`: not inside the
    main working tree, where every pytest, ruff, mypy or `git status` run there would walk into
    a second copy of the project, and not beside the repository, where ralph may not be allowed
    to write and where copies would outlive the repository. Git itself keeps its worktree
    bookkeeping in that same directory.
    """
    validate_loop_id(loop_id)
    top = find_repo_root(root)
    if top is None:
        raise PreflightError(
            "--worktree needs a git repository", hint="run inside one, or drop --worktree"
        )
    git = Git(top)
    if not git.ok("rev-parse", "-q", "--verify", "HEAD^{commit}"):
        raise PreflightError(
            "the git repository has no commits yet",
            hint="commit something first (git commit --allow-empty -m init)",
        )
    common = Path(git.text("rev-parse", "--path-format=absolute", "--git-common-dir"))
    path = common / WORKTREES_DIR / loop_id
    if path.exists():
        raise PreflightError(f"worktree {path} exists already", hint="use another --loop-id")
    branch = git.current_branch()  # the loop's work is for it: `ralph apply` merges there
    git.run("worktree", "add", "-q", "--detach", str(path), "HEAD")
    if branch:
        with contextlib.suppress(OSError):  # unwritable: the state names no base branch
            write_atomically(base_branch_path(Git(path), loop_id), branch + "\n")
    return path


def remove_worktree(path: Path, *, force: bool = False) -> bool:
    """`git worktree remove` (refuses a tree with changes unless `force`); True when gone."""
    top = main_worktree(path)
    if top is None:
        return False
    args = ["worktree", "remove", *(["--force"] if force else []), str(path)]
    gone = Git(top).run(*args, check=False)[0] == 0
    if gone:
        forget_bytecode(top, path)
    return gone


PYTHON_PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg")


def import_path(workdir: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """`PYTHONPATH` for the checks of a loop working in a linked worktree: its own code first.

    A project installed editable (`pip install -e .`) is imported from the main tree, so in a
    worktree the tests would check the user's checkout, never the agent's changes, and a loop
    could neither succeed nor fail for the right reason. The worktree's `src/` (src layout),
    else its top, goes before whatever `PYTHONPATH` already holds. Empty where `workdir` is not a
    linked worktree or holds no Python project."""
    main = main_worktree(workdir)
    if main is None or main.resolve() == workdir.resolve():
        return {}
    if not any((workdir / name).is_file() for name in PYTHON_PROJECT_FILES):
        return {}
    code = workdir / "src" if (workdir / "src").is_dir() else workdir
    existing = environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": os.pathsep.join([str(code), existing]) if existing else str(code)}
