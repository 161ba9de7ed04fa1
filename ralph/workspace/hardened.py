"""What ralph's own git commands never run of the repository's configuration.

An agent working in the tree can write `.git/config` (without a sandbox) and `.gitattributes`:
a `core.fsmonitor` program, a `core.hooksPath` or a hook, a filter driver's clean, smudge or
process command would then run inside ralph's git commands, after the attempt, outside its
timeouts and sandbox, with ralph's environment. Every git command of ralph's (`git.Git.run`,
the judge's diff) takes `options(top)`: fsmonitor and hooks off, and the filter drivers the
repository's own config defines turned into no-ops. Drivers of the user's global config
(git-lfs) stay: they are the user's, not the tree's. Diffs ralph reads pass `--no-ext-diff
--no-textconv`.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from ralph import process

ALWAYS = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null")
DRIVER_KEYS = r"^filter\..*\.(clean|smudge|process)$"
CONFIG_TIMEOUT = 30.0
_seen: dict[Path, tuple[tuple[int, int, int] | None, tuple[str, ...]]] = {}


def options(top: Path) -> list[str]:
    """The `-c` options for a git command in the repository at `top` (read again only when its
    config file changed: one stat per command)."""
    config = _config_file(str(top))
    if config is None:
        return list(ALWAYS)
    stamp = _stamp(config)
    known = _seen.get(config)
    if known is None or known[0] != stamp:
        known = _seen[config] = (stamp, _local_drivers(top) if stamp is not None else ())
    off: list[str] = []
    for name in known[1]:
        for key, value in (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false")):
            off += ["-c", f"filter.{name}.{key}={value}"]
    return [*ALWAYS, *off]


@functools.cache
def _config_file(top: str) -> Path | None:
    """The repository's own config file (a linked worktree's is its common directory's)."""
    done = process.capture(
        ["git", "-C", top, "rev-parse", "--path-format=absolute", "--git-common-dir"],
        timeout=CONFIG_TIMEOUT,
    )
    if done is None or done.exit_code != 0:
        return None
    return Path(os.fsdecode(done.stdout.strip())) / "config"


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _local_drivers(top: Path) -> tuple[str, ...]:
    """The filter drivers `.git/config` defines a command for."""
    done = process.capture(
        ["git", "-C", str(top), "config", "--local", "-z", "--get-regexp", DRIVER_KEYS],
        timeout=CONFIG_TIMEOUT,
    )
    if done is None or done.exit_code not in (0, 1):  # 1: none
        return ()
    names = []
    for entry in done.stdout.split(b"\0"):
        key = os.fsdecode(entry.split(b"\n", 1)[0])
        if key.startswith("filter.") and key.count(".") >= 2:
            names.append(key[len("filter.") : key.rindex(".")])
    return tuple(dict.fromkeys(names))
