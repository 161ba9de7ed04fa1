"""Where the repository is: its top, and the main working tree behind a linked worktree.

Asked of `git rev-parse` directly (no GitPython import): every command that reads the memory
asks this first, so it stays cheap.
"""

from __future__ import annotations

from pathlib import Path

from ralph.files import AIWG_DIR
from ralph.process import capture

REV_PARSE_TIMEOUT = 30.0


def _rev_parse(start: Path, *args: str) -> list[str] | None:
    """`git rev-parse ARGS` in `start`, its output lines; None outside git or without git."""
    done = capture(["git", "-C", str(start), "rev-parse", *args], timeout=REV_PARSE_TIMEOUT)
    if done is None or done.exit_code != 0:
        return None
    return done.stdout.decode("utf-8", "surrogateescape").splitlines()


def _start(path: Path) -> Path | None:
    start = path if path.is_dir() else path.parent
    return start if start.is_dir() else None


def find_repo_root(path: Path) -> Path | None:
    """The top of the git work tree holding `path`, or None (no repo, bare repo, no git)."""
    start = _start(path)
    lines = _rev_parse(start, "--show-toplevel") if start else None
    return Path(lines[0]) if lines and lines[0] else None


def main_worktree(path: Path) -> Path | None:
    """The main working tree of the repository holding `path` (its own top, unless `path` is in
    a linked worktree); None outside git or for a bare repository."""
    start = _start(path)
    lines = (
        _rev_parse(start, "--path-format=absolute", "--show-toplevel", "--git-common-dir")
        if start
        else None
    )
    if not lines or len(lines) < 2 or not lines[0]:
        return None
    return main_of(Path(lines[0]), Path(lines[1]))


def main_of(top: Path, common: Path) -> Path:
    """The main working tree, from a work tree's top and its `--git-common-dir` (absolute)."""
    return common.parent if common.name == ".git" else top


def memory_root(start: Path) -> Path:
    """Where the project's memory (`.aiwg/ralph`) lives: the main working tree's top in git,
    also from a subfolder or a linked worktree (where `ralph run --worktree` works), so every
    command reads what the loops write; outside git the nearest folder upwards holding it, else
    `start`. Here, not in memory/store, so `ralph check` finds it before loading the store."""
    here = start.resolve()
    main = main_worktree(here)
    if main is not None:
        return main
    for candidate in (here, *here.parents):
        if (candidate / AIWG_DIR).is_dir():
            return candidate
    return here
