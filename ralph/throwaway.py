"""An agent's configuration as a throwaway copy for one sandboxed run.

An agent CLI must write its own state (`~/.claude`, `~/.claude.json`, `~/.codex`, ...): a
session, a counter, a refreshed login. The same places hold what runs outside the sandbox
later (a Claude hook, an MCP server, a codex `notify` command), so an agent that may write them
could plant a command the reflector, a judge or the user's next session runs. The sandbox binds
a copy instead (made in its private TMPDIR, gone with it); afterwards what changed in the copy
is named ("the agent changed ~/.claude/settings.json: dropped"), and only a login the CLI
refreshed (its credentials file, still JSON) is written back, so a rotated token is not lost.
Session histories and caches are left out of the copy: they can be large, and a fresh
attempt needs none of them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ralph.files import write_atomically

# What a CLI keeps for itself and needs for no new run: not copied, and its changes not named.
HISTORY = frozenset(
    {"projects", "todos", "shell-snapshots", "file-history", "debug", "statsig", "logs"}
    | {"log", "sessions", "archived_sessions", "history.jsonl", "tmp", "cache", ".cache"}
    | {"telemetry", "storage", "snapshot", "paste-cache", "ide", "session-env", "checkpoints"}
    | {"backups"}
)
# What a CLI rewrites on every run for its own bookkeeping (codex's databases and ids, lock
# files): copied, but a change to it is no change the agent made, so it is not named (codex's
# every attempt was "the agent changed ~/.codex/.sandbox_migration, ... and 56 more").
BOOKKEEPING = re.compile(
    r"(?:\.sqlite|\.sqlite-wal|\.sqlite-shm|\.db|\.db-journal|\.lock|\.pid)$"
    r"|^(?:installation_id|\.sandbox_migration|models_cache\.json|version\.json|\.tmp)$"
)
# Keys of a JSON configuration a CLI bumps itself (~/.claude.json's numStartups and caches).
BOOKKEEPING_KEYS = re.compile(r"^(?:num|cached|last|first|tips|has|is)[A-Z]|(?:Count|At)$|^userID$")
LARGEST = 16 * 1024 * 1024  # a bigger file is a cache or a history: not copied
# A login the CLI may refresh (a rotated token): written back when it changed and is JSON.
CREDENTIALS = frozenset(
    {".credentials.json", "auth.json", "oauth_creds.json", "google_accounts.json"}
)
MAX_NAMED = 8
MAX_KEYS = 4

Stamp = tuple[int, int]  # size, modification time (ns)


@dataclass(frozen=True)
class Copy:
    """One place (a directory or a file) and its copy, with what the copy held at the start."""

    original: Path
    copy: Path
    before: dict[str, Stamp]


def make(places: Sequence[Path], into: Path) -> list[Copy]:
    """A copy of each existing place under `into` (a place that does not exist is left to the
    sandbox's empty HOME: the CLI may create it there, and it is dropped with it)."""
    copies: list[Copy] = []
    for number, place in enumerate(places):
        if not place.exists():
            continue
        target = into / str(number) / place.name
        target.parent.mkdir(parents=True, exist_ok=True)
        if place.is_dir():
            with contextlib.suppress(shutil.Error):  # what could not be read stays out
                shutil.copytree(place, target, symlinks=True, ignore=_ignored, dirs_exist_ok=True)
            _empty_histories(place, target)
        else:
            shutil.copy2(place, target)
        copies.append(Copy(place, target, dict(_stamps(target))))
    return copies


def _ignored(folder: str, names: list[str]) -> set[str]:
    skipped = {name for name in names if name in HISTORY}
    for name in names:
        try:
            found = os.lstat(os.path.join(folder, name))
        except OSError:
            skipped.add(name)
            continue
        plain = stat.S_ISREG(found.st_mode) or stat.S_ISDIR(found.st_mode)
        if found.st_size > LARGEST or not (plain or stat.S_ISLNK(found.st_mode)):
            skipped.add(name)  # a cache, or a socket or fifo: nothing to copy
    return skipped


def _empty_histories(place: Path, target: Path) -> None:
    """A history folder left out is there empty, as a CLI that writes in it expects."""
    for folder, dirs, _ in os.walk(place):
        for name in dirs:
            if name in HISTORY:
                relative = Path(folder, name).relative_to(place)
                with contextlib.suppress(OSError):
                    (target / relative).mkdir(parents=True, exist_ok=True)
        dirs[:] = [name for name in dirs if name not in HISTORY]


def _stamps(root: Path) -> Iterator[tuple[str, Stamp]]:
    if not root.is_dir():
        with_stat = root.lstat()
        yield "", (with_stat.st_size, with_stat.st_mtime_ns)
        return
    for folder, dirs, files in os.walk(root):
        dirs[:] = [name for name in dirs if name not in HISTORY]
        for name in files:
            if name in HISTORY:
                continue
            path = Path(folder, name)
            try:
                stat = path.lstat()
            except OSError:
                continue
            yield str(path.relative_to(root)), (stat.st_size, stat.st_mtime_ns)


def settle(copies: Sequence[Copy], home: Path | None) -> list[str]:
    """After the run: write back a refreshed login, and one note naming what else the agent
    changed in its configuration (dropped with the copy); no note when nothing changed."""
    changed: list[str] = []
    kept: list[str] = []
    for one in copies:
        after = dict(_stamps(one.copy)) if one.copy.exists() else {}
        for relative in sorted(set(one.before) | set(after)):
            if one.before.get(relative) == after.get(relative):
                continue
            original = one.original / relative if relative else one.original
            copied = one.copy / relative if relative else one.copy
            if relative and _write_back(copied, original):
                kept.append(_shown(original, home))
            elif not BOOKKEEPING.search(copied.name):
                keys = _keys(original, copied)
                if keys is not None:
                    changed.append(_shown(original, home) + keys)
    notes = []
    if changed:
        more = f" and {len(changed) - MAX_NAMED} more" if len(changed) > MAX_NAMED else ""
        named = ", ".join(changed[:MAX_NAMED]) + more
        notes.append(f"sandbox: the agent changed {named} (its configuration): dropped")
    if kept:
        notes.append(f"sandbox: kept the agent's refreshed login in {', '.join(kept)}")
    return notes


def _keys(original: Path, copied: Path) -> str | None:
    """For a JSON object the agent changed, which of its keys: ` (mcpServers, projects)`;
    None when only the CLI's own bookkeeping changed (counters, caches)."""
    try:
        before = json.loads(original.read_text(encoding="utf-8"))
        after = json.loads(copied.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return ""
    keys = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    keys = [k for k in keys if not BOOKKEEPING_KEYS.search(str(k))]
    if not keys:
        return None
    more = f", +{len(keys) - MAX_KEYS}" if len(keys) > MAX_KEYS else ""
    return f" ({', '.join(str(k) for k in keys[:MAX_KEYS])}{more})" if keys else ""


def _write_back(copied: Path, original: Path) -> bool:
    """A credentials file the CLI rewrote (a refreshed token), still a JSON object, over one
    that exists: written back. Anything else is dropped."""
    if copied.name not in CREDENTIALS or not original.is_file() or copied.is_symlink():
        return False
    try:
        text = copied.read_text(encoding="utf-8")
        if not isinstance(json.loads(text), dict):
            return False
        write_atomically(original, text, mode=original.stat().st_mode & 0o777)
    except (OSError, ValueError):
        return False
    return True


def _shown(path: Path, home: Path | None) -> str:
    if home is not None and path.is_relative_to(home):
        return "~/" + str(path.relative_to(home))
    return str(path)
