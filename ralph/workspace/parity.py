"""Worktree parity: a fresh worktree holds only what git tracks, so files git ignores that the
project needs (a `_version.py` written at install time, a `.env`) exist in the user's checkout
and not in a loop's worktree. `.worktreeinclude` (Claude Code's file, gitignore syntax, at the
repository's top) names the ignored files to copy; `worktree_setup` runs a command that makes
them; `missing_ignored` names what still differs, for the preflight's message;
`worktree_misses` the uncommitted edits of tracked files the worktree will not see.

git does every match (`git ls-files`), never a gitignore matcher of ralph's own.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ralph.errors import PreflightError
from ralph.process import OutputCallback, run
from ralph.workspace.base import name_some
from ralph.workspace.git import Git, GitWorkspace

INCLUDE_FILE = ".worktreeinclude"
# ignored things a worktree lacking them explains nothing: caches, environments, build output
NOT_A_CAUSE = frozenset(
    {"__pycache__", ".venv", "venv", "env", ".env.d", "node_modules", ".git", ".aiwg"}
    | {".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis", ".tox", ".nox", ".eggs"}
    | {".cache", "build", "dist", "htmlcov", ".coverage", ".idea", ".vscode", ".DS_Store"}
)
NOT_A_CAUSE_SUFFIXES = (".egg-info", ".pyc", ".pyo", ".log", ".swp", ".orig", ".rej")
SETUP_TAIL_LINES = 5
CHECKOUT_VARIABLE = "RALPH_CHECKOUT"  # the user's checkout, for a setup that copies from it
# `pip install -e .` (or `uv pip install --editable`) in a worktree re-points the environment the
# user's checkout shares at the worktree: `import pkg` then loads the loop's copy, and fails once
# the worktree is pruned (seen on python-dateutil)
EDITABLE_INSTALL = re.compile(r"\bpip\s+install\b[^;&|]*\s(?:-e|--editable)(?:\s|=|$)")
MEMORY_DIR = ".aiwg/"


@dataclass
class Copied:
    """What copying the included files did: copied paths, and those left alone and why."""

    copied: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def included_files(top: Path) -> list[str]:
    """The files `.worktreeinclude` names that git ignores in the checkout at `top`.

    A file must match a pattern and be ignored, as in Claude Code: a tracked file is never
    listed (`--others`), nor an untracked one that is not ignored."""
    include = top / INCLUDE_FILE
    if not include.is_file():
        return []
    git = Git(top)
    matched = git.names("ls-files", "-z", "--others", "--ignored", f"--exclude-from={include}")
    if not matched:
        return []
    not_ignored = set(git.names("ls-files", "-z", "--others", "--exclude-standard"))
    # ralph's own memory stays in the checkout: a loop's worktree records there, not a copy
    return sorted(p for p in matched if p not in not_ignored and not p.startswith(MEMORY_DIR))


def copy_included(top: Path, workdir: Path) -> Copied:
    """Copy the included files from the checkout at `top` into the worktree at `workdir`.

    Modes are kept and a symlink is copied as the link (never followed); a path whose folder
    leads out of either tree through a symlink, or that the worktree already has, is skipped."""
    done = Copied()
    source_top, target_top = top.resolve(), workdir.resolve()
    for rel in included_files(top):
        source, target = top / rel, workdir / rel
        if not _inside(source.parent, source_top) or not _inside(target.parent, target_top):
            done.skipped.append(f"{rel} (outside the repository)")
            continue
        if os.path.lexists(target):
            done.skipped.append(f"{rel} (the worktree has it)")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            os.symlink(os.readlink(source), target)
        elif source.is_file():
            shutil.copy2(source, target, follow_symlinks=False)
        else:
            continue
        done.copied.append(rel)
    return done


def _inside(path: Path, top: Path) -> bool:
    return path.resolve().is_relative_to(top)


def ignored_entries(top: Path) -> list[str]:
    """Ignored files and folders (`dir/`, a folder git ignores whole) of the checkout at `top`,
    caches and environments left out: what a fresh worktree would lack."""
    git = Git(top)
    entries = git.names(
        "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"
    )
    return [entry for entry in entries if not _not_a_cause(entry)]


def missing_ignored(top: Path, workdir: Path, limit: int = 10) -> list[str]:
    """`ignored_entries` the worktree at `workdir` lacks, at most `limit`; Python files first,
    since a missing module is what stops tests from collecting."""
    missing = [e for e in ignored_entries(top) if not os.path.lexists(workdir / e.rstrip("/"))]
    missing.sort(key=lambda entry: (not entry.endswith(".py"), entry.count("/"), entry))
    return missing[:limit]


def _not_a_cause(entry: str) -> bool:
    parts = entry.rstrip("/").split("/")
    return any(p in NOT_A_CAUSE or p.endswith(NOT_A_CAUSE_SUFFIXES) for p in parts)


def editable_install_warning(command: str) -> str | None:
    """A warning when `worktree_setup` installs the worktree editable into a shared
    environment; None for any other command."""
    if EDITABLE_INSTALL.search(command) is None:
        return None
    return (
        f"worktree_setup `{command}` installs the worktree into the environment your checkout "
        "uses too: afterwards your checkout's imports load the loop's copy (and fail once "
        "`ralph prune` removes it); copy the files instead (.worktreeinclude, or a command with "
        f"${CHECKOUT_VARIABLE}), or give the worktree loops a virtual environment of their own"
    )


def run_setup(
    command: str,
    workdir: Path,
    checkout: Path,
    *,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    on_output: OutputCallback | None = None,
) -> int:
    """Run `worktree_setup` in the new worktree before its baseline, with the user's checkout
    as `$RALPH_CHECKOUT`; its duration in ms.

    A failure or a timeout is the user's to fix before any agent call: one line naming the
    command and the tail of its output."""
    env = {**(env or {}), CHECKOUT_VARIABLE: str(checkout)}
    result = run(command, cwd=workdir, env=env, wall_timeout=timeout, on_output=on_output)
    if result.ok:
        return result.duration_ms
    why = (
        f"timed out after {timeout:g}s"
        if result.timed_out and timeout
        else f"exit code {result.exit_code}"
    )
    lines = (result.stdout + "\n" + result.stderr).strip().splitlines()
    tail = " | ".join(line.strip() for line in lines[-SETUP_TAIL_LINES:] if line.strip())
    raise PreflightError(
        f"worktree_setup `{command}` failed in {workdir} ({why})" + (f": {tail}" if tail else ""),
        hint="fix or remove the command (worktree_setup in the config, RALPH_WORKTREE_SETUP)",
    )


def worktree_misses(checkout: Path) -> str | None:
    """A worktree loop starts from HEAD in a fresh checkout: untracked files of `checkout` never
    stop it, and uncommitted edits of tracked files only warn, since it does not see them."""
    edited = GitWorkspace(checkout).dirty_files(untracked=False)
    if not edited:
        return None
    return (
        f"warning: the worktree starts at HEAD, without your uncommitted edits in "
        f"{checkout}: {name_some(edited, 5)}"
    )
