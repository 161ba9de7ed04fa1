"""The Workspace seam: what the loop needs from the project directory, with or without git.

The loop drives one lifecycle through it: `preflight_loop` (refuse before any check runs),
`start_loop` (the loop branch), per iteration `begin_iteration`, `changes`, `original` and
`put_back` (protected tests), `commit_iteration` and `restore` (rollback), and `resume_loop`
after an interruption. `GitWorkspace` (git.py) keeps a branch with one commit per iteration;
`SnapshotWorkspace` (snapshot.py), outside git, hashes files to see what an attempt changed and
answers the rest with no-ops. Both report a `ChangeSet`, so the loop records what the actor
really did either way. `GitState` is what the loop's state file keeps of the branch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from ralph.glyphs import plural
from ralph.records import Action, ActionType, Changes, TotalChanges
from ralph.redact import redact

__all__ = [
    "ChangeSet",
    "FileChange",
    "GitState",
    "GivenBack",
    "Workspace",
    "cap_diff",
    "name_some",
]  # the seam: what other packages use

DIFF_CAP = 4000  # characters of diff kept per action in a record

ChangeKind = Literal["modified", "created", "deleted"]
ACTION_TYPES: dict[str, ActionType] = {
    "modified": "code_modification",
    "created": "file_creation",
    "deleted": "file_deletion",
}


# changes to tracked files only: `git stash` takes exactly those (and leaves untracked files,
# which never stop a loop), `git stash pop` brings them back
DIRTY_HINT = (
    "`git stash` (then `git stash pop` after the loop), or `git commit -am WIP`; or pass "
    "--allow-dirty to start the loop from them (untracked files never need this)"
)


@dataclass
class FileChange:
    path: str
    kind: ChangeKind
    additions: int
    deletions: int
    diff: str


class ChangeSet:
    """What an attempt changed, file by file.

    A git workspace computes the diffs in a background thread while the checks run (they read
    two fixed trees, nothing the checks can touch); reading `files` waits for them.
    """

    def __init__(
        self,
        files: list[FileChange] | None = None,
        *,
        pending: Future[list[FileChange]] | None = None,
        git_moves: list[str] | None = None,
        prefix: str = "",
        held_back: list[str] | None = None,
    ) -> None:
        self._files = files
        self._pending = pending
        # where the workspace's root lies under the paths (git names them from the repository's
        # top, which a project in a subfolder is not): "" or "sub/dir/"
        self.prefix = prefix
        # the actor's own git commands (a commit, a reset, a checkout) that ralph undid
        self.git_moves: list[str] = git_moves or []
        # what was left in the tree uncommitted: too large, too many (workspace/held.py)
        self.held_back: list[str] = held_back or []

    @property
    def files(self) -> list[FileChange]:
        if self._files is None:
            self._files = self._pending.result() if self._pending is not None else []
        return self._files

    def actions(self) -> list[Action]:
        """One record action per file; diffs capped and redacted before they reach disk."""
        return [
            Action(
                type=ACTION_TYPES[f.kind],
                description=f"{f.kind} {shown(f.path)} (+{f.additions} -{f.deletions})",
                file_path=shown(f.path),
                changes=Changes(f.additions, f.deletions, cap_diff(redact(f.diff))),
            )
            for f in self.files
        ]

    def total(self) -> TotalChanges:
        return TotalChanges(
            files_changed=len(self.files),
            lines_added=sum(f.additions for f in self.files),
            lines_deleted=sum(f.deletions for f in self.files),
        )

    def paths(self) -> list[str]:
        """The changed paths as text for records and prompts (see `shown`)."""
        return [shown(f.path) for f in self.files]

    def summary(self) -> str:
        if not self.files:
            return "no changes"
        t = self.total()
        head = f"{plural(t.files_changed, 'file')} changed, +{t.lines_added} -{t.lines_deleted}"
        return f"{head}: {name_some(self.paths(), 5)}"


@dataclass(frozen=True)
class GitState:
    """The state file's `git` object: where the loop branch started and the commit of each
    iteration, so a rollback or a resumed loop returns to exactly those trees."""

    branch: str | None = None
    base_commit: str | None = None  # HEAD at the start, or the commit of --allow-dirty's work
    original_branch: str | None = None  # the branch the loop started from (None: detached)
    original_commit: str | None = None
    user_changes: str | None = None  # the stash entry holding --allow-dirty's work as it was
    worktree: str | None = None  # the linked worktree a --worktree loop works in
    commits: Mapping[str, str] = field(default_factory=dict)  # iteration (as text) -> sha

    def commit_of(self, iteration: int) -> str | None:
        """The tree of `iteration`; 0 is the starting point."""
        return self.base_commit if iteration == 0 else self.commits.get(str(iteration))

    def committed(self, iteration: int, sha: str) -> GitState:
        return replace(self, commits={**self.commits, str(iteration): sha})

    def user_changes_note(self, *, held: bool = True) -> str | None:
        """What to tell a user whose uncommitted work `start_loop` saved (`--allow-dirty`) and
        did not give back yet: where it is and the one command that brings it back; `held`
        while the loop may still give it back itself (it is running, or paused)."""
        if not self.user_changes:
            return None
        where = self.original_branch or (self.original_commit or "")[:12] or "your branch"
        switch = (
            f"git switch {self.original_branch}"
            if self.original_branch
            else f"git switch --detach {(self.original_commit or 'HEAD')[:12]}"
        )
        return (
            f"your uncommitted changes on {where} are saved as they were (staged and "
            f"unstaged) in `git stash list`; "
            + ("the loop gives them back when it ends, or: " if held else "to get them back: ")
            + f"{switch} && git stash apply --index {self.user_changes[:12]}"
        )

    def to_json(self) -> dict[str, Any]:
        """What is known, None left out; `commits` once the loop has its branch."""
        data: dict[str, Any] = {
            "branch": self.branch,
            "base_commit": self.base_commit,
            "original_branch": self.original_branch,
            "original_commit": self.original_commit,
            "user_changes": self.user_changes,
            "commits": dict(self.commits) if self.branch is not None else None,
            "worktree": self.worktree,
        }
        return {key: value for key, value in data.items() if value is not None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GitState:
        """Lenient: keys it does not know are left out, a missing one is None."""

        def text(key: str) -> str | None:
            value = data.get(key)
            return None if value is None else str(value)

        commits = data.get("commits")
        return cls(
            branch=text("branch"),
            base_commit=text("base_commit"),
            original_branch=text("original_branch"),
            original_commit=text("original_commit"),
            user_changes=text("user_changes"),
            worktree=text("worktree"),
            commits={str(k): str(v) for k, v in commits.items()}
            if isinstance(commits, Mapping)
            else {},
        )


class Workspace(Protocol):
    """What the loop needs from the project directory, with or without git: the lifecycle of a
    loop and of each iteration. Without git the lifecycle is a no-op and nothing rolls back."""

    root: Path

    def preflight_loop(self, loop_id: str, *, allow_dirty: bool) -> None:
        """Refuse, before any check runs, what would stop `start_loop` (say, a dirty tree)."""
        ...

    def start_loop(self, loop_id: str, *, allow_dirty: bool) -> GitState | None:
        """Begin the loop's history (its branch); None where there is none (no git)."""
        ...

    def resume_loop(self, git: GitState | None, loop_id: str, iteration: int) -> list[str]:
        """Before a resumed loop goes on: the tree exactly as the state's `iteration` left it,
        an interrupted attempt's leftovers saved aside; returns what was done, one note each."""
        ...

    def begin_iteration(self) -> None: ...

    def changes(self) -> ChangeSet:
        """What the attempt changed since `begin_iteration`."""
        ...

    def commit_iteration(self, message: str) -> str | None:
        """Commit the attempt; its sha, or None without git."""
        ...

    def restore(self, commit: str) -> None:
        """Roll the code back to `commit` (memory stays); raises without git."""
        ...

    def original(self, path: str) -> bytes | None:
        """The file `path` (as `changes()` names it) as the attempt found it at
        `begin_iteration`; None when it was not there."""
        ...

    def put_back(self, paths: Sequence[str]) -> None:
        """Make `paths` (as `changes()` names them) what they were at `begin_iteration`: a file
        that was not there is removed. The attempt's other changes stay (loop/protect.py)."""
        ...

    def current_commit(self) -> str | None: ...

    def end_loop(self, git: GitState) -> GivenBack | None:
        """At a loop's end, give back what `start_loop` took from the user's tree
        (`--allow-dirty`: the branch it started on and the uncommitted work, exactly); None
        when it took nothing."""
        ...


