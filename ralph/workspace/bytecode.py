"""Bytecode an attempt left in the tree, set aside before the checks; and ralph's own bytecode
folders kept out of an agent's reach.

Python imports a sourceless `calc.pyc`, and a package `calc/__init__.pyc` wins over `calc.py`
beside it; a `__pycache__/` file with the source's recorded mtime and size is trusted as the
code. Git ignores them (`tree_walk.TOOL_FILES`), so an agent's forged bytecode is never seen in a
diff and stays in the user's checkout. `set_aside` moves what the attempt wrote (changed after
`since`, by the inode's ctime, which no process can set back) out of the tree into the
iteration's folder, before the checks run: they import the code from its source. A user's own
bytecode from before the attempt is left where it is, and so is bytecode git tracks.

Without a sandbox, an agent can also write the checks' bytecode folder (`files.bytecode_env`:
`.aiwg/ralph/tmp/pycache/`), which every check trusts. `touched_since` says whether anything in
it changed after the last evaluation ended (`CheckSuite` then empties it before the next one);
under the sandbox `.aiwg` is read-only to the agent.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from ralph.files import AIWG_DIR
from ralph.process import capture
from ralph.workspace.tree_walk import SKIP_NAMES

BYTECODE = (".pyc", ".pyo")
PYCACHE = "__pycache__"
# where a project keeps its environment: what is installed there is not the attempt's bytecode
ENVIRONMENTS = SKIP_NAMES - {PYCACHE, ".git"}


def set_aside(root: Path, since_ns: int, into: Path) -> list[str]:
    """Move the bytecode files under `root` changed at or after `since_ns` (a sourceless `.pyc`
    or one in `__pycache__/`) to `into`, keeping their paths; their paths, from the top."""
    memory = root / AIWG_DIR
    kept = tracked(root)
    moved: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [
            d for d in dirnames if d not in ENVIRONMENTS and d != ".git" and here / d != memory
        ]
        for name in filenames:
            if not name.endswith(BYTECODE):
                continue
            path = here / name
            rel = path.relative_to(root)
            if rel.as_posix() in kept:  # the user's, like any tracked file: the attempt's work
                continue
            try:
                if os.lstat(path).st_ctime_ns < since_ns:
                    continue
                (into / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.move(path, into / rel)
            except OSError:
                continue
            moved.append(rel.as_posix())
        if here.name == PYCACHE or any(m.startswith(f"{here.relative_to(root)}/") for m in moved):
            with contextlib.suppress(OSError):
                here.rmdir()  # a folder left empty (`calc/`: an empty one is no package)
    return moved


def tracked(root: Path) -> frozenset[str]:
    """The bytecode files git tracks under `root` (none without git), from the top of `root`;
    the tree's own git settings (fsmonitor, hooks) are not run."""
    found = capture(
        ["git", "-c", "core.fsmonitor=false", "ls-files", "-z", "--", "*.pyc", "*.pyo"],
        cwd=root,
        timeout=60,
    )
    if found is None or found.exit_code != 0:
        return frozenset()
    return frozenset(name for name in found.stdout.decode("utf-8", "replace").split("\0") if name)


def touched_since(folder: Path, since_ns: int) -> bool:
    """Whether anything in `folder` was created, written, renamed or linked at or after
    `since_ns` (by ctime, which a process cannot set back)."""
    for dirpath, _dirnames, filenames in os.walk(folder):
        for name in [".", *filenames]:
            with contextlib.suppress(OSError):
                if os.lstat(os.path.join(dirpath, name)).st_ctime_ns >= since_ns:
                    return True
    return False
