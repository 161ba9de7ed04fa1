"""Git for the loop: a clean-tree guard, the loop branch, one commit per iteration, rollback.

Everything here protects user work: no `git clean`, no hard reset, nothing under `.aiwg/ralph/`
is ever committed or checked out (memory survives rollbacks), nothing git ignored when the loop
started is ever committed or removed (`ignored.py`), and diffs and commits are built in a
temporary index so the user's own index is left alone.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from ralph.errors import PreflightError, RalphError
from ralph.files import write_atomically
from ralph.ids import loop_branch, validate_loop_id
from ralph.workspace import ignored
from ralph.workspace.base import (
    ChangeKind,
    ChangeSet,
    FileChange,
    GitState,
    GivenBack,
    name_some,
)
from ralph.workspace.locate import find_repo_root

PATCH_MAX_FILES = 200  # beyond this, files are counted but not diffed
PATCH_MAX_LINES = 20_000  # a file changing more lines than this is counted but not diffed
DEFAULT_IDENTITY = {"NAME": "ralph", "EMAIL": "ralph@localhost"}


class Git:
    """Runs git through GitPython in one work tree; failures become one-line RalphErrors."""

    def __init__(self, toplevel: Path) -> None:
        import git

        self.toplevel = toplevel
        self._cmd = git.Git(str(toplevel))
        # Our pathspecs use magic (`:(exclude)`); a user's literal-pathspec setting would break it.
        self.env: dict[str, str] = {"GIT_LITERAL_PATHSPECS": "0"}

    def run(
        self, *args: str, env: Mapping[str, str] | None = None, check: bool = True
    ) -> tuple[int, bytes, str]:
        import git

        try:
            status, out, err = self._cmd.execute(
                ["git", "-C", str(self.toplevel), "-c", "core.quotePath=false", *args],
                with_extended_output=True,
                with_exceptions=False,
                stdout_as_string=False,
                strip_newline_in_stdout=False,
                env={**self.env, **(env or {})},
            )
        except git.GitCommandNotFound as exc:
            raise PreflightError(
                "git is not installed", hint="install git or use --no-git"
            ) from exc
        if check and status != 0:
            first = (str(err).strip().splitlines() or ["no output"])[0]
            hint = f"see `git status` in {self.toplevel}"
            raise RalphError(f"git {args[0]} failed: {first}", hint=hint)
        return int(status or 0), bytes(out or b""), str(err or "")

    def text(self, *args: str, env: Mapping[str, str] | None = None) -> str:
        return self.run(*args, env=env)[1].decode("utf-8", "surrogateescape").strip()

    def names(self, *args: str, env: Mapping[str, str] | None = None) -> list[str]:
        """NUL-separated output (`-z`) as paths, exactly as git spells them."""
        out = self.run(*args, env=env)[1].decode("utf-8", "surrogateescape")
        return [item for item in out.split("\0") if item]

    def ok(self, *args: str) -> bool:
        return self.run(*args, check=False)[0] == 0

    def rev(self, rev: str) -> str | None:
        """The commit `rev` names; None when it names none (the one rev-parse of ralph)."""
        status, out, _ = self.run("rev-parse", "-q", "--verify", f"{rev}^{{commit}}", check=False)
        return out.decode().strip() if status == 0 else None

    def current_branch(self) -> str | None:
        """The branch checked out; None on a detached HEAD."""
        status, out, _ = self.run("symbolic-ref", "-q", "--short", "HEAD", check=False)
        return out.decode("utf-8", "surrogateescape").strip() if status == 0 else None


class GitWorkspace:
    """The loop's workspace in a git repository: branch, iteration commits, rollback, rescue."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        top = find_repo_root(self.root)
        if top is None:
            raise PreflightError(f"{root} is not inside a git work tree", hint="use --no-git")
        self._git = Git(top)
        self._git.env.update(self._identity_env())
        memory = Path(os.path.relpath(self.root / ".aiwg" / "ralph", top)).as_posix()
        self._memory = f":(literal){memory}"
        self._exclude = f":(exclude,literal){memory}"
        index = Path(self._git.text("rev-parse", "--git-path", "index"))
        self._index = index if index.is_absolute() else top / index
        self._base_tree: str | None = None
        self._committed_tree: str | None = None
        self._committed_head: str | None = None  # HEAD as this loop's last commit left it
        self._head_tree: tuple[str, str] | None = None  # that commit and its tree (immutable)
        self._branch: str | None = None  # the loop's branch, once started or resumed
        rel = Path(os.path.relpath(self.root, top)).as_posix()
        self._prefix = "" if rel == "." else rel + "/"  # the root under the repository's top
        self._ignored: Path | None = None  # what git ignored at loop start (ignored.py)

    def _identity_env(self) -> dict[str, str]:
        """The user's identity when configured, else `ralph <ralph@localhost>`; never fail."""
        env: dict[str, str] = {}
        for part, key in (("NAME", "user.name"), ("EMAIL", "user.email")):
            if self._git.run("config", "--get", key, check=False)[1].strip():
                continue
            for role in ("AUTHOR", "COMMITTER"):
                if not os.environ.get(f"GIT_{role}_{part}"):
                    env[f"GIT_{role}_{part}"] = DEFAULT_IDENTITY[part]
        return env

    # -- small queries -------------------------------------------------------------------------

    def current_commit(self) -> str | None:
        return self._git.rev("HEAD")

    def dirty_files(self, *, untracked: bool = True) -> list[str]:
        """Modified, staged or untracked (not ignored) paths outside `.aiwg/ralph/`; a file
        ignored when the loop started counts as ignored whatever `.gitignore` says now.
        `untracked=False`: only tracked files' uncommitted changes (what a worktree lacks)."""
        entries = self._git.names(
            "status", "--porcelain", "-z", "--no-renames",
            f"--untracked-files={'all' if untracked else 'no'}", "--", ".", self._exclude,
        )  # fmt: skip
        new = [entry[3:] for entry in entries if entry.startswith("?? ")]
        kept = set(self._ignored_at_start(new)) if new else set()
        return [entry[3:] for entry in entries if entry[3:] not in kept]

    # -- what git ignored at loop start ----------------------------------------------------------

    def _git_path(self, name: str) -> Path:
        return Path(self._git.text("rev-parse", "--path-format=absolute", "--git-path", name))

    def _keep_ignored(self, loop_id: str, *, fresh: bool) -> None:
        """Record what git ignores now (`fresh`, or when no record exists: a loop started by an
        older ralph), then let every git command of this loop read it."""
        path = ignored.exclude_path(self._git_path, loop_id)
        if fresh or not path.is_file():
            configured = self._git.run("config", "--path", "core.excludesFile", check=False)[1]
            sources = ignored.global_sources(
                configured.decode("utf-8", "surrogateescape").strip(),
                os.environ.get("XDG_CONFIG_HOME"),
                os.environ.get("HOME"),
            )
            sources.append(self._git_path("info/exclude"))
            ignored.write_snapshot(path, self._git.toplevel, self._git.names, sources)
        self._git.env.update(ignored.config_env(path))
        self._ignored = path

    def _ignored_at_start(self, paths: list[str]) -> list[str]:
        """Those of `paths` (in the index or not) that the loop-start record matches."""
        if self._ignored is None or not paths:
            return []
        found: list[str] = []
        query = ("ls-files", "-z", "--cached", "--others", "--ignored")
        for start in range(0, len(paths), 200):
            chunk = [f":(literal){name}" for name in paths[start : start + 200]]
            found += self._git.names(*query, f"--exclude-from={self._ignored}", "--", *chunk)
        return found

    def _unstage_ignored(self, env: Mapping[str, str] | None = None) -> None:
        """Take out of the index `env` names what was ignored at loop start and is not in HEAD
        (an agent's `!pattern` in `.gitignore`, its `git add -f`): it is never committed."""
        if self._ignored is None:
            return
        query = ("ls-files", "-z", "--cached", "--ignored", f"--exclude-from={self._ignored}")
        staged = self._git.names(*query, "--", ".", self._exclude, env=env)
        if not staged:
            return
        tracked: set[str] = set()
        if self.current_commit() is not None:
            for start in range(0, len(staged), 200):
                chunk = [f":(literal){name}" for name in staged[start : start + 200]]
                tracked.update(
                    self._git.names("ls-tree", "-r", "-z", "--name-only", "HEAD", "--", *chunk)
                )
        dropped = [name for name in staged if name not in tracked]
        for start in range(0, len(dropped), 200):
            chunk = [f":(literal){name}" for name in dropped[start : start + 200]]
            rm = ("rm", "-r", "-q", "--cached", "--ignore-unmatch")
            self._git.run(*rm, "--", *chunk, env=env)

    # -- temporary index: diffs and commits without touching the user's index -------------------

    @contextlib.contextmanager
    def _scratch_index(self) -> Iterator[dict[str, str]]:
        with tempfile.TemporaryDirectory(prefix="ralph-index-") as tmp:
            path = Path(tmp) / "index"
            if self._index.exists():  # reuse the stat cache so `add -A` need not rehash
                # with its mtime: git trusts an entry's stat unless the entry is as new as the
                # index file ("racy git"); a fresh mtime hid a same-size edit made in the second
                # of a checkout (git compares whole seconds)
                shutil.copy2(self._index, path)
            yield {"GIT_INDEX_FILE": str(path)}

    def _stage_tree(
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
            self._git.run("add", "-A", "--", ".", self._exclude, env=env)
            self._unstage_ignored(env)
        if memory_from_head:  # what the user staged under .aiwg/ralph stays out of our commits
            if head:
                self._git.run("reset", "-q", "HEAD", "--", self._memory, env=env)
            else:
                rm = ("rm", "-r", "-q", "--cached", "--ignore-unmatch")
                self._git.run(*rm, "--", self._memory, env=env)
        return self._git.text("write-tree", env=env)

    def _tree_of(self, rev: str | None) -> str:
        if rev is not None and self._head_tree is not None and self._head_tree[0] == rev:
            return self._head_tree[1]  # one git process less per iteration
        if rev is not None:
            return self._git.text("rev-parse", f"{rev}^{{tree}}")
        with tempfile.TemporaryDirectory(prefix="ralph-index-") as tmp:
            return self._git.text("write-tree", env={"GIT_INDEX_FILE": str(Path(tmp) / "i")})

    def _commit_tree(self, tree: str, parents: list[str], message: str) -> str:
        args = [arg for parent in parents for arg in ("-p", parent)]
        return self._git.text("commit-tree", tree, *args, "-m", message)

    # -- the Workspace protocol ----------------------------------------------------------------

    def begin_iteration(self) -> None:
        if self._committed_tree is not None:  # the tree is as the last commit left it
            self._base_tree, self._committed_tree = self._committed_tree, None
            return
        with self._scratch_index() as env:
            self._base_tree = self._stage_tree(env)

    def changes(self) -> ChangeSet:
        """Stage the attempt's tree now (before the checks can add files); diff it meanwhile.

        First undo the actor's own git commands (`reclaim`): what they did to the files is
        part of the attempt; what they did to branches and HEAD is not."""
        moves = self.reclaim()
        base = self._base_tree or self._tree_of(self.current_commit())
        with self._scratch_index() as env:
            tree = self._stage_tree(env)
        if tree == base:
            return ChangeSet([], git_moves=moves, prefix=self._prefix)
        pending = _background().submit(self._diff_trees, base, tree)
        return ChangeSet(pending=pending, git_moves=moves, prefix=self._prefix)

    def original(self, path: str) -> bytes | None:
        """`path` (from the repository's top) in the tree `begin_iteration` staged."""
        base = self._base_tree or self._tree_of(self.current_commit())
        status, out, _ = self._git.run("cat-file", "blob", f"{base}:{path}", check=False)
        return out if status == 0 else None

    def put_back(self, paths: Sequence[str]) -> None:
        """Files as `begin_iteration` found them: `git restore` from that tree (bytes and mode
        exactly), what was not there removed; the index is left alone."""
        base = self._base_tree or self._tree_of(self.current_commit())
        there = set(self._git.names("ls-tree", "-z", "--name-only", base, "--", *_literal(paths)))
        self._remove([name for name in paths if name not in there])
        back = [name for name in paths if name in there]
        for start in range(0, len(back), 200):
            chunk = _literal(back[start : start + 200])
            self._git.run("restore", f"--source={base}", "--worktree", "--", *chunk)

    def reclaim(self) -> list[str]:
        """Put the loop's branch back where ralph's last commit left it and check it out again,
        leaving the files as they are; returns what had moved, one sentence each.

        An agent may run `git commit`, `git reset --hard`, `git checkout main` or delete the
        loop branch. Its commits would otherwise sit under ralph's (or break `update-ref`), and
        a reset could drop iterations the state still names. The files stay as the agent left
        them: they are the attempt, diffed and committed like any other change.
        """
        branch, expected = self._branch, self._committed_head
        if branch is None or expected is None:
            return []
        ref = f"refs/heads/{branch}"
        status, out, _ = self._git.run(
            "rev-parse", "HEAD", "--symbolic-full-name", "HEAD", check=False
        )
        if status == 0 and out.decode().split() == [expected, ref]:
            return []  # one git call when nothing moved, the usual case
        at = self._git.rev(ref)
        current = self._git.run("symbolic-ref", "-q", "HEAD", check=False)[1].decode().strip()
        moves = []
        if at is None:
            moves.append(f"the agent deleted the loop branch {branch}")
        elif at != expected:
            if self._git.ok("merge-base", "--is-ancestor", expected, at):
                what = f"committed on {branch} ({at[:12]})"
            else:
                what = f"moved {branch} to {at[:12]} (a reset)"
            moves.append(f"the agent {what}")
        if current != ref:
            where = (
                current.removeprefix("refs/heads/") or f"a detached HEAD ({self.current_commit()})"
            )
            moves.append(f"the agent checked out {where}")
        if not moves:
            return []
        self._git.run("update-ref", "-m", "ralph: the loop branch put back", ref, expected)
        self._git.run("symbolic-ref", "HEAD", ref)
        self._git.run("reset", "-q", "--", ".", self._exclude)  # the index mirrors HEAD again
        kept = "ralph put its branch back at " + expected[:12] + " and kept the files as they are"
        return [f"{'; '.join(moves)}: {kept}"]

    def _diff_trees(self, base: str, tree: str) -> list[FileChange]:
        diff = ("diff", "--no-renames", "--no-color", "--no-ext-diff")
        spec = ("--", ".", self._exclude)
        kinds = self._git.names(*diff, "--name-status", "-z", base, tree, *spec)
        counts = self._git.names(*diff, "--numstat", "-z", base, tree, *spec)
        status = dict(zip(kinds[1::2], kinds[0::2], strict=True))
        files = [_numstat_change(entry, status) for entry in counts]
        wanted = [
            f for f in files if f.diff == "" and f.additions + f.deletions <= PATCH_MAX_LINES
        ][:PATCH_MAX_FILES]
        if wanted:
            paths = [f":(literal){f.path}" for f in wanted]
            out = self._git.run(*diff, "--no-textconv", "-p", base, tree, "--", *paths)[1]
            chunks = re.split(r"(?m)^(?=diff --git )", out.decode("utf-8", "replace"))
            chunks = [chunk for chunk in chunks if chunk]
            if len(chunks) == len(wanted):
                for change, chunk in zip(wanted, chunks, strict=True):
                    change.diff = chunk
        for change in files:
            change.diff = change.diff or "(diff not recorded: change too large)"
        return files

    def commit_iteration(self, message: str) -> str | None:
        """Commit everything but memory; None when the tree is HEAD's (an attempt that changed
        nothing gets no empty commit: HEAD is its commit)."""
        head = self._committed_head or self.current_commit()
        self._git.run("add", "-A", "--", ".", self._exclude)  # the user's index mirrors HEAD after
        self._unstage_ignored()
        with self._scratch_index() as env:  # a copy of that index: the work tree is staged
            tree = self._stage_tree(env, memory_from_head=True, head=head, staged=True)
        if head and tree == self._tree_of(head):
            self._committed_tree, self._committed_head, self._head_tree = tree, head, (head, tree)
            return None
        sha = self._commit_tree(tree, [head] if head else [], message)
        self._git.run("update-ref", "-m", message, "HEAD", sha, head or "")
        # Outside memory the work tree is this tree now: the next iteration's diff base, unless
        # a rollback changes the tree first. Saves staging the whole tree once per iteration.
        self._committed_tree, self._committed_head, self._head_tree = tree, sha, (sha, tree)
        return sha

    def restore(self, commit: str) -> None:
        """Roll code back to `commit`; memory, ignored and untracked files stay as they are."""
        self._committed_tree = None  # HEAD stays: a rollback is committed as the next iteration
        if not self._git.ok("rev-parse", "-q", "--verify", f"{commit}^{{commit}}"):
            raise RalphError(f"cannot roll back: no commit {commit}", hint="see `git log`")
        dirty = self.dirty_files()
        if dirty:
            raise RalphError(
                f"cannot roll back over uncommitted changes: {name_some(dirty, 10)}",
                hint="commit the iteration before restoring an earlier one",
            )
        head = self.current_commit() or self._tree_of(None)
        added = self._git.names(
            "diff", "--name-only", "-z", "--no-renames", "--diff-filter=A", commit, head,
            "--", ".", self._exclude,
        )  # fmt: skip
        self._remove(added)  # committed after `commit`, so still in history; first, so a
        # directory that replaced a file is gone before checkout writes the file back
        status, _, err = self._git.run("checkout", commit, "--", ".", self._exclude, check=False)
        if status != 0 and "did not match any file" not in err:
            raise RalphError(f"git checkout failed: {err.strip()}", hint="see `git status`")
        self._git.run("reset", "-q", "--", ".", self._exclude)  # the index mirrors HEAD again

    def _remove(self, paths: list[str]) -> None:
        """Delete these files (never one ignored at loop start) and the directories they empty."""
        top = self._git.toplevel
        kept = set(self._ignored_at_start(paths))
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

    # -- loop lifecycle ------------------------------------------------------------------------

    def preflight_loop(self, loop_id: str, *, allow_dirty: bool) -> None:
        """Refuse what would stop `start_loop`, before any check runs."""
        self._preflight(loop_id, allow_dirty=allow_dirty)

    def _preflight(self, loop_id: str, *, allow_dirty: bool) -> tuple[str, list[str]]:
        """HEAD and the dirty paths, once nothing stands in the loop's way."""
        validate_loop_id(loop_id)
        head = self.current_commit()
        if head is None:
            raise PreflightError(
                "the git repository has no commits yet",
                hint="commit something first (git commit --allow-empty -m init), or use --no-git",
            )
        dirty = self.dirty_files()
        if dirty and not allow_dirty:
            raise PreflightError(
                f"the working tree has uncommitted changes: {name_some(dirty, 10)}",
                hint="commit or stash them first, or pass --allow-dirty to keep them in the loop",
            )
        branch = loop_branch(loop_id)
        exists = self._git.ok("rev-parse", "-q", "--verify", f"refs/heads/{branch}")
        if exists and self._adoptable(loop_id) is None:
            raise PreflightError(
                f"branch {branch} already exists", hint="use `ralph resume` or another --loop-id"
            )
        return head, dirty

    def start_loop(self, loop_id: str, *, allow_dirty: bool) -> GitState:
        """Create and check out `ralph/<loop-id>`; returns what the state keeps of it.

        With `allow_dirty`, the user's uncommitted work is recorded as a first "starting point"
        commit on the loop branch (the tree itself is untouched) and becomes `base_commit`, so
        any rollback, even to the very beginning, brings that work back rather than dropping it.
        """
        head, dirty = self._preflight(loop_id, allow_dirty=allow_dirty)
        adopted = self._adoptable(loop_id)
        if adopted is not None:
            return self._adopt(loop_id, adopted, dirty=bool(dirty))
        self._keep_ignored(loop_id, fresh=True)  # before the branch: resume relies on it
        branch = loop_branch(loop_id)
        original = self._git.current_branch()
        saved = (
            self._stash_user_changes(f"{original or head[:12]} when ralph loop {loop_id} started")
            if dirty
            else None
        )
        start = GitState(branch, head, original, head, saved)
        write_atomically(self._start_path(loop_id), json.dumps(start.to_json()) + "\n")
        self._git.run("checkout", "-q", "-b", branch)  # same commit: the tree is untouched
        self._branch, self._committed_head = branch, head
        base = head
        if dirty:
            note = f"ralph: {loop_id} starting point (uncommitted changes on {original or head})"
            base = self.commit_iteration(note) or head
        return GitState(
            branch=branch,
            base_commit=base,
            original_branch=original,
            original_commit=head,
            user_changes=saved,
        )

    def _start_path(self, loop_id: str) -> Path:
        """How the loop's branch began, written before the branch exists (in the git dir)."""
        return self._git_path(f"ralph/{loop_id}/start.json")

    def _adoptable(self, loop_id: str) -> GitState | None:
        """The start of this loop's own branch, when a run killed right after creating it left
        the branch but no state naming it: the branch still at the start commit, or at the
        starting-point commit on it (`--allow-dirty`). None for any other branch of that name."""
        try:
            start = GitState.from_json(json.loads(self._start_path(loop_id).read_text()))
        except (OSError, ValueError, AttributeError):
            return None
        tip = self._git.rev(f"refs/heads/{loop_branch(loop_id)}")
        if tip is None or not start.original_commit or start.branch != loop_branch(loop_id):
            return None
        if tip == start.original_commit:
            return start
        parent = self._git.rev(f"{tip}^")
        subject = self._git.text("log", "-1", "--format=%s", tip)
        if parent == start.original_commit and subject.startswith(f"ralph: {loop_id} starting"):
            return replace(start, base_commit=tip)
        return None

    def _adopt(self, loop_id: str, start: GitState, *, dirty: bool) -> GitState:
        """Go on with the branch a killed start of this loop created (`_adoptable`)."""
        branch = start.branch or loop_branch(loop_id)
        self._keep_ignored(loop_id, fresh=False)
        if self._git.current_branch() != branch:
            if self.current_commit() == self._git.rev(f"refs/heads/{branch}"):
                self._git.run("symbolic-ref", "HEAD", f"refs/heads/{branch}")  # same commit
            else:
                self._checkout_loop_branch(branch)
        base = start.base_commit or start.original_commit or ""
        self._branch, self._committed_head = branch, base
        if dirty and base == start.original_commit:  # killed before the starting point's commit
            where = start.original_branch or base
            note = f"ralph: {loop_id} starting point (uncommitted changes on {where})"
            base = self.commit_iteration(note) or base
        return replace(start, branch=branch, base_commit=base)

    def _stash_user_changes(self, where: str) -> str:
        """Your uncommitted work exactly as it is, as a stash entry: the index (what you staged),
        the work tree, and the untracked files apart, like `git stash push -u` would keep them,
        but without touching a file. On your branch, `git stash apply --index` brings back what
        was staged as staged, unstaged as unstaged and untracked as untracked."""
        head = self.current_commit() or ""
        index_tree = self._git.text("write-tree")  # the user's own index, as it is
        index = self._commit_tree(index_tree, [head], f"index on {where}")
        with self._scratch_index() as env:
            self._git.run("add", "-u", "--", ".", self._exclude, env=env)
            work_tree = self._git.text("write-tree", env=env)
        untracked = self._git.names(
            "ls-files", "--others", "--exclude-standard", "-z", "--", ".", self._exclude
        )
        parents = [head, index]
        if untracked:
            with tempfile.TemporaryDirectory(prefix="ralph-index-") as tmp:
                env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
                for start in range(0, len(untracked), 200):
                    chunk = [f":(literal){name}" for name in untracked[start : start + 200]]
                    self._git.run("add", "-f", "--", *chunk, env=env)
                tree = self._git.text("write-tree", env=env)
            parents.append(self._commit_tree(tree, [], f"untracked files on {where}"))
        message = f"ralph: uncommitted changes on {where}"
        stash = self._commit_tree(work_tree, parents, message)
        self._git.run("stash", "store", "-m", message, stash)
        return stash

    def end_loop(self, git: GitState) -> GivenBack | None:
        """Back on the branch the loop started from, the uncommitted work `--allow-dirty` saved
        applied exactly as it was (staged, unstaged, untracked) and its stash entry dropped.

        Left on the loop's branch, the user's files would stay inside its starting-point
        commit: `git switch` would delete their untracked files and `apply` would count their
        edits as the loop's work. Only from a clean tree on the loop's branch, to a branch still
        where it was; otherwise nothing moves and the note says how to get the work back."""
        saved = git.user_changes
        if not saved or not git.branch or not git.original_commit:
            return None
        if saved not in self._git.text("stash", "list", "--format=%H").split():
            return None  # given back already (or dropped by the user)
        kept = GivenBack(git.user_changes_note(held=False) or "", restored=False)
        where = git.original_branch or git.original_commit[:12]
        if self._git.current_branch() != git.branch or self.dirty_files():
            return kept
        if git.original_branch and (
            self._git.rev(f"refs/heads/{git.original_branch}") != git.original_commit
        ):
            return kept
        modes = self._modes_of_saved(saved)  # git keeps only 644 and 755: a 600 stays 600
        target = [git.original_branch] if git.original_branch else ["--detach", git.original_commit]
        if self._git.run("checkout", "-q", *target, check=False)[0] != 0:
            return kept
        status, _, err = self._git.run("stash", "apply", "--index", "-q", saved, check=False)
        for path, mode in modes.items():
            with contextlib.suppress(OSError):
                if path.is_file() and not path.is_symlink() and path.stat().st_mode != mode:
                    path.chmod(mode & 0o7777)
        if status != 0:
            first = (err.strip().splitlines() or ["no output"])[0]
            return GivenBack(
                f"back on {where}, but `git stash apply --index {saved[:12]}` failed ({first}): "
                "your uncommitted changes stay saved in `git stash list`",
                restored=False,
            )
        self._drop_stash(saved)
        return GivenBack(
            f"back on {where} with your uncommitted changes as they were (staged, unstaged, "
            f"untracked); the loop's work is on {git.branch}",
            restored=True,
        )

    def _modes_of_saved(self, saved: str) -> dict[Path, int]:
        """The file modes of what the stash entry `saved` holds, as they are in the tree."""
        names = self._git.names("diff", "--name-only", "-z", "--no-renames", f"{saved}^1", saved)
        if self._git.rev(f"{saved}^3") is not None:  # its untracked files
            names += self._git.names("ls-tree", "-r", "-z", "--name-only", f"{saved}^3")
        modes: dict[Path, int] = {}
        for name in names:
            path = self._git.toplevel / name
            with contextlib.suppress(OSError):
                if path.is_file() and not path.is_symlink():
                    modes[path] = path.stat().st_mode
        return modes

    def _drop_stash(self, saved: str) -> None:
        """Drop the stash entry holding `saved`, wherever newer entries have pushed it."""
        entries = self._git.text("stash", "list", "--format=%H").split()
        if saved in entries:
            self._git.run("stash", "drop", "-q", f"stash@{{{entries.index(saved)}}}")

    def _checkout_loop_branch(self, branch: str) -> None:
        """Check out the loop branch again; `.aiwg/ralph/` keeps its bytes across the switch."""
        self._refuse_stale_locks(branch)
        if not branch or self._git.current_branch() == branch:
            return
        if not self._git.ok("rev-parse", "-q", "--verify", f"refs/heads/{branch}"):
            raise PreflightError(f"the loop branch {branch} is gone", hint="start a new loop")
        dirty = self.dirty_files()
        if dirty:
            raise PreflightError(
                f"cannot switch to {branch}: uncommitted changes: {name_some(dirty, 10)}",
                hint="commit or stash them, then resume again",
            )
        touched = self._git.names(
            "diff", "--name-only", "-z", "--no-renames", "HEAD", f"refs/heads/{branch}",
            "--", self._memory,
        )  # fmt: skip
        top = self._git.toplevel
        saved = {name: _read_or_none(top / name) for name in touched}
        for name in touched:  # out of checkout's way; written back below
            with contextlib.suppress(FileNotFoundError):
                (top / name).unlink()
        if touched:
            self._git.run("reset", "-q", "HEAD", "--", *[f":(literal){n}" for n in touched])
        self._git.run("checkout", "-q", branch)
        for name, data in saved.items():
            path = top / name
            if data is None:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)

    def resume_loop(self, git: GitState | None, loop_id: str, iteration: int) -> list[str]:
        """Before a resumed loop goes on: its branch checked out, exactly at the commit of the
        state's last iteration, the tree clean; returns what was done, one note each.

        A kill -9 between an iteration's commit and its state leaves a commit the state does
        not know, and leftovers of an attempt may lie in the tree. Both are saved on
        `refs/ralph/rescue/<loop>/<n>` (n: the iteration done again) and cleared: the branch is
        reset to the state's commit, so iteration n is done once, from where the state says.
        """
        if git is None:  # a loop that never had a branch (started outside git)
            return []
        self._keep_ignored(loop_id, fresh=False)
        branch = git.branch or ""
        expected = git.commit_of(iteration) or git.base_commit
        if not branch or not expected or self._git.rev(expected) is None:
            self._checkout_loop_branch(branch)
            return []
        notes = []
        self._refuse_stale_locks(branch)
        if self._git.rev(f"refs/heads/{branch}") is None:  # deleted: the state knows where it was
            self._git.run(
                "update-ref",
                "-m",
                "ralph: the loop branch restored",
                f"refs/heads/{branch}",
                expected,
            )
            notes.append(f"the loop branch {branch} was gone: recreated at {expected[:12]}")
        self._checkout_loop_branch(branch)
        self._branch = branch
        rescued = self.rescue(loop_id, iteration + 1)
        if rescued:
            notes.append(f"leftovers of the interrupted attempt saved as {rescued}")
        head = self.current_commit()
        if head and head != expected:
            ref = f"refs/ralph/rescue/{loop_id}/{int(iteration) + 1}"
            kept = self._git.rev(ref)
            if kept is None or not self._git.ok("merge-base", "--is-ancestor", head, kept):
                message = (
                    f"ralph: {loop_id} iteration {iteration + 1} commit the state did not know"
                )
                self._git.run("update-ref", "-m", message, ref, head)
            self._put_back(expected, head)
            self._git.run(
                "update-ref",
                "-m",
                "ralph: back to the state's commit",
                f"refs/heads/{branch}",
                expected,
                head,
            )
            notes.append(
                f"{branch} was at {head[:12]}, a commit the loop's state does not know (an "
                f"interrupted iteration {iteration + 1}): saved as {ref}, branch reset to "
                f"{expected[:12]}"
            )
        self._committed_head = expected
        return notes

    def _put_back(self, target: str, current: str) -> None:
        """Make the files outside memory that differ between `current` (what the tree holds)
        and `target` what `target` holds; then the index mirrors `target`."""
        entries = self._git.names(
            "diff", "--name-status", "-z", "--no-renames", target, current, "--", ".", self._exclude
        )
        pairs = list(zip(entries[0::2], entries[1::2], strict=True))
        self._remove([name for status, name in pairs if status == "A"])
        back = [f":(literal){name}" for status, name in pairs if status != "A"]
        for start in range(0, len(back), 200):
            self._git.run("checkout", target, "--", *back[start : start + 200])
        self._git.run("reset", "-q", target, "--", ".", self._exclude)

    def _refuse_stale_locks(self, branch: str) -> None:
        """A git command killed mid-way (say, with a kill -9 of the whole loop) leaves its lock
        file; git then refuses every commit. Say so before an attempt is spent, not after."""
        names = ["HEAD.lock", "index.lock"] + ([f"refs/heads/{branch}.lock"] if branch else [])
        for name in names:
            found = Path(self._git.text("rev-parse", "--path-format=absolute", "--git-path", name))
            if found.exists():
                raise PreflightError(
                    f"git is locked: {found} exists (left by an interrupted git command?)",
                    hint="if no git command is running in this repository, delete that file "
                    "and resume again",
                )

    def rescue(self, loop_id: str, iteration: int) -> str | None:
        """Save an interrupted attempt's leftovers on `refs/ralph/rescue/<loop>/<n>`; clear them.

        Only paths whose content the rescue commit holds are put back to HEAD, so nothing
        that is not saved there is ever touched.
        """
        validate_loop_id(loop_id)
        head = self.current_commit()
        if head is None:
            return None
        with self._scratch_index() as env:
            tree = self._stage_tree(env, memory_from_head=True, head=head)
        if tree == self._tree_of(head):
            self._git.run("reset", "-q", "--", ".", self._exclude)
            return None
        ref = f"refs/ralph/rescue/{loop_id}/{int(iteration)}"
        old = self._git.run("rev-parse", "-q", "--verify", ref, check=False)[1].decode().strip()
        message = f"ralph: {loop_id} iteration {iteration} leftovers of an interrupted attempt"
        sha = self._commit_tree(tree, [head, *([old] if old else [])], message)
        self._git.run("update-ref", "-m", message, ref, sha)
        self._put_back(head, sha)
        return ref


@functools.cache
def _background() -> ThreadPoolExecutor:
    """One worker for diffs that run while the checks do (threads die with the process)."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="ralph-diff")


def _numstat_change(entry: str, status: Mapping[str, str]) -> FileChange:
    added, deleted, path = entry.split("\t", 2)
    letter = status.get(path, "M")[:1]
    kind: ChangeKind = "created" if letter == "A" else "deleted" if letter == "D" else "modified"
    if added == "-":  # git marks binary files with dashes
        return FileChange(path, kind, 0, 0, "binary file")
    return FileChange(path, kind, int(added), int(deleted), "")


def _literal(paths: Sequence[str]) -> list[str]:
    return [f":(literal){name}" for name in paths]


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes() if path.is_file() else None
    except OSError:
        return None
