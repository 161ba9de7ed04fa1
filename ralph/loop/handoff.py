"""A finished loop's work: taken (`ralph apply`) or dropped (`ralph prune`).

Both are implicit feedback (memory/feedback.py): applying a loop that succeeded counts as
accepted (a failed loop's work is applied only when asked for by `--iteration N` or `--force`,
and never counts, though `prune` then knows it was applied: `applied.json`); pruning the
branch of a loop that was neither applied nor merged counts as not taken. A person's explicit
`ralph feedback` always wins over either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ralph.errors import PreflightError, RalphError, StoreError
from ralph.files import atomic_write_json
from ralph.glyphs import plural
from ralph.ids import validate_loop_id
from ralph.loop.apply_message import apply_message
from ralph.loop.result import PRUNED_FILE, memory_hint
from ralph.memory.feedback import SUCCEEDED, read_feedback, record_feedback
from ralph.memory.store import LoopState, MemoryStore
from ralph.reading import Unreadable, read_json_bounded
from ralph.records import utc_now
from ralph.rendering import Wrapped, lines
from ralph.workspace.base import GitState, GivenBack, Workspace, name_some
from ralph.workspace.branches import Branches
from ralph.workspace.git import GitWorkspace

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

FINISHED = ("completed", "failed", "aborted")
APPLIED_FILE = "applied.json"  # in the loop's folder: `ralph apply` brought its work (`prune`)


@dataclass
class ApplyOutcome:
    json_fields: ClassVar[tuple[str, ...]] = (
        "loop_id", "iteration", "commit", "branch", "files", "conflicts", "accepted",
        "already",
    )  # fmt: skip

    loop_id: str
    iteration: int
    commit: str
    branch: str
    files: list[str]
    conflicts: list[str]
    accepted: bool  # recorded as implicit feedback
    memory_hint: str | None = None  # the command that commits the records, while untracked
    already: bool = False  # applied before and staged still: `files` are what is staged

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        where = f"iteration {self.iteration} of {self.loop_id} ({self.commit[:12]})"
        if self.already:
            yield Wrapped(
                f"already applied (staged): {where}, {plural(len(self.files), 'file')}; commit "
                "it: git commit (its message is prefilled)"
            )
            return
        if not self.files and not self.conflicts:
            yield from lines(f"nothing to apply: this branch has {where} already")
            return
        count = plural(len(self.files), "file")
        yield Wrapped(f"applied {where}: {count}, staged, not committed")
        yield from lines(*(f"  {name}" for name in self.files[:20]))
        if len(self.files) > 20:
            yield from lines(f"  ... {len(self.files) - 20} more")
        if self.conflicts:
            yield Wrapped(
                f"conflicts in {', '.join(self.conflicts)}: resolve them and commit, or undo with "
                "`git reset --merge`"
            )
            return
        yield Wrapped("review: git diff --cached", hang=8, shell=True)
        prefilled = "its message is prefilled: ralph's summary of the loop, in git's SQUASH_MSG"
        yield Wrapped("commit: git commit", hang=8, shell=True, comment=prefilled)
        if self.accepted:
            yield from lines("counted as accepted (feedback: implicitly, by apply)")
        if self.memory_hint:  # the memory is meant to be committed
            yield Wrapped(f"memory: {self.memory_hint}", hang=8, shell=True)


def apply_loop(
    store: MemoryStore,
    loop_id: str,
    iteration: int | None,
    cwd: Path | None = None,
    *,
    force: bool = False,
) -> ApplyOutcome:
    """Bring the best (or the chosen) iteration's changes onto the current branch, uncommitted;
    a loop that did not succeed only when `iteration` is chosen or `force` is given, since its
    best iteration still fails its checks. An iteration that changed nothing is refused, naming
    those that did (if any)."""
    state = store.read_state(validate_loop_id(loop_id))
    status = store.effective_status(state)
    if status == "running":
        raise PreflightError(
            f"loop {loop_id} is still running", hint=f"wait for it, or `ralph abort {loop_id}`"
        )
    succeeded = status == "completed" and state.stop_reason in SUCCEEDED
    git = state.git
    branch = git.branch if git else None
    if git is None or not branch:
        raise StoreError(
            f"loop {loop_id} has no branch to apply",
            hint="it ran without git, or its checks passed before it started",
        )
    commits = git.commits
    chosen = state.best_iteration if iteration is None else iteration
    commit = git.commit_of(chosen) if chosen else None
    if commit is None:
        have = ", ".join(sorted(commits, key=int)) or "none"
        raise StoreError(
            f"loop {loop_id} has no iteration {chosen} to apply"
            if chosen
            else f"loop {loop_id} has no iteration yet",
            hint=f"its iterations: {have}",
        )
    assert chosen is not None
    branches = Branches(cwd or Path.cwd())
    if commit != git.base_commit and branches.rev(commit) is None:
        raise StoreError(
            f"the commit of iteration {chosen} ({commit[:12]}) is gone",
            hint="its branch was deleted (ralph prune?) and git has dropped the commit",
        )
    if not _changes(branches, git, commit):
        changed = _changing(branches, git)
        if not changed:
            raise PreflightError(f"loop {loop_id} changed nothing to apply")
        which = (
            f"iteration {changed[0]} changed the code: apply it with --iteration {changed[0]}"
            if len(changed) == 1
            else f"iterations {name_some([str(n) for n in changed], 8)} changed the code: "
            "apply one with --iteration N"
        )
        raise PreflightError(
            f"iteration {chosen} of loop {loop_id} changed nothing to apply", hint=which
        )
    if not succeeded and iteration is None and not force:
        why = state.stop_reason or status
        reward = "" if state.best_reward is None else f", reward {state.best_reward:.2f}"
        raise PreflightError(
            f"loop {loop_id} did not succeed ({why}): its best iteration {chosen}{reward} "
            "still fails its checks",
            hint=f"review it (git diff {(git.base_commit or 'HEAD')[:12]} {commit[:12]}); apply it "
            f"anyway with `ralph apply {loop_id} --force`, or one iteration with --iteration N",
        )
    staged = _staged_already(store, branches, state.loop_id, chosen, commit)
    if staged is not None:  # this very apply, not committed yet: no refusal of its own work
        return ApplyOutcome(state.loop_id, chosen, commit, branch, staged, [], False, already=True)
    applied = branches.squash(commit, base=git.base_commit, loop_branch=branch)
    if applied.files or applied.conflicts:
        _note_applied(store, state.loop_id, chosen, commit, branches.rev("HEAD"), applied.index)
        records = store.valid_records(state.loop_id)
        baseline = store.read_baseline(state.loop_id)
        branches.write_squash_message(apply_message(state, records, chosen, baseline))
    elif branches.holds_change("HEAD", git.base_commit, commit):  # taken already: not prune's
        _note_applied(store, state.loop_id, chosen, commit, None, None)  # "not taken"
    # only a success's own work is taken as a verdict on it (its lessons then rank higher)
    accepted = bool(applied.files) and succeeded and chosen == state.best_iteration
    if accepted:
        accepted = record_feedback(store, state.loop_id, "accepted", source="apply") is not None

    return ApplyOutcome(
        state.loop_id,
        chosen,
        commit,
        branch,
        applied.files,
        applied.conflicts,
        accepted,
        memory_hint(store),
    )


def let_go(workspace: Workspace, state: LoopState) -> GivenBack | None:
    """What a loop holds of the user's tree (`--allow-dirty`) once it stops: an ended loop gives
    it back (their branch, their uncommitted work); a paused one still holds it and says how
    to get it back."""
    if state.git is None:
        return None
    if state.status in FINISHED:
        return workspace.end_loop(state.git)
    note = state.git.user_changes_note()
    return GivenBack(note, restored=False) if note else None


def give_back(store: MemoryStore, state: LoopState) -> GivenBack | None:
    """`ralph abort` of a loop that was not running lets go of the user's tree in its place."""

    if state.git is None or not state.git.user_changes or state.git.worktree:
        return None
    return let_go(GitWorkspace(store.root), state)


