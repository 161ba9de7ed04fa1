"""A finished loop's branch: bring its work onto yours (`ralph apply`), or drop it (`ralph prune`).

`apply` is `git merge --squash` of the chosen iteration's commit: its changes land in your work
tree and index, uncommitted, and `git commit` then offers ralph's message (loop/apply_message.py).
`prune` deletes a loop's branch, its rescue refs and its worktree; never a record, and never a
worktree holding changes nobody committed. `changed_files`: what a loop's best commit changed
since its base, for the summary, `ralph status` and the batch table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ralph.errors import PreflightError
from ralph.files import atomic_write_text, forget_bytecode
from ralph.workspace.base import name_some, shown
from ralph.workspace.git import Git, GitWorkspace
from ralph.workspace.locate import find_repo_root, main_worktree


@dataclass(frozen=True)
class ChangedFile:
    """One file a loop changed, with its lines added and removed (None for a binary file)."""

    path: str
    added: int | None
    removed: int | None


# ralph's own memory is no change of the loop's, wherever the project keeps it
NOT_CHANGES = (":(exclude,glob).aiwg/**", ":(exclude,glob)**/.aiwg/**")


def parse_numstat(out: str) -> list[ChangedFile]:
    """`git diff --numstat -z --no-renames` as files: `-` counts (a binary file) are None; a
    name that is not UTF-8 shown with U+FFFD (`shown`), so JSON and a terminal can take it."""
    files = []
    for item in out.split("\0"):
        added, removed, path = ([*item.split("\t", 2), "", ""])[:3]
        if not path:
            continue
        files.append(
            ChangedFile(
                shown(path),
                int(added) if added.isdigit() else None,
                int(removed) if removed.isdigit() else None,
            )
        )
    return files


@dataclass
class Applied:
    files: list[str]
    conflicts: list[str] = field(default_factory=list)


class Branches:
    """The loop branches of the repository holding `root`."""

    def __init__(self, root: Path) -> None:
        top = find_repo_root(root)
        if top is None:
            raise PreflightError(f"{root} is not inside a git work tree", hint="run it in one")
        self.top = top
        self._git = Git(top)

    def rev(self, rev: str) -> str | None:
        return self._git.rev(rev)

    def changed_files(self, base: str, commit: str) -> list[ChangedFile] | None:
        """What `commit` changed since `base`, file by file, ralph's memory left out; None when
        git cannot tell (a commit is gone)."""
        status, out, _ = self._git.run(
            "diff", "--numstat", "-z", "--no-renames", base, commit, "--", ":/", *NOT_CHANGES,
            check=False,
        )  # fmt: skip
        return parse_numstat(out.decode("utf-8", "surrogateescape")) if status == 0 else None

    # apply ------------------------------------------------------------------------------------
    def squash(self, commit: str, *, loop_branch: str | None) -> Applied:
        """`git merge --squash COMMIT` onto the current branch of a clean tree."""
        here = self._git.current_branch()
        if loop_branch and here == loop_branch:
            raise PreflightError(
                f"{loop_branch} is checked out: apply brings a loop's work onto another branch",
                hint="switch to the branch the work is for (git switch main), then apply",
            )
        dirty = GitWorkspace(self.top).dirty_files()
        if dirty:
            raise PreflightError(
                f"the working tree has uncommitted changes: {name_some(dirty, 10)}",
                hint="commit or stash them first: apply leaves its changes uncommitted",
            )
        # --ff: a `merge.ff = false` setting would make git refuse --squash
        status, _, err = self._git.run("merge", "--squash", "--ff", commit, check=False)
        conflicts = self._git.names("diff", "--name-only", "-z", "--diff-filter=U")
        if status != 0 and not conflicts:
            first = (err.strip().splitlines() or ["no output"])[0]
            raise PreflightError(f"git merge --squash failed: {first}", hint="see `git status`")
        files = self._git.names("diff", "--cached", "--name-only", "-z", "--no-renames")
        return Applied(files, conflicts)

    def write_squash_message(self, message: str) -> None:
        """Replace git's "Squashed commit of the following:" in SQUASH_MSG, which `git commit`
        offers after `merge --squash`, with ralph's own message."""
        path = self._git.text("rev-parse", "--path-format=absolute", "--git-path", "SQUASH_MSG")
        atomic_write_text(Path(path.strip()), message, durable=False)

    # prune ------------------------------------------------------------------------------------
    def merged_elsewhere(self, commit: str, branch: str) -> bool:
        """Whether another local branch holds `commit` (the loop's work was merged)."""
        if self.rev(commit) is None:
            return False
        out = self._refs("--contains", commit, "refs/heads/")
        return any(ref != f"refs/heads/{branch}" for ref in out)

    def _refs(self, *args: str) -> list[str]:
        return self._git.text("for-each-ref", "--format=%(refname)", *args).splitlines()

    def checked_out(self) -> dict[str, Path]:
        """Branch -> the worktree that has it checked out (the main one included)."""
        out = self._git.text("worktree", "list", "--porcelain")
        found: dict[str, Path] = {}
        path: Path | None = None
        for line in out.splitlines():
            if line.startswith("worktree "):
                path = Path(line.removeprefix("worktree "))
            elif line.startswith("branch refs/heads/") and path is not None:
                found[line.removeprefix("branch refs/heads/")] = path
        return found

    def rescue_refs(self, loop_id: str) -> list[str]:
        return self._refs(f"refs/ralph/rescue/{loop_id}/")

    def worktree_changes(self, path: Path) -> list[str]:
        """What `git worktree remove` would refuse over: changed or untracked files there."""
        if main_worktree(path) is None:
            return []
        status = Git(path).names("status", "--porcelain", "-z", "--untracked-files=normal")
        return [entry[3:] for entry in status]

    def remove_worktree(self, path: Path) -> None:
        top = main_worktree(path) or self.top
        self._git.run("worktree", "remove", str(path))
        forget_bytecode(top, path)

    def delete_branch(self, branch: str) -> None:
        self._git.run("branch", "-D", "-q", branch)

    def delete_ref(self, ref: str) -> None:
        self._git.run("update-ref", "-d", ref)
