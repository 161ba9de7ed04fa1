"""The tree before and after an evaluation: a check that wrote to it is found and undone.

Checks are run read-only (ruff `--no-fix`, caches in ralph's scratch folder), but a project's
configuration or a shell check can still write: a `fix = true` deleted a user's uncommitted
line once. So every evaluation (`CheckSuite.run_checks`) takes the tree's fingerprint first and
compares after; whatever changed is put back byte for byte and named.

In git, the tree (tracked and untracked-not-ignored files, the user's uncommitted edits
included; ralph's memory, bytecode and the tool and environment folders of `SKIP_NAMES` left
out) is written as a tree object through a private index with `git add -A`: incremental, git
re-hashes only files whose stat (size, mtime, ctime, inode, mode) changed since the last
evaluation, and keeps exactly the bytes needed to put a file back. The index and a private
git directory live in ralph's scratch folder (`.aiwg/ralph/tmp/tree-guard/`; the repository's
objects read as alternates, its info/exclude copied), so the user's index, object store and
config are untouched. Content filters and end-of-line
conversion are off (the private `info/attributes`, which wins over the tree's
.gitattributes): a file is kept and put back as its bytes. Git records a file's executable
bit, not its other mode bits; empty directories a check created are left.

What was found written is copied to `.aiwg/ralph/tmp/tree-guard/displaced/<time>/` before it
is put back: a person saving a file while the checks run looks like a check writing it, and
their edit must not be lost.

Without git the tree is walked (`tree_walk.py`; tool and environment folders left out): (path,
size, mtime_ns, ctime_ns, mode) per file, and the bytes of files up to `KEPT_FILE_BYTES`, kept
in memory across evaluations and read again only when a file's stat changed, `KEPT_TOTAL_BYTES`
at most: a larger file is found changed but not put back, and said so. A tree of more than
`MAX_WALKED_FILES` files outside git (a home folder) is not guarded at all.

Cost (2 cores shared with other work, load ~2): take and verify of a clean tree together, in
a fresh process as `ralph check` has it / in a loop (one guard, its index warm).
bench/evaluator.py's project (65 files): without git 2 ms / 1 ms; in git 15-25 ms / 9-12 ms
(one `git rev-parse` per guard, `git add -A` and `write-tree` at the take, `git add -A` after).
A 5,000-file tree: in git 40-50 ms / ~40 ms (each `git add -A` about a `git status`; the first
evaluation ever hashes the tree, ~0.2 s), without git ~185 ms / ~115 ms (bytes read once per
process). Two thirds of it (the take) come before the first check starts; a tree that changed
is put back in another ~25 ms.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ralph import process
from ralph.files import AIWG_DIR, private_tmp
from ralph.workspace.locate import main_of
from ralph.workspace.tree_walk import (
    TOOL_RULES,
    GuardError,
    Stat,
    WalkTaken,
    keep_displaced,
)
from ralph.workspace.tree_walk import TreeChange as TreeChange  # what `take` callers get back

# the user's settings for their own git commands that would redirect or reread the guard's
USER_GIT_VARIABLES = (
    "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR",
    "GIT_NAMESPACE", "GIT_GLOB_PATHSPECS", "GIT_NOGLOB_PATHSPECS", "GIT_ICASE_PATHSPECS",
)  # fmt: skip
RAW_ATTRIBUTES = "* -text -eol -filter -ident -working-tree-encoding\n"
STORE_MAX_AGE = 7 * 24 * 3600.0  # seconds: an older store is dropped and built again
GIT_TIMEOUT = 300.0
GIT_OPTIONS = (
    "-c", "core.autocrlf=false", "-c", "core.safecrlf=false", "-c", "core.fileMode=true",
    "-c", "core.symlinks=true", "-c", "core.splitIndex=false", "-c", "core.fsmonitor=false",
    "-c", "core.untrackedCache=false", "-c", "gc.auto=0", "-c", "core.quotePath=false",
)  # fmt: skip


class Taken(Protocol):
    def verify(self) -> TreeChange | None:
        """Compare with the tree now; put back what changed (None: nothing did)."""
        ...


class TreeGuard:
    """Fingerprints a tree before an evaluation; `Taken.verify` compares and restores after."""

    def __init__(self) -> None:
        self._repos: dict[Path, _Repo | None] = {}
        self._kept: dict[Path, dict[str, tuple[Stat, bytes]]] = {}  # without git: the bytes

    def take(self, cwd: Path) -> Taken | None:
        """The fingerprint of `cwd`'s tree; None when it cannot be taken (then nothing is
        verified: the evaluation itself must not fail for the guard's sake)."""
        try:
            key = cwd.resolve()
            if key not in self._repos:
                self._repos[key] = _Repo.find(key)
            repo = self._repos[key]
            if repo is not None:
                return _GitTaken.take(repo)
            return WalkTaken.take(key, self._kept.setdefault(key, {}))
        except (OSError, GuardError):  # no git program, an unreadable tree, git failing
            return None


