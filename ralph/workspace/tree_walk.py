"""The tree without git, for the fingerprint of an evaluation (`fingerprint.py`): a walk of
(path, size, mtime_ns, ctime_ns, mode) per file, tool and environment folders (`SKIP_NAMES`)
and tools' own files (`TOOL_FILES`) left out, and the bytes of files up to `KEPT_FILE_BYTES`
(`KEPT_TOTAL_BYTES` at most) kept to put them back. Also what both ways share: `TreeChange`,
what an evaluation changed, and `keep_displaced`, the copies kept before anything is put back.
"""

from __future__ import annotations

import contextlib
import fnmatch
import itertools
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ralph.files import AIWG_DIR, private_tmp
from ralph.workspace.locate import memory_root

MAX_WALKED_FILES = 50_000  # without git, a larger tree (a home folder) is not guarded
KEPT_FILE_BYTES = 1 << 20
KEPT_TOTAL_BYTES = 64 << 20
SKIP_NAMES = frozenset(
    {".git", "__pycache__", ".venv", "venv", "node_modules", ".tox", ".nox"}
    | {".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis", "htmlcov"}
)
# files tools write for themselves beside the code: bytecode, pytest-cov's data and report,
# dmypy's status (removing it would orphan the daemon)
TOOL_FILES = ("*.py[co]", ".coverage", ".coverage.*", "coverage.xml", ".dmypy.json")
# both as git ignore rules: the fingerprint's private excludes, and what a loop never commits
# nor counts as the user's uncommitted changes (`trees.py`, `ignored.py`) unless git tracks it
TOOL_RULES = (*TOOL_FILES, *(f"{name}/" for name in sorted(SKIP_NAMES - {".git"})))


def is_tool_file(path: str) -> bool:
    """Whether `path` (from the top, `/`-separated) is what a tool keeps for itself: in a
    `SKIP_NAMES` folder, or named as a `TOOL_FILES` file."""
    *folders, name = path.split("/")
    return any(folder in SKIP_NAMES for folder in folders) or any(
        fnmatch.fnmatchcase(name, pattern) for pattern in TOOL_FILES
    )


Stat = tuple[int, ...]  # size, mtime_ns, ctime_ns, mode


@dataclass
class TreeChange:
    """What an evaluation changed in the tree, and whether it was put back."""

    created: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    written_ns: dict[str, int] = field(default_factory=dict)  # mtime of what was found written
    not_restored: list[str] = field(default_factory=list)
    displaced: Path | None = None  # where copies of what was found written were kept

    def paths(self) -> list[str]:
        return sorted({*self.created, *self.modified, *self.deleted})

    @property
    def restored(self) -> bool:
        return not self.not_restored


class GuardError(Exception):
    pass


def keep_displaced(root: Path, change: TreeChange, folder: Path) -> None:
    """Copies of what was found written, before it is put back, in `folder/<time>/`: the
    writer may have been a person editing while the checks ran, whose edit must not be lost."""
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}-{next(_stamps)}"
    for path in change.created + change.modified:
        source = root / path
        if source.is_file() or source.is_symlink():
            target = folder / stamp / path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target, follow_symlinks=False)
    change.displaced = folder / stamp


_stamps = itertools.count()


# -- the walk ------------------------------------------------------------------------------


@dataclass
class WalkTaken:
    root: Path
    files: dict[str, Stat]
    kept: dict[str, tuple[Stat, bytes]]

    @classmethod
    def take(cls, root: Path, kept: dict[str, tuple[Stat, bytes]]) -> WalkTaken:
        files = dict(itertools.islice(_walk(root), MAX_WALKED_FILES + 1))
        if len(files) > MAX_WALKED_FILES:
            raise GuardError(f"more than {MAX_WALKED_FILES} files outside git")
        budget = KEPT_TOTAL_BYTES
        for path in list(kept):
            if path not in files:
                del kept[path]
        for path, st in files.items():
            size = st[0]
            if size > KEPT_FILE_BYTES or size > budget:
                kept.pop(path, None)
                continue
            if path not in kept or kept[path][0] != st:
                with contextlib.suppress(OSError):
                    kept[path] = (st, _read(root / path, st))
            if path in kept:
                budget -= size
        return cls(root, files, kept)

    def verify(self) -> TreeChange | None:
        now = dict(_walk(self.root))
        change = TreeChange()
        for path in sorted(self.files.keys() | now.keys()):
            old, new = self.files.get(path), now.get(path)
            if old == new:
                continue
            if old is None:
                change.created.append(path)
            elif new is None:
                change.deleted.append(path)
            elif self._same(path, old, new):
                continue
            else:
                change.modified.append(path)
            if new is not None:
                change.written_ns[path] = new[1]
        if not change.paths():
            return None
        self._restore(change)
        return change

    def _same(self, path: str, old: Stat, new: Stat) -> bool:
        """Touched (or its ctime moved) but the same bytes and mode: not a change."""
        kept = self.kept.get(path)
        if kept is None or kept[0] != old or old[3] != new[3]:
            return False
        try:
            return _read(self.root / path, new) == kept[1]
        except OSError:
            return False

    def _restore(self, change: TreeChange) -> None:
        with contextlib.suppress(OSError):
            folder = private_tmp(memory_root(self.root)) / "tree-guard" / "displaced"
            keep_displaced(self.root, change, folder)
        for path in change.created:
            with contextlib.suppress(FileNotFoundError):
                (self.root / path).unlink()
        for path in change.modified + change.deleted:
            kept = self.kept.get(path)
            if kept is None or kept[0] != self.files[path]:
                change.not_restored.append(path)
                continue
            try:
                _put_back(self.root / path, kept[1], kept[0][3])
            except OSError:
                change.not_restored.append(path)


def _walk(root: Path) -> Iterable[tuple[str, Stat]]:
    memory = os.path.join(root, AIWG_DIR)  # ralph's own, as `git add` leaves it out
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [
            d for d in dirnames if d not in SKIP_NAMES and os.path.join(dirpath, d) != memory
        ]
        for name in filenames:
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in TOOL_FILES):
                continue
            full = os.path.join(dirpath, name)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            rel = Path(os.path.relpath(full, root)).as_posix()
            yield rel, (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


def _read(path: Path, st: Stat) -> bytes:
    if stat.S_ISLNK(st[3]):
        return os.readlink(path).encode("utf-8", "surrogateescape")
    return path.read_bytes()


def _put_back(path: Path, data: bytes, mode: int) -> None:
    """`data` at `path` with `mode` (a symlink's target when the mode says so), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        if stat.S_ISLNK(mode):
            os.close(fd)
            os.unlink(tmp)
            os.symlink(data.decode("utf-8", "surrogateescape"), tmp)
        else:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.chmod(tmp, stat.S_IMODE(mode))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
