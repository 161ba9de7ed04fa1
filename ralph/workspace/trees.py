"""The work tree as git trees, without the user's index: staged in a temporary index (memory,
and what git ignored when the loop started, left out), written, diffed and committed; files put
back to a tree, a rollback, the dirty paths. `GitWorkspace` decides when; this says how.

Nothing here runs `git clean` or a hard reset: a file is removed only when a tree ralph knows
holds it, and never one that git ignored at loop start (`ignored.py`).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from ralph.errors import RalphError
from ralph.workspace.base import ChangeKind, FileChange, GitCommands, name_some
from ralph.workspace.held import HeldBack, Limits, held_back
from ralph.workspace.tree_walk import TOOL_RULES, is_tool_file

PATCH_MAX_FILES = 200  # beyond this, files are counted but not diffed
PATCH_MAX_LINES = 20_000  # a file changing more lines than this is counted but not diffed
CHUNK = 200  # paths per git command
TOOL_EXCLUDES = tuple(f"--exclude={rule}" for rule in TOOL_RULES)


class Trees:
    """The trees of one work tree; `memory` is `.aiwg/ralph` relative to the repository's top."""

    def __init__(self, git: GitCommands, memory: str, index: Path) -> None:
        self.git = git
        self.memory = f":(literal){memory}"
        self.exclude = f":(exclude,literal){memory}"
        self.index = index  # the user's index: copied, never written
        self.ignored: Path | None = None  # what git ignored at loop start (ignored.py)
        self.head_tree: tuple[str, str] | None = None  # a commit and its tree (immutable)
        self.limits = Limits()  # what is too large to commit (held.py)
        self.held = HeldBack()  # what the last staging left out, and why

    # -- what git ignored at loop start ----------------------------------------------------------

    def ignored_at_start(self, paths: list[str]) -> list[str]:
        """Those of `paths` (in the index or not) that the loop-start record matches."""
        if self.ignored is None or not paths:
            return []
        found: list[str] = []
        query = ("ls-files", "-z", "--cached", "--others", "--ignored")
        for chunk in in_chunks(paths):
            found += self.git.names(*query, f"--exclude-from={self.ignored}", "--", *chunk)
        return found

    def unstage_ignored(self, env: Mapping[str, str] | None = None) -> None:
        """Take out of the index `env` names what was ignored at loop start and what tools keep
        for themselves (`tree_walk.TOOL_RULES`: bytecode, caches, `.venv/`), unless HEAD holds
        it (an agent's `!pattern` in `.gitignore`, its `git add -f`, a loop started before the
        tool rules joined the loop-start record): it is never committed."""
        query = ["ls-files", "-z", "--cached", "--ignored", *TOOL_EXCLUDES]
        if self.ignored is not None:
            query.append(f"--exclude-from={self.ignored}")
        staged = self.git.names(*query, "--", ".", self.exclude, env=env)
        if not staged:
            return
        tracked: set[str] = set()
        if self.git.rev("HEAD") is not None:
            for chunk in in_chunks(staged):
                tracked.update(
                    self.git.names("ls-tree", "-r", "-z", "--name-only", "HEAD", "--", *chunk)
                )
        dropped = [name for name in staged if name not in tracked]
        for chunk in in_chunks(dropped):
            rm = ("rm", "-r", "-q", "--cached", "--ignore-unmatch")
            self.git.run(*rm, "--", *chunk, env=env)

    def dirty(self, *, untracked: bool = True) -> list[str]:
        """Modified, staged or untracked (not ignored) paths outside `.aiwg/ralph/`; a file
        ignored when the loop started counts as ignored whatever `.gitignore` says now, and an
        untracked one a tool keeps for itself (a user's own test run's `__pycache__/`) too.
        `untracked=False`: only tracked files' uncommitted changes (what a worktree lacks)."""
        entries = self.git.names(
            "status", "--porcelain", "-z", "--no-renames",
            f"--untracked-files={'all' if untracked else 'no'}", "--", ".", self.exclude,
        )  # fmt: skip
        new = [entry[3:] for entry in entries if entry.startswith("?? ")]
        kept = {path for path in new if is_tool_file(path)}
        others = [path for path in new if path not in kept]
        kept.update(self.ignored_at_start(others) if others else ())
        return [entry[3:] for entry in entries if entry[3:] not in kept]

    # -- temporary index: trees without touching the user's index -------------------------------

    @contextlib.contextmanager
    def scratch(self) -> Iterator[dict[str, str]]:
        with tempfile.TemporaryDirectory(prefix="ralph-index-") as tmp:
            path = Path(tmp) / "index"
            if self.index.exists():  # reuse the stat cache so `add -A` need not rehash
                # with its mtime: git trusts an entry's stat unless the entry is as new as the
                # index file ("racy git"); a fresh mtime hid a same-size edit made in the second
                # of a checkout (git compares whole seconds)
                shutil.copy2(self.index, path)
            yield {"GIT_INDEX_FILE": str(path)}

    def stage(
        self,
        env: Mapping[str, str],
        *,
        memory_from_head: bool = False,
        head: str | None = None,
        staged: bool = False,
    ) -> str:
        """Stage the work tree (outside memory) into the index `env` names; return its tree.

        `staged`: the index holds the work tree already (copied right after an `add -A`)."""
        if not staged:
            self.held = held_back(self.git, self.git.toplevel, self.exclude, self.limits, env)
            self.git.run("add", "-A", "--", ".", self.exclude, *self.held.pathspecs, env=env)
            self.unstage_ignored(env)
        if memory_from_head:  # what the user staged under .aiwg/ralph stays out of our commits
            if head:
                self.git.run("reset", "-q", "HEAD", "--", self.memory, env=env)
            else:
                rm = ("rm", "-r", "-q", "--cached", "--ignore-unmatch")
                self.git.run(*rm, "--", self.memory, env=env)
        return self.git.text("write-tree", env=env)

    def tree_of(self, rev: str | None) -> str:
        if rev is not None and self.head_tree is not None and self.head_tree[0] == rev:
            return self.head_tree[1]  # one git process less per iteration
        if rev is not None:
            return self.git.text("rev-parse", f"{rev}^{{tree}}")
        with tempfile.TemporaryDirectory(prefix="ralph-index-") as tmp:
            return self.git.text("write-tree", env={"GIT_INDEX_FILE": str(Path(tmp) / "i")})

    def commit(self, tree: str, parents: list[str], message: str) -> str:
        args = [arg for parent in parents for arg in ("-p", parent)]
        return self.git.text("commit-tree", tree, *args, "-m", message)

    def diff(self, base: str, tree: str) -> list[FileChange]:
        diff = ("diff", "--no-renames", "--no-color", "--no-ext-diff", "--no-textconv")
        spec = ("--", ".", self.exclude)
        kinds = self.git.names(*diff, "--name-status", "-z", base, tree, *spec)
        counts = self.git.names(*diff, "--numstat", "-z", base, tree, *spec)
        status = dict(zip(kinds[1::2], kinds[0::2], strict=True))
        files = [_numstat_change(entry, status) for entry in counts]
        wanted = [
            f for f in files if f.diff == "" and f.additions + f.deletions <= PATCH_MAX_LINES
        ][:PATCH_MAX_FILES]
        if wanted:
            paths = [f":(literal){f.path}" for f in wanted]
            out = self.git.run(*diff, "--no-textconv", "-p", base, tree, "--", *paths)[1]
            chunks = re.split(r"(?m)^(?=diff --git )", out.decode("utf-8", "replace"))
            chunks = [chunk for chunk in chunks if chunk]
            if len(chunks) == len(wanted):
                for change, chunk in zip(wanted, chunks, strict=True):
                    change.diff = chunk
        for change in files:
            change.diff = change.diff or "(diff not recorded: change too large)"
        return files

    # -- files back to a tree ------------------------------------------------------------------

    def put_back(self, base: str, paths: Sequence[str]) -> None:
        """These files as tree `base` holds them: `git restore` (bytes and mode exactly), what
        is not there removed; the index is left alone."""
        there = set(self.git.names("ls-tree", "-z", "--name-only", base, "--", *_literal(paths)))
        self.remove([name for name in paths if name not in there])
        for chunk in in_chunks([name for name in paths if name in there]):
            self.git.run("restore", f"--source={base}", "--worktree", "--", *chunk)

    def checkout(self, target: str, current: str) -> None:
        """Make the files outside memory that differ between `current` (what the tree holds)
        and `target` what `target` holds; then the index mirrors `target`."""
        entries = self.git.names(
            "diff", "--name-status", "-z", "--no-renames", target, current, "--", ".", self.exclude
        )
        pairs = list(zip(entries[0::2], entries[1::2], strict=True))
        self.remove([name for status, name in pairs if status == "A"])
        for chunk in in_chunks([name for status, name in pairs if status != "A"]):
            self.git.run("checkout", target, "--", *chunk)
        self.git.run("reset", "-q", target, "--", ".", self.exclude)

    def roll_back(self, commit: str, head: str | None) -> None:
        """Code as `commit` holds it over a clean tree at `head`; memory, ignored and untracked
        files stay as they are, and HEAD too (a rollback is committed as the next iteration)."""
        if not self.git.ok("rev-parse", "-q", "--verify", f"{commit}^{{commit}}"):
            raise RalphError(f"cannot roll back: no commit {commit}", hint="see `git log`")
        dirty = self.dirty()
        if dirty:
            raise RalphError(
                f"cannot roll back over uncommitted changes: {name_some(dirty, 10)}",
                hint="commit the iteration before restoring an earlier one",
            )
        added = self.git.names(
            "diff", "--name-only", "-z", "--no-renames", "--diff-filter=A", commit,
            head or self.tree_of(None), "--", ".", self.exclude,
        )  # fmt: skip
        self.remove(added)  # committed after `commit`, so still in history; first, so a
        # directory that replaced a file is gone before checkout writes the file back
        status, _, err = self.git.run("checkout", commit, "--", ".", self.exclude, check=False)
        if status != 0 and "did not match any file" not in err:
            raise RalphError(f"git checkout failed: {err.strip()}", hint="see `git status`")
        self.git.run("reset", "-q", "--", ".", self.exclude)  # the index mirrors HEAD again

    def remove(self, paths: list[str]) -> None:
        """Delete these files (never one ignored at loop start) and the directories they empty."""
        top = self.git.toplevel
        kept = set(self.ignored_at_start(paths))
        for name in (name for name in paths if name not in kept):
            path = top / name
            with contextlib.suppress(OSError):  # a directory (say, a submodule) is left alone
                path.unlink()
            for parent in path.parents:  # drop directories the removal left empty
                if parent == top or top not in parent.parents:
                    break
                try:
                    parent.rmdir()
                except OSError:
                    break


def _numstat_change(entry: str, status: Mapping[str, str]) -> FileChange:
    added, deleted, path = entry.split("\t", 2)
    letter = status.get(path, "M")[:1]
    kind: ChangeKind = "created" if letter == "A" else "deleted" if letter == "D" else "modified"
    if added == "-":  # git marks binary files with dashes
        return FileChange(path, kind, 0, 0, "binary file")
    return FileChange(path, kind, int(added), int(deleted), "")


def _literal(paths: Sequence[str]) -> list[str]:
    return [f":(literal){name}" for name in paths]


def in_chunks(paths: Sequence[str]) -> Iterator[list[str]]:
    """Literal pathspecs, `CHUNK` at a time: a command line stays short whatever the count."""
    for start in range(0, len(paths), CHUNK):
        yield _literal(paths[start : start + CHUNK])