# -- in git -----------------------------------------------------------------------------------


@dataclass
class _Repo:
    top: Path
    objects: Path  # the repository's object store, read as an alternate
    exclude: Path  # its info/exclude, copied: what the user ignores stays out
    memory: Path  # where ralph's memory is (the main working tree's top)

    @classmethod
    def find(cls, cwd: Path) -> _Repo | None:
        if "GIT_DIR" not in os.environ and not any(
            (folder / ".git").exists() for folder in (cwd, *cwd.parents)
        ):
            return None  # no git process to learn it (`ralph check` outside git)

        res = process.run(
            ["git", "rev-parse", "--path-format=absolute", "--show-toplevel",
             "--git-common-dir", "--git-path", "objects", "--git-path", "info/exclude"],
            cwd=cwd, wall_timeout=GIT_TIMEOUT,
        )  # fmt: skip
        lines = res.stdout.splitlines()
        if res.exit_code != 0 or len(lines) < 4:
            return None
        top = Path(lines[0])  # the memory at the main tree's top: locate.memory_root in git
        return cls(top, Path(lines[2]), Path(lines[3]), main_of(top, Path(lines[1])))

    def store(self) -> Path:
        """`.aiwg/ralph/tmp/tree-guard/<tree>/`: the private index, and a private git
        directory whose objects are the repository's plus what the guard adds, and whose
        `info/attributes` turns every filter and end-of-line conversion off (it wins over the
        tree's .gitattributes): what is kept is the file's bytes, for every git version."""
        import binascii  # not hashlib: its import is on `ralph check`'s way to its checks

        name = f"{self.top.name}-{binascii.crc32(os.fsencode(self.top)):08x}"
        folder = private_tmp(self.memory) / "tree-guard" / name
        with contextlib.suppress(OSError):
            if time.time() - (folder / "index").stat().st_mtime > STORE_MAX_AGE:
                _remove(folder)
        gitdir = folder / "git"
        if not (gitdir / "HEAD").is_file():
            for sub in ("objects/info", "refs", "info"):
                (gitdir / sub).mkdir(parents=True, exist_ok=True)
            (gitdir / "config").write_text("[core]\n\trepositoryformatversion = 0\n")
            (gitdir / "info" / "attributes").write_text(RAW_ATTRIBUTES)
            (gitdir / "HEAD").write_text("ref: refs/heads/tree-guard\n")
        (gitdir / "objects" / "info" / "alternates").write_text(f"{self.objects}\n")
        try:
            exclude = self.exclude.read_bytes()
        except OSError:
            exclude = b""
        (gitdir / "info" / "exclude").write_bytes(exclude + b"\n" + TOOL_IGNORES.encode())
        return folder

    def git(self, env: dict[str, str], *args: str, stdin: str | None = None) -> str:
        res = process.run(
            ["git", *GIT_OPTIONS, *args],
            cwd=self.top, env=env, stdin=stdin, wall_timeout=GIT_TIMEOUT, clean=False,
            unset=USER_GIT_VARIABLES,
        )  # fmt: skip
        if res.exit_code != 0:
            raise GuardError(f"git {args[0]}: {res.stderr.strip()[:200]}")
        return res.stdout


