"""Another git process's write caught half done: a failure that passes in a moment, retried.

`git worktree add` writes the new entry's `.git/worktrees/<id>/commondir` by open, truncate,
write; every git command that lists the worktrees (another `worktree add`, `worktree remove`,
`worktree list`, `branch -D`, a checkout of an existing branch) reads each entry's
`commondir`, and caught between that open and that write it reads an empty file and dies:
`fatal: failed to read .git/worktrees/<id>/commondir: Success` (git's die_errno with errno 0).
Loops started at once with `--worktree` (`ralph batch`, two terminals, a CI job) meet it: one
`worktree add` in fifty failed so with six adding at once on two cores kept busy. git dies
there before it changes anything, so `Git.run` runs such a command again after a short,
growing pause; a file that stays empty (a `worktree add` killed mid-write) still fails after
`PAUSES`, with a hint.
"""

from __future__ import annotations

import re
import time

HALF_WRITTEN = re.compile(r"failed to read (?P<entry>\S*worktrees/[^/\s]+)/commondir")
PAUSES = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)  # seconds between tries: about 3 s in all


def half_written(stderr: str) -> str | None:
    """The worktree entry (`.git/worktrees/<id>`) git found half written, if that is why it
    failed."""
    found = HALF_WRITTEN.search(stderr)
    return found.group("entry") if found else None


def pause(seconds: float) -> None:
    """The wait before the next try (the other process finishes its write meanwhile)."""
    time.sleep(seconds)