def switch_back(store: MemoryStore, state: LoopState, cwd: Path | None = None) -> str | None:
    """`git switch BASE` while this checkout is still on the loop's branch (a loop without
    `--worktree` works there, and an abort leaves it there); None when it is elsewhere."""
    git = state.git
    if git is None or not git.branch or git.worktree:
        return None
    try:
        here = Branches(cwd or store.root).checked_out_here()
    except RalphError:  # no repository here any more
        return None
    if here != git.branch:
        return None
    if git.original_branch:
        return f"git switch {git.original_branch}"
    start = git.original_commit or git.base_commit
    return f"git switch --detach {start[:12]}" if start else None


def _note_applied(
    store: MemoryStore,
    loop_id: str,
    iteration: int,
    commit: str,
    head: str | None,
    index: str | None,
) -> None:
    """`loops/<id>/applied.json`: this loop's work was taken, whatever its feedback says (a
    failed loop's apply is no verdict), so `prune` does not count it as not taken; the HEAD it
    was applied on and the index it left, so a second apply knows its own staged work."""

    data = {"iteration": iteration, "commit": commit, "timestamp": utc_now()}
    data |= {"head": head, "index": index} if head and index else {}
    atomic_write_json(store.loop_dir(loop_id) / APPLIED_FILE, data)


