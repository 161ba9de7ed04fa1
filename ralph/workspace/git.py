"""Git for the loop: a clean-tree guard, the loop branch, one commit per iteration, rollback.

Everything here protects user work: no `git clean`, no hard reset, nothing under `.aiwg/ralph/`
is ever committed or checked out (memory survives rollbacks), nothing git ignored when the loop
started is ever committed or removed (`ignored.py`), and diffs and commits are built in a
temporary index so the user's own index is left alone (`trees.py`; what an agent's own git
commands did is undone in `reclaim.py`, a dirty start kept by `stash.py`, the branch checked
out again by `switch.py`).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from ralph.errors import PreflightError, RalphError
from ralph.files import write_atomically
from ralph.ids import loop_branch, validate_loop_id
from ralph.workspace import contention, hardened, ignored
from ralph.workspace.base import DIRTY_HINT, ChangeSet, GitState, GivenBack, name_some
from ralph.workspace.held import Limits
from ralph.workspace.locate import find_repo_root
from ralph.workspace.reclaim import reclaim
from ralph.workspace.stash import give_back, stash_user_changes
from ralph.workspace.switch import checkout_loop_branch, refuse_stale_locks
from ralph.workspace.trees import Trees

DEFAULT_IDENTITY = {"NAME": "ralph", "EMAIL": "ralph@localhost"}


# the tree's fsmonitor runs nothing for ralph: an agent can write .git/config
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

        safe = hardened.options(self.toplevel)  # no hook, fsmonitor or filter of the tree's
        for wait in (*contention.PAUSES, None):  # another git's half-done write: try again
            try:
                status, out, err = self._cmd.execute(
                    ["git", "-C", str(self.toplevel), "-c", "core.quotePath=false", *safe, *args],
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
            entry = contention.half_written(str(err)) if status != 0 else None
            if entry is None or wait is None:
                break
            contention.pause(wait)
        if check and status != 0:
            first = (str(err).strip().splitlines() or ["no output"])[0]
            hint = f"see `git status` in {self.toplevel}"
            if entry is not None:
                hint = f"{entry} stays half written: if no git command is running, one adding "
                hint += "that worktree was killed; remove that folder"
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

    def __init__(self, root: Path, limits: Limits | None = None) -> None:
        self.root = root.resolve()
        top = find_repo_root(self.root)
        if top is None:
            raise PreflightError(f"{root} is not inside a git work tree", hint="use --no-git")
        self._git = Git(top)
        self._git.env.update(self._identity_env())
        memory = Path(os.path.relpath(self.root / ".aiwg" / "ralph", top)).as_posix()
        index = Path(self._git.text("rev-parse", "--git-path", "index"))
        self._trees = Trees(self._git, memory, index if index.is_absolute() else top / index)
        self._trees.limits = limits or self._trees.limits
        self._base_tree: str | None = None
        self._committed_tree: str | None = None
        self._committed_head: str | None = None  # HEAD as this loop's last commit left it
        self._branch: str | None = None  # the loop's branch, once started or resumed
        rel = Path(os.path.relpath(self.root, top)).as_posix()
        self._prefix = "" if rel == "." else rel + "/"  # the root under the repository's top

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
        """Modified, staged or untracked (not ignored) paths outside `.aiwg/ralph/`;
        `untracked=False`: only tracked files' uncommitted changes (what a worktree lacks)."""
        return self._trees.dirty(untracked=untracked)

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
            users = ignored.untracked_at_start(self._git.names, self._trees.exclude)
            top = self._git.toplevel  # at a resume an untracked file may be an attempt's: rescued
            ignored.write_snapshot(path, top, self._git.names, sources, users if fresh else [])
        self._git.env.update(ignored.config_env(path))
        self._trees.ignored = path

    # -- the Workspace protocol ----------------------------------------------------------------

    def begin_iteration(self) -> None:
        if self._committed_tree is not None:  # the tree is as the last commit left it
            self._base_tree, self._committed_tree = self._committed_tree, None
            return
        with self._trees.scratch() as env:
            self._base_tree = self._trees.stage(env)

    def changes(self) -> ChangeSet:
        """Stage the attempt's tree now (before the checks can add files); diff it meanwhile.

        First undo the actor's own git commands (`reclaim`): what they did to the files is
        part of the attempt; what they did to branches and HEAD is not."""
        moves = self.reclaim()
        base = self._base()
        with self._trees.scratch() as env:
            tree = self._trees.stage(env)
        held = list(self._trees.held.notes)
        if tree == base:
            return ChangeSet([], git_moves=moves, prefix=self._prefix, held_back=held)
        pending = _background().submit(self._trees.diff, base, tree)
        return ChangeSet(pending=pending, git_moves=moves, prefix=self._prefix, held_back=held)

    def _base(self) -> str:
        """The tree `begin_iteration` staged (HEAD's before it ran)."""
        return self._base_tree or self._trees.tree_of(self.current_commit())

    def original(self, path: str) -> bytes | None:
        """`path` (from the repository's top) in the tree `begin_iteration` staged."""
        status, out, _ = self._git.run("cat-file", "blob", f"{self._base()}:{path}", check=False)
        return out if status == 0 else None

    def put_back(self, paths: Sequence[str]) -> None:
        """Files as `begin_iteration` found them; the index is left alone."""
        self._trees.put_back(self._base(), paths)

    def reclaim(self) -> list[str]:
        """The loop's branch back where ralph's last commit left it, checked out, the files as
        they are (`reclaim.py`); returns what had moved, one sentence each."""
        return reclaim(self._trees, self._branch, self._committed_head)

    def commit_iteration(self, message: str) -> str | None:
        """Commit everything but memory; None when the tree is HEAD's (an attempt that changed
        nothing gets no empty commit: HEAD is its commit)."""
        head = self._committed_head or self.current_commit()
        self._git.run("add", "-A", "--", ".", self._trees.exclude, *self._trees.held.pathspecs)
        self._trees.unstage_ignored()
        with self._trees.scratch() as env:  # a copy of that index: the work tree is staged
            tree = self._trees.stage(env, memory_from_head=True, head=head, staged=True)
        if head and tree == self._trees.tree_of(head):
            self._committed_tree, self._committed_head = tree, head
            self._trees.head_tree = (head, tree)
            return None
        sha = self._trees.commit(tree, [head] if head else [], message)
        self._git.run("update-ref", "-m", message, "HEAD", sha, head or "")
        # Outside memory the work tree is this tree now: the next iteration's diff base, unless
        # a rollback changes the tree first. Saves staging the whole tree once per iteration.
        self._committed_tree, self._committed_head = tree, sha
        self._trees.head_tree = (sha, tree)
        return sha

    def restore(self, commit: str) -> None:
        """Roll code back to `commit`; memory, ignored and untracked files stay as they are."""
        self._committed_tree = None  # HEAD stays: a rollback is committed as the next iteration
        self._trees.roll_back(commit, self.current_commit())

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
        dirty = self.dirty_files(untracked=False)  # untracked files stay yours, out of the loop
        if dirty and not allow_dirty:
            raise PreflightError(
                f"the working tree has uncommitted changes: {name_some(dirty, 10)}",
                hint=DIRTY_HINT,
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
        original = self._git.current_branch() or self._noted_base_branch(loop_id)
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

    def _noted_base_branch(self, loop_id: str) -> str | None:
        """The branch of the checkout `add_worktree` made this worktree from (its HEAD is
        detached until the loop's branch exists); None for any other tree."""
        try:
            return base_branch_path(self._git, loop_id).read_text("utf-8").strip() or None
        except (OSError, UnicodeDecodeError):
            return None

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
        return stash_user_changes(self._trees, where)

    def end_loop(self, git: GitState) -> GivenBack | None:
        return give_back(self._trees, git)

    def _checkout_loop_branch(self, branch: str) -> None:
        checkout_loop_branch(self._trees, branch)

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
        refuse_stale_locks(self._git, branch)
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
        self._trees.checkout(target, current)

    def rescue(self, loop_id: str, iteration: int) -> str | None:
        """Save an interrupted attempt's leftovers on `refs/ralph/rescue/<loop>/<n>`; clear them.

        Only paths whose content the rescue commit holds are put back to HEAD, so nothing
        that is not saved there is ever touched.
        """
        validate_loop_id(loop_id)
        head = self.current_commit()
        if head is None:
            return None
        with self._trees.scratch() as env:
            tree = self._trees.stage(env, memory_from_head=True, head=head)
        if tree == self._trees.tree_of(head):
            self._git.run("reset", "-q", "--", ".", self._trees.exclude)
            return None
        ref = f"refs/ralph/rescue/{loop_id}/{int(iteration)}"
        old = self._git.run("rev-parse", "-q", "--verify", ref, check=False)[1].decode().strip()
        message = f"ralph: {loop_id} iteration {iteration} leftovers of an interrupted attempt"
        sha = self._trees.commit(tree, [head, *([old] if old else [])], message)
        self._git.run("update-ref", "-m", message, ref, sha)
        self._put_back(head, sha)
        return ref


def base_branch_path(git: Git, loop_id: str) -> Path:
    """Where `add_worktree` notes the branch its checkout was on, in the new worktree's own git
    dir: the loop there starts on a detached HEAD, yet its work is for that branch (the state's
    `original_branch`, the `base_branch` that `ralph apply` merges into)."""
    name = f"ralph/{loop_id}/base-branch"
    return Path(git.text("rev-parse", "--path-format=absolute", "--git-path", name))


@functools.cache
def _background() -> ThreadPoolExecutor:
    """One worker for diffs that run while the checks do (threads die with the process)."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="ralph-diff")