@dataclass(frozen=True)
class GivenBack:
    """Where the user's uncommitted work (`--allow-dirty`) is once the loop has ended."""

    note: str  # one line: where it is, and the one command that brings it back if one is needed
    restored: bool  # back on the branch the loop started from, as it was: nothing to do


def shown(path: str) -> str:
    """A path as valid UTF-8 text: a file name that is not UTF-8 (kept exactly, with surrogate
    escapes, for git) gets U+FFFD for its undecodable bytes, so records can always be written."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def cap_diff(diff: str, cap: int = DIFF_CAP) -> str:
    if len(diff) <= cap:
        return diff
    return diff[:cap] + f"\n[... diff truncated: {plural(len(diff) - cap, 'more character')}]"


def name_some(paths: list[str], limit: int) -> str:
    shown = ", ".join(paths[:limit])
    return shown + (f", ... (+{len(paths) - limit} more)" if len(paths) > limit else "")


class GitCommands(Protocol):
    """What the trees and the held-back check need of `git.Git` (a protocol: git.py builds on
    both)."""

    toplevel: Path

    def run(
        self, *args: str, env: Mapping[str, str] | None = None, check: bool = True
    ) -> tuple[int, bytes, str]: ...
    def text(self, *args: str, env: Mapping[str, str] | None = None) -> str: ...
    def names(self, *args: str, env: Mapping[str, str] | None = None) -> list[str]: ...
    def ok(self, *args: str) -> bool: ...
    def rev(self, rev: str) -> str | None: ...
    def current_branch(self) -> str | None: ...