@dataclass
class _GitTaken:
    repo: _Repo
    store: Path
    env: dict[str, str]
    tree: str

    @classmethod
    def take(cls, repo: _Repo) -> _GitTaken:
        store = repo.store()
        index = _private_name(store, "index")
        with contextlib.suppress(FileNotFoundError):  # its stat cache: only changes are hashed
            _copy_with_mtime(store / "index", Path(index))  # the mtime: git's racy-entry rule
        env = {
            "GIT_DIR": str(store / "git"),
            "GIT_WORK_TREE": str(repo.top),
            "GIT_INDEX_FILE": index,
            "GIT_LITERAL_PATHSPECS": "0",
        }
        try:  # the tree object now, not when needed: an object the store's index names but
            # the repository has since lost (gc) shows here, and the store is made again
            tree = _stage(repo, env)
        except GuardError:
            Path(index).unlink(missing_ok=True)
            _remove(store)
            repo.store()
            tree = _stage(repo, env)
        return cls(repo, store, env, tree)

    def verify(self) -> TreeChange | None:
        try:
            return self._verify()
        except (GuardError, OSError):  # git failed: the evaluation stands unverified
            return None
        finally:
            index = self.env["GIT_INDEX_FILE"]
            with contextlib.suppress(OSError):
                os.replace(index, self.store / "index")

    def _verify(self) -> TreeChange | None:
        if not _add(self.repo, self.env):  # nothing re-added: nothing changed
            return None
        now = _write_tree(self.repo, self.env)
        if now == self.tree:  # touched, or changed and changed back
            return None
        change = self._changes(now)
        self._restore(change)
        if _stage(self.repo, self.env) != self.tree:
            change.not_restored = change.paths()
        return change

    def _changes(self, now: str) -> TreeChange:
        out = self.repo.git(self.env, "diff-tree", "-r", "-z", "--no-renames", self.tree, now)
        fields = out.split("\0")
        change = TreeChange()
        for meta, path in zip(fields[0::2], fields[1::2], strict=False):
            kind = meta.rsplit(" ", 1)[-1]
            {"A": change.created, "D": change.deleted}.get(kind, change.modified).append(path)
            if kind != "D":
                with contextlib.suppress(OSError):
                    change.written_ns[path] = os.lstat(self.repo.top / path).st_mtime_ns
        return change

    def _restore(self, change: TreeChange) -> None:
        with contextlib.suppress(OSError):
            keep_displaced(self.repo.top, change, self.store.parent / "displaced")
        for path in change.created:
            with contextlib.suppress(FileNotFoundError):
                (self.repo.top / path).unlink()
        back = change.modified + change.deleted
        if not back:
            return
        index = _private_name(self.store, "restore")
        env = {**self.env, "GIT_INDEX_FILE": index}
        try:
            self.repo.git(env, "read-tree", self.tree)
            for path in change.modified:  # a directory in a file's place is not ours to remove
                full = self.repo.top / path
                if full.is_symlink() or full.is_file():
                    full.unlink()
            self.repo.git(env, "checkout-index", "-f", "-z", "--stdin", stdin="\0".join(back))
        finally:
            Path(index).unlink(missing_ok=True)


_names = itertools.count()


def _private_name(folder: Path, prefix: str) -> str:
    """A path in `folder` no other evaluation uses (git wants no file there, or an index)."""
    return str(folder / f"{prefix}-{os.getpid()}-{next(_names)}")


def _copy_with_mtime(source: Path, target: Path) -> None:
    data = source.read_bytes()
    st = source.stat()
    target.write_bytes(data)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))


def _remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)


def _stage(repo: _Repo, env: dict[str, str]) -> str:
    """The tree as it is now, outside ralph's memory, written through the private index."""
    _add(repo, env)
    return _write_tree(repo, env)


# Left out as the walk without git leaves them out: ralph's memory (a pathspec: no .gitignore
# can bring it back), and what tools and interpreters write for themselves (bytecode a test run
# writes is not a check writing the tree) as ignore rules in the private info/exclude, which
# git applies per folder: ~10 ms less per `git add` on 5,000 files than `:(glob)` pathspecs.
EXCLUDED = (f":(exclude){AIWG_DIR.as_posix()}",)
TOOL_IGNORES = "".join(f"{rule}\n" for rule in TOOL_RULES)


def _add(repo: _Repo, env: dict[str, str]) -> bool:
    """`git add -A` into the private index; whether it added or removed anything (a file
    whose stat changed is re-read, so an unchanged stat means unchanged bytes)."""
    return bool(repo.git(env, "add", "-A", "--verbose", "--", ".", *EXCLUDED).strip())


def _write_tree(repo: _Repo, env: dict[str, str]) -> str:
    return repo.git(env, "write-tree").strip()