def _staged_already(
    store: MemoryStore, branches: Branches, loop_id: str, iteration: int, commit: str
) -> list[str] | None:
    """The staged files, when the index is exactly what applying `iteration` left on this same
    HEAD (nothing committed, staged or unstaged since); None otherwise."""
    path = store.loop_dir(loop_id) / APPLIED_FILE
    try:
        noted = read_json_bounded(path, 64 * 1024) if path.is_file() else None
    except Unreadable:
        return None
    if not isinstance(noted, dict) or not noted.get("index"):
        return None
    if (noted.get("iteration"), noted.get("commit")) != (iteration, commit):
        return None
    staged = branches.staged()
    if not staged or noted.get("head") != branches.rev("HEAD"):
        return None
    return staged if branches.index_tree() == noted["index"] else None


def _note_pruned(store: MemoryStore, item: PruneItem) -> None:
    """`loops/<id>/pruned.json`: the branch (and the commit it was at) and the worktree prune
    removed, so `ralph status` says they are gone (loop/result.pruned_note reads it)."""
    data = {
        "branch": item.branch,
        "commit": item.branch_commit,
        "worktree": item.worktree,
        "timestamp": utc_now(),
    }
    atomic_write_json(store.loop_dir(item.loop_id) / PRUNED_FILE, data)


def _changes(branches: Branches, git: GitState, commit: str) -> bool:
    """Whether `commit`'s tree differs from the loop's base: an iteration that changed nothing
    names the commit before it, and one rolled back may hold the base's tree in a new commit.
    Unknown (git cannot tell) counts as a change: the merge then says what it finds."""
    if commit == git.base_commit:
        return False
    return not git.base_commit or branches.changed_files(git.base_commit, commit) != []


def _changing(branches: Branches, git: GitState) -> list[int]:
    """The iterations whose commit is there and changed the code since the base."""
    found: dict[str, bool] = {}  # commit -> changed something (iterations share commits)
    for sha in git.commits.values():
        if sha not in found:
            found[sha] = _changes(branches, git, sha) and branches.rev(sha) is not None
    return sorted(int(n) for n, sha in git.commits.items() if found[sha])


@dataclass
class PruneItem:
    """One loop's git leftovers, and what prune does with them."""

    loop_id: str
    status: str
    updated_at: str
    branch: str | None = None  # None: gone already
    branch_commit: str | None = None
    worktree: str | None = None
    rescue_refs: list[str] = field(default_factory=list)
    not_taken: bool = False  # neither applied nor merged: implicit feedback
    kept: str | None = None  # why it stays, when it does

    @property
    def anything(self) -> bool:
        return bool(self.branch or self.worktree or self.rescue_refs)


