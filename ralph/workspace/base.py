"""The Workspace seam: what the loop needs from the project directory, with or without git.

`GitWorkspace` (git.py) keeps a branch with one commit per iteration; `SnapshotWorkspace`
(snapshot.py), outside git, hashes files to see what an attempt changed. Both report a
`ChangeSet`, so the loop records what the actor really did either way.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from ralph.records import Action, ActionType, Changes, TotalChanges
from ralph.redact import redact

DIFF_CAP = 4000  # characters of diff kept per action in a record

ChangeKind = Literal["modified", "created", "deleted"]
ACTION_TYPES: dict[str, ActionType] = {
    "modified": "code_modification",
    "created": "file_creation",
    "deleted": "file_deletion",
}


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
    ) -> None:
        self._files = files
        self._pending = pending
        # the actor's own git commands (a commit, a reset, a checkout) that ralph undid
        self.git_moves: list[str] = git_moves or []

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
        noun = "file" if t.files_changed == 1 else "files"
        head = f"{t.files_changed} {noun} changed, +{t.lines_added} -{t.lines_deleted}"
        return f"{head}: {name_some(self.paths(), 5)}"


class Workspace(Protocol):
    """What the loop needs from the project directory, with or without git."""

    root: Path
    is_git: bool

    def begin_iteration(self) -> None: ...
    def changes(self) -> ChangeSet: ...
    def commit_iteration(self, message: str) -> str | None: ...
    def restore(self, commit: str) -> None: ...
    def current_commit(self) -> str | None: ...


def shown(path: str) -> str:
    """A path as valid UTF-8 text: a file name that is not UTF-8 (kept exactly, with surrogate
    escapes, for git) gets U+FFFD for its undecodable bytes, so records can always be written."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def cap_diff(diff: str, cap: int = DIFF_CAP) -> str:
    if len(diff) <= cap:
        return diff
    return diff[:cap] + f"\n[... diff truncated: {len(diff) - cap} more characters]"


def name_some(paths: list[str], limit: int) -> str:
    shown = ", ".join(paths[:limit])
    return shown + (f", ... (+{len(paths) - limit} more)" if len(paths) > limit else "")
