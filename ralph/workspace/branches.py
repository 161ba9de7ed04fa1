"""A finished loop's branch: bring its work onto yours (`ralph apply`), or drop it (`ralph prune`).

`apply` squashes the chosen iteration's changes since the loop's starting point (never the
user's uncommitted work `--allow-dirty` put there): they land in your work tree and index,
uncommitted, and `git commit` then offers ralph's message (loop/apply_message.py).
`prune` deletes a loop's branch, its rescue refs and its worktree; never a record, and never a
worktree holding changes nobody committed. `changed_files`: what a loop's best commit changed
since its base, for the summary, `ralph status` and the batch table.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ralph.errors import PreflightError
from ralph.files import atomic_write_text, forget_bytecode
from ralph.workspace.base import name_some, shown
from ralph.workspace.git import Git, GitWorkspace
from ralph.workspace.locate import find_repo_root, main_worktree
from ralph.workspace.tree_walk import is_tool_file


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
    index: str | None = None  # the index's tree after a clean apply: a second apply knows it


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

    def checked_out_here(self) -> str | None:
        """The branch this checkout is on; None on a detached HEAD."""
        return self._git.current_branch()

    def staged(self) -> list[str]:
        """The files whose changes are staged (the index differs from HEAD)."""
        return self._git.names("diff", "--cached", "--name-only", "-z", "--no-renames")

    def index_tree(self) -> str | None:
        """The index as a tree (git's own object, no file of the user's changes); None while
        it holds a conflict or git cannot tell."""
        status, out, _ = self._git.run("write-tree", check=False)
        return out.decode().strip() if status == 0 else None

    def changed_files(self, base: str, commit: str) -> list[ChangedFile] | None:
        """What `commit` changed since `base`, file by file, ralph's memory left out; None when
        git cannot tell (a commit is gone)."""
        status, out, _ = self._git.run(
            "diff", "--numstat", "-z", "--no-renames", base, commit, "--", ":/", *NOT_CHANGES,
            check=False,
        )  # fmt: skip
        return parse_numstat(out.decode("utf-8", "surrogateescape")) if status == 0 else None

    def untracked(self, folder: Path) -> list[str]:
        """The files under `folder` that git neither tracks nor ignores."""
        where = Path(os.path.relpath(folder, self.top)).as_posix()
        return self._git.names(
            "ls-files", "-z", "--others", "--exclude-standard", "--", f":(literal){where}"
        )

    # apply ------------------------------------------------------------------------------------
    def squash(self, commit: str, *, base: str | None, loop_branch: str | None) -> Applied:
        """The loop's own changes, from `base` (its starting point) to `commit`, merged into
        the current branch's tree and index, uncommitted, as `git merge --squash` would, but
        from the loop's start, not from where the branches meet: the starting point of
        `--allow-dirty` holds the user's uncommitted work, which is theirs, not the loop's.

        Refused while something is staged (a `git commit` would take it as the loop's work) or
        while a file the loop changed has uncommitted changes it did not start from; other
        uncommitted and untracked files stay as they are, unstaged. A file with the user's
        uncommitted edit the loop started from (`--allow-dirty`) gets both in the tree, the
        loop's change alone in the index."""
        here = self._git.current_branch()
        if loop_branch and here == loop_branch:
            raise PreflightError(
                f"{loop_branch} is checked out: apply brings a loop's work onto another branch",
                hint="switch to the branch the work is for (git switch main), then apply",
            )
        staged = self.staged()
        if staged:
            raise PreflightError(
                f"the index holds staged changes: {name_some(staged, 10)}",
                hint="commit or unstage them first (git restore --staged): apply stages the "
                "loop's work for a commit of its own",
            )
        since = base or self._git.text("merge-base", "HEAD", commit)
        changed = set(self._git.names("diff", "--name-only", "-z", "--no-renames", since, commit))
        dirty = [name for name in GitWorkspace(self.top).dirty_files() if name in changed]
        carried = self._as_started(since, dirty)
        blocking = [name for name in dirty if name not in carried]
        if blocking:
            raise PreflightError(
                f"the working tree has uncommitted changes to files the loop changed: "
                f"{name_some(blocking, 10)}",
                hint="commit or stash them first: apply leaves its changes uncommitted",
            )
        if carried:  # HEAD's version, merged below; the user's is in `since`, as verified
            self._git.run("checkout", "HEAD", "--", *_literal(carried))
        status, _, err = self._git.run("merge-recursive", since, "--", "HEAD", commit, check=False)
        conflicts = self._git.names("diff", "--name-only", "-z", "--diff-filter=U")
        if carried and status != 0:
            self._git.run("reset", "-q", "--merge", check=False)
            self._write_from(since, carried)
            raise PreflightError(
                "the loop's changes do not merge cleanly into HEAD where you have uncommitted "
                f"edits: {name_some(carried, 10)}",
                hint="commit or stash them first, then apply",
            )
        if status != 0 and not conflicts:
            first = (err.strip().splitlines() or ["no output"])[0]
            raise PreflightError(
                f"git merge of the loop's work failed: {first}", hint="see `git status`"
            )
        self._write_from(commit, carried)  # the user's edits and the loop's, unstaged
        return Applied(self.staged(), conflicts, None if conflicts else self.index_tree())

    def _as_started(self, since: str, names: list[str]) -> list[str]:
        """Those of `names` whose bytes in the tree are what `since` holds: the uncommitted
        edits the loop started from, so its work on them already includes them."""
        if not names:
            return []
        held = self._git.names("ls-tree", "-z", "--name-only", since, "--", *_literal(names))
        present = [name for name in names if name in held and (self.top / name).is_file()]
        if not present:
            return []
        now = self._git.text("hash-object", "--", *present).split()
        then = self._git.text("rev-parse", *(f"{since}:{name}" for name in present)).split()
        return [name for name, a, b in zip(present, now, then, strict=True) if a == b]

    def _write_from(self, rev: str, names: list[str]) -> None:
        """The tree's copy of `names` as `rev` holds them (the index is left alone)."""
        for name in names:
            status, data, _ = self._git.run("cat-file", "blob", f"{rev}:{name}", check=False)
            if status == 0:
                (self.top / name).write_bytes(data)

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

    def holds_change(self, target: str, base: str | None, commit: str) -> bool:
        """Whether `target` already has the loop's change from `base` to `commit`: the commit
        itself, every file it changed as the loop left it, or an equivalent patch for each of
        its commits (`git cherry`: a rebase or cherry-pick). Another loop's apply or a merge by
        hand may have taken it: that is work taken, never feedback that it was not."""
        if base is None or self.rev(target) is None or self.rev(commit) is None:
            return False
        if self._git.ok("merge-base", "--is-ancestor", commit, target):
            return True
        changed = self._git.names("diff", "--name-only", "-z", "--no-renames", base, commit)
        if not changed:
            return False
        if self._git.ok("diff", "--quiet", commit, target, "--", *_literal(changed)):
            return True
        cherry = self._git.text("cherry", target, commit, base).splitlines()
        return bool(cherry) and all(line.startswith("-") for line in cherry)

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
        """The user's work `git worktree remove` would refuse over: changed or untracked files
        there, but not the untracked files tools keep for themselves (bytecode, `.coverage`).
        `--no-renames`: a rename's old path would come as an entry of its own with no status."""
        if main_worktree(path) is None:
            return []
        status = Git(path).names(
            "status", "--porcelain", "-z", "--no-renames", "--untracked-files=all"
        )
        return [e[3:] for e in status if not (e.startswith("?? ") and is_tool_file(e[3:]))]

    def remove_worktree(self, path: Path) -> None:
        top = main_worktree(path) or self.top
        # git refuses over any untracked file; tools' own are no reason to keep a worktree
        force = [] if self.worktree_changes(path) else ["--force"]
        self._git.run("worktree", "remove", *force, str(path))
        forget_bytecode(top, path)

    def delete_branch(self, branch: str) -> None:
        self._git.run("branch", "-D", "-q", branch)

    def delete_ref(self, ref: str) -> None:
        self._git.run("update-ref", "-d", ref)


def _literal(paths: list[str]) -> list[str]:
    return [f":(literal){name}" for name in paths]