@dataclass
class Pruned:
    """What `ralph prune` removed (or, `dry_run`, would remove) and kept."""

    json_fields: ClassVar[tuple[str, ...]] = ("dry_run", "loops")

    dry_run: bool
    loops: list[PruneItem]
    records: Path  # where the records stay

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        verb = "would remove" if self.dry_run else "removed"
        for item in self.loops:
            if item.kept:
                yield Wrapped(f"kept {item.loop_id}: {item.kept}")
                continue
            what = []
            if item.worktree:
                what.append(f"worktree {item.worktree}")
            if item.branch:
                what.append(f"branch {item.branch} (was {(item.branch_commit or '')[:12]})")
            if item.rescue_refs:
                what.append(plural(len(item.rescue_refs), "rescue ref"))
            taken = ", not taken" if item.not_taken else ""
            yield Wrapped(f"{verb} {', '.join(what)}  [{item.loop_id}, {item.status}{taken}]")
        gone = [item for item in self.loops if not item.kept]
        if not gone:
            yield from lines("nothing to prune")
        elif not self.dry_run:
            kept = "its records" if len(gone) == 1 else "their records"
            yield Wrapped(f"{plural(len(gone), 'loop')} pruned; {kept} stay in {self.records}")


def plan_prune(
    store: MemoryStore, keep: int, loop_ids: list[str], cwd: Path | None = None
) -> list[PruneItem]:
    """What `ralph prune` removes: finished loops' branches, worktrees and rescue refs, all but
    the `keep` most recent; named loops must be finished (a running loop is refused)."""
    named = [validate_loop_id(loop_id) for loop_id in loop_ids]
    running = store.running_loops()
    states: list[LoopState] = []
    for loop_id in named:
        state = store.read_state(loop_id)
        status = store.effective_status(state, running)
        if status not in FINISHED:
            raise PreflightError(
                f"loop {loop_id} is {status}: prune removes finished loops' branches only",
                hint=f"let it finish, or `ralph abort {loop_id}` first",
            )
        states.append(state)
    if not named:
        states = [
            item.state
            for item in store.list_loops()
            if item.state is not None and store.effective_status(item.state, running) in FINISHED
        ]
    branches = Branches(cwd or store.root)
    items = [_item(store, branches, state) for state in states]
    items = [item for item in items if item.anything]
    if not named and keep > 0:  # list_loops is oldest first
        items.sort(key=lambda item: item.updated_at)
        for item in items[len(items) - keep :]:
            item.kept = item.kept or f"one of the {keep} most recent (--keep)"
    return items


def _item(store: MemoryStore, branches: Branches, state: LoopState) -> PruneItem:
    git = state.git
    item = PruneItem(state.loop_id, state.status, state.updated_at)
    branch = git.branch if git else None
    if branch:
        item.branch_commit = branches.rev(f"refs/heads/{branch}")
        item.branch = branch if item.branch_commit else None
    worktree = git.worktree if git else None
    if worktree and Path(worktree).is_dir():
        item.worktree = worktree
        changed = branches.worktree_changes(Path(worktree))
        if changed:
            item.kept = (
                f"its worktree {worktree} has uncommitted changes ({plural(len(changed), 'file')})"
            )
    item.rescue_refs = branches.rescue_refs(state.loop_id)
    holder = branches.checked_out().get(item.branch or "")
    if holder is not None and (not worktree or holder.resolve() != Path(worktree).resolve()):
        item.kept = f"{item.branch} is checked out in {holder} (switch away first)"
    best = git.commit_of(state.best_iteration) if git and state.best_iteration else None
    offered = bool(best) and best != (git.base_commit if git else None)  # work to take
    applied = (store.loop_dir(state.loop_id) / APPLIED_FILE).is_file()
    if (
        git
        and item.branch
        and offered
        and not applied
        and read_feedback(store, state.loop_id) is None
    ):
        item.not_taken = not (
            branches.merged_elsewhere(str(best), item.branch)
            or branches.holds_change(git.original_branch or "HEAD", git.base_commit, str(best))
        )
    return item


def prune(store: MemoryStore, items: list[PruneItem], cwd: Path | None = None) -> None:
    """Remove what the plan says, in order: worktree, branch, rescue refs; then the feedback."""
    branches = Branches(cwd or store.root)
    for item in items:
        if item.kept:
            continue
        if item.worktree:
            branches.remove_worktree(Path(item.worktree))
        if item.branch:
            branches.delete_branch(item.branch)
        for ref in item.rescue_refs:
            branches.delete_ref(ref)
        if item.branch or item.worktree:
            _note_pruned(store, item)
        if item.not_taken:
            record_feedback(store, item.loop_id, "not_taken", source="prune")
