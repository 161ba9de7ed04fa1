"""The workspace outside git: hash every file at the start of an iteration and diff against it.

No branch, no commits, no rollback: the loop's lifecycle is a no-op here, and `changes()` still
reports what the actor really did, file by file.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ralph.errors import RalphError
from ralph.files import RACY_NS
from ralph.workspace.base import ChangeKind, ChangeSet, FileChange, GitState, GivenBack

SNAPSHOT_MAX_BYTES = 1 << 20  # larger files are hashed, not kept for diffing
SKIP_NAMES = frozenset(
    {".git", ".aiwg", "__pycache__", ".venv", "venv", "node_modules"}
    | {".mypy_cache", ".pytest_cache", ".ruff_cache"}
)


@dataclass
class _FileState:
    size: int
    mtime_ns: int
    digest: str
    content: bytes | None  # zlib-compressed; None when too large to keep


class SnapshotWorkspace:
    """Outside git: hash every file at the start of an iteration and diff against that."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._base: dict[str, _FileState] = {}
        self._taken_ns = 0

    # the loop's lifecycle: nothing to prepare, nothing to return to
    def preflight_loop(self, loop_id: str, *, allow_dirty: bool) -> None:
        return None

    def start_loop(self, loop_id: str, *, allow_dirty: bool) -> GitState | None:
        return None

    def resume_loop(self, git: GitState | None, loop_id: str, iteration: int) -> list[str]:
        return []

    def end_loop(self, git: GitState) -> GivenBack | None:
        return None

    def begin_iteration(self) -> None:
        now = time.time_ns()
        self._base = self._scan(self._base, self._taken_ns)
        self._taken_ns = now

    def changes(self) -> ChangeSet:
        current = self._scan(self._base, self._taken_ns)
        files: list[FileChange] = []
        for path in sorted(self._base.keys() | current.keys()):
            old, new = self._base.get(path), current.get(path)
            if old is not None and new is not None and old.digest == new.digest:
                continue
            kind: ChangeKind = (
                "created" if old is None else "deleted" if new is None else "modified"
            )
            files.append(_text_change(path, kind, old, new))
        return ChangeSet(files)

    def original(self, path: str) -> bytes | None:
        state = self._base.get(path)
        if state is None:
            return None
        if state.content is None:
            raise RalphError(f"{path} is too large to keep outside git", hint="use git")
        return zlib.decompress(state.content)

    def put_back(self, paths: Sequence[str]) -> None:
        """Written back from the snapshot of `begin_iteration` (files over 1 MiB are not kept
        there: those need git); a file that was not there is removed."""
        for name in paths:
            path = self.root / name
            data = self.original(name)
            if data is None:
                path.unlink(missing_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)

    def commit_iteration(self, message: str) -> str | None:
        return None

    def restore(self, commit: str) -> None:
        raise RalphError("rollback needs git", hint="run ralph inside a git repository")

    def current_commit(self) -> str | None:
        return None

    def _scan(self, previous: dict[str, _FileState], taken_ns: int) -> dict[str, _FileState]:
        """Reuse an entry when size and mtime match and it was not touched near the snapshot."""
        states: dict[str, _FileState] = {}
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_NAMES)
            for name in filenames:
                if name in SKIP_NAMES or name.endswith(".pyc"):
                    continue
                full = os.path.join(dirpath, name)
                rel = Path(os.path.relpath(full, self.root)).as_posix()
                try:
                    st = os.lstat(full)
                    prev = previous.get(rel)
                    if (
                        prev is not None
                        and (prev.size, prev.mtime_ns) == (st.st_size, st.st_mtime_ns)
                        and st.st_mtime_ns < taken_ns - RACY_NS
                    ):
                        states[rel] = prev
                        continue
                    data = os.readlink(full).encode() if os.path.islink(full) else _read(full)
                except OSError:  # vanished or unreadable: not ours to report
                    continue
                kept = zlib.compress(data, 1) if len(data) <= SNAPSHOT_MAX_BYTES else None
                digest = hashlib.sha256(data).hexdigest()
                states[rel] = _FileState(st.st_size, st.st_mtime_ns, digest, kept)
        return states


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _text_change(
    path: str, kind: ChangeKind, old: _FileState | None, new: _FileState | None
) -> FileChange:
    if any(s is not None and s.content is None for s in (old, new)):
        return FileChange(path, kind, 0, 0, "(file too large to diff)")
    before, after = (zlib.decompress(s.content) if s and s.content else b"" for s in (old, new))
    if b"\0" in before[:8192] or b"\0" in after[:8192]:
        return FileChange(path, kind, 0, 0, "binary file")
    lines = list(
        difflib.unified_diff(
            before.decode("utf-8", "replace").splitlines(),
            after.decode("utf-8", "replace").splitlines(),
            "/dev/null" if old is None else f"a/{path}",
            "/dev/null" if new is None else f"b/{path}",
            lineterm="",
        )
    )
    added = sum(1 for line in lines[2:] if line.startswith("+"))
    deleted = sum(1 for line in lines[2:] if line.startswith("-"))
    return FileChange(path, kind, added, deleted, "\n".join(lines))
