"""What an attempt leaves in the tree that ralph does not commit: a file over the size limit
(`max_file_mb`, 50 MB) and a flood of new files (more than `max_new_files`, 10,000, in one
attempt: their new folders are left out whole). Found by one `git status` (sizes from `lstat`,
no file read), left out of every staging by pathspec, and named in the iteration's notes; the
files stay in the work tree, untouched.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ralph.glyphs import plural

if TYPE_CHECKING:
    from ralph.config import Settings
    from ralph.workspace.base import GitCommands

MB = 1_000_000


@dataclass(frozen=True)
class Limits:
    file_bytes: int = 50 * MB
    new_files: int = 10_000

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        """The loop's: `max_file_mb`, `max_new_files`."""
        return cls(int(settings.max_file_mb * MB), settings.max_new_files)


@dataclass
class HeldBack:
    """Pathspecs `git add` leaves out, and what they are, one sentence each."""

    pathspecs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def held_back(
    git: GitCommands, top: Path, exclude: str, limits: Limits, env: Mapping[str, str]
) -> HeldBack:
    """What of the work tree (outside `exclude`, ralph's memory) is not to be committed."""
    status = ("status", "--porcelain", "-z", "--no-renames", "--ignore-submodules")
    entries = git.names(*status, "--untracked-files=all", "--", ".", exclude, env=env)
    found = HeldBack()
    big: set[str] = set()
    for entry in entries:
        path = entry[3:]
        if entry[:2].strip() == "D":
            continue
        try:
            size = os.lstat(top / path).st_size
        except OSError:
            continue
        if size > limits.file_bytes:
            big.add(path)
            found.pathspecs.append(f":(exclude,literal){path}")
            found.notes.append(
                f"not committed: {path} ({size / MB:,.0f} MB, over the limit of "
                f"{limits.file_bytes / MB:,.0f} MB, max_file_mb); it stays in the tree"
            )
    new = [entry[3:] for entry in entries if entry.startswith("?? ") and entry[3:] not in big]
    if len(new) > limits.new_files:
        folders = git.names(*status, "--untracked-files=normal", "--", ".", exclude, env=env)
        tops = [e[3:].rstrip("/") for e in folders if e.startswith("?? ") and e[3:] not in big]
        found.pathspecs += [f":(exclude,literal){path}" for path in tops]
        found.notes.append(
            f"not committed: {plural(len(new), 'new file')} (over the limit of "
            f"{limits.new_files:,}, max_new_files), in {_some(tops)}; they stay in the tree"
        )
    return found


def _some(paths: list[str], shown: int = 3) -> str:
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return ", ".join(paths[:shown]) + more
