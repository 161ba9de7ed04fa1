"""How a loop ends: its stop reasons, exit codes and the one object `ralph run --json` prints."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ralph.errors import EXIT_ABORTED, EXIT_FOR_PERSON, RalphError
from ralph.glyphs import changed_text, sparkline
from ralph.ids import validate_loop_id
from ralph.memory.store import MemoryStore
from ralph.reading import Unreadable, read_json_bounded
from ralph.rendering import Wrapped, to_data
from ralph.workspace.base import name_some

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

    from ralph.memory.state import LoopState
    from ralph.workspace.base import GivenBack
    from ralph.workspace.branches import ChangedFile

EXIT_CODES = {
    "success": 0,
    "already_green": 0,
    "suspect": 1,  # the checks pass, held-out tests do not (loop/holdout.py)
    "limit": 1,
    "stalled": 1,
    "budget": 3,
    "aborted": EXIT_ABORTED,
    "interrupted": 130,  # Ctrl-C, SIGTERM, SIGHUP: paused, `ralph resume` continues it
    "diminishing": 1,  # Self-Refine's stops (policy.py)
    "usage_limit": EXIT_FOR_PERSON,  # paused: a usage limit not waited out (loop/limits.py)
    "degraded": 1,
    "needs_human": EXIT_FOR_PERSON,  # the agent asked for a person (loop/escalation.py)
}
FINAL_STATUS = {
    "success": "completed",
    "already_green": "completed",
    "suspect": "failed",
    "limit": "failed",
    "stalled": "failed",
    "budget": "failed",
    "diminishing": "failed",
    "degraded": "failed",
    "needs_human": "needs_human",  # resumable, once a person has looked
    "usage_limit": "paused",
}
ABORTED_MESSAGE = "aborted by `ralph abort`: the loop is over (start a new one with `ralph run`)"
INTERRUPTED_MESSAGE = "interrupted: `ralph resume` continues the loop"


@dataclass
class LoopResult:
    """How a loop ended; `json_fields` are the one object `ralph run --json` prints."""

    json_fields: ClassVar[tuple[str, ...]] = (
        "loop_id",
        "status",
        "stop_reason",
        "iterations",
        "best_iteration",
        "best_reward",
        "reward_history",
        "usage",
        "reflections_dir",
        "exit_code",
        "targets",
        "guards",
        "regressions",
        "branch",
        "base_branch",
        "base_commit",
        "best_commit",
        "changed_files",
    )

    loop_id: str
    status: str
    stop_reason: str
    exit_code: int
    iterations: int
    best_iteration: int | None
    best_reward: float | None
    reward_history: list[float]
    usage: dict[str, Any]
    reflections_dir: str
    message: str = ""
    targets: list[str] = field(default_factory=list)
    guards: list[str] = field(default_factory=list)
    regressions: int = 0
    branch: str | None = None  # the loop's git branch, and where it started from
    base_branch: str | None = None
    base_commit: str | None = None
    best_commit: str | None = None  # the commit holding the best iteration's tree
    worktree: str | None = None
    baseline_reward: float | None = None
    changed_files: list[ChangedFile] | None = None  # None: unknown (a commit gone)
    user_changes: str | None = None  # --allow-dirty: where the user's uncommitted work is
    restored: bool = False  # the loop gave it back on the branch it started from
    memory_hint: str | None = None  # the command that commits the records, while untracked
    staged: list[str] = field(default_factory=list)  # staged in the checkout: apply refuses

    def unstage_first(self) -> list[str]:
        """The final line before `apply` while the checkout holds staged changes (the user's,
        given back by `--allow-dirty`, or there all along beside a `--worktree` loop): apply
        refuses them, since a `git commit` would take them as the loop's work."""
        if not self.staged:
            return []
        mine = name_some(self.staged, 5)
        return [
            f"first   commit or unstage your staged changes ({mine}): apply stages only the "
            "loop's work, for a commit of its own"
        ]

    def way_back(self) -> list[str]:
        """A paused loop's last lines once its branch exists (an error, Ctrl-C): the command
        that continues it, then the one back to where it started (the checkout stays on the
        loop's branch, unless the loop has a worktree of its own)."""
        if self.status != "paused" or not self.branch:
            return []
        base = self.base_branch or f"--detach {(self.base_commit or 'HEAD')[:12]}"
        back = [] if self.worktree or self.restored else [f"switch  git switch {base}"]
        return [f"resume  ralph resume {self.loop_id}", *back]

    @classmethod
    def of(
        cls,
        state: LoopState,
        exit_code: int,
        message: str,
        *,
        reflections_dir: str,
        regressions: int = 0,
        store: MemoryStore | None = None,
        given_back: GivenBack | None = None,
    ) -> LoopResult:
        """The result of the loop `state` describes, as it was saved; with its `store`, the
        files it changed; `given_back`: where the user's uncommitted work is (`--allow-dirty`)."""
        baseline = state.baseline
        return cls(
            loop_id=state.loop_id,
            status=state.status,
            stop_reason=state.stop_reason or "",
            exit_code=exit_code,
            iterations=state.iteration,
            best_iteration=state.best_iteration,
            best_reward=state.best_reward,
            reward_history=list(state.reward_history),
            usage=state.usage.to_json(),
            reflections_dir=reflections_dir,
            message=message,
            targets=baseline.named("target") if baseline else [],
            guards=baseline.named("guard") if baseline else [],
            regressions=regressions,
            baseline_reward=baseline.reward if baseline else None,
            changed_files=changed_files(store, state) if store is not None else [],
            memory_hint=memory_hint(store) if store is not None else None,
            user_changes=given_back.note if given_back else None,
            restored=bool(given_back and given_back.restored),
            staged=staged_in_checkout(store, state) if store is not None else [],
            **git_outcome(state),
        )


def git_outcome(state: LoopState) -> dict[str, Any]:
    """Where a loop's work is: its branch, the branch it started from, the commit holding the
    best iteration's tree (None before the first iteration) and its worktree, if any."""
    git, best = state.git, state.best_iteration
    return {
        "branch": git.branch if git else None,
        "base_branch": git.original_branch if git else None,
        "base_commit": git.base_commit if git else None,
        "best_commit": git.commit_of(best) if git and best else None,
        "worktree": git.worktree if git else None,
    }


def staged_in_checkout(store: MemoryStore, state: LoopState) -> list[str]:
    """What is staged in the checkout `ralph apply` runs in, once a loop with a branch ended
    (only the user's can be: a loop commits all it does)."""
    from ralph.workspace.branches import Branches

    git = state.git
    if git is None or not git.branch or state.status not in ("completed", "failed", "aborted"):
        return []
    try:
        return Branches(store.root).staged()
    except RalphError:  # no repository here any more
        return []


def changed_files(store: MemoryStore, state: LoopState) -> list[ChangedFile] | None:
    """The files a loop changed: `git diff --numstat` from its base commit to its best one;
    without git, what its iterations' records say they changed in the working tree (summed per
    file). ralph's own `.aiwg/` is never a change; None when git cannot tell."""
    from ralph.workspace.branches import Branches, ChangedFile

    git, best = state.git, state.best_iteration
    if git is not None:
        commit = git.commit_of(best) if best else None
        if not git.base_commit or not commit or commit == git.base_commit:
            return []
        try:
            return Branches(store.root).changed_files(git.base_commit, commit)
        except RalphError:  # no repository here any more, or no git: unknown, not an error
            return None
    counts: dict[str, tuple[int | None, int | None]] = {}
    for record in store.valid_records(state.loop_id):
        for action in record.actor_output.actions:
            path, lines = action.file_path, action.changes
            if not path or lines is None or ".aiwg" in path.split("/"):
                continue
            added, removed = counts.get(path, (0, 0))
            counts[path] = (_plus(added, lines.additions), _plus(removed, lines.deletions))
    return [ChangedFile(path, *counts[path]) for path in sorted(counts)]


def memory_hint(store: MemoryStore) -> str | None:
    """The one command that commits the memory's records, while git neither tracks nor ignores
    some (they are meant to be committed: the lessons travel with the code). `git commit --
    PATH` commits them alone, whatever else is staged (an `apply`'s work, the user's own)."""

    from ralph.workspace.branches import Branches

    folder = store.base / "reflections"
    try:
        branches = Branches(store.root)
        if not folder.is_dir() or not branches.untracked(folder):
            return None
    except RalphError:  # no git here: nothing to commit
        return None
    where = Path(os.path.relpath(folder, branches.top)).as_posix()
    return f'git add {where} && git commit -m "ralph: reflections" -- {where}'


def _plus(total: int | None, more: int | None) -> int | None:
    """Line counts add up while known; a count nobody knows (a binary file) stays unknown."""
    return None if total is None or more is None else total + more


def files_json(files: list[ChangedFile] | None) -> list[dict[str, Any]] | None:
    """The `changed_files` of `--json`: None when unknown."""
    data: list[dict[str, Any]] | None = to_data(files)
    return data


PRUNED_FILE = "pruned.json"  # in the loop's folder: what `ralph prune` removed, and when


@dataclass
class PrunedNote:
    """What `ralph prune` removed of a loop (loop/handoff.py writes it), so `ralph status` does
    not name a branch or a worktree that is gone as if it were there."""

    branch: str | None  # the branch deleted, None when it was gone already
    commit: str | None  # the commit the branch was at
    worktree: str | None
    timestamp: str


def pruned_note(store: MemoryStore, loop_id: str) -> PrunedNote | None:
    """The loop's `pruned.json`; None when it was never pruned (or the file does not read)."""
    path = store.loop_dir(loop_id) / PRUNED_FILE
    if not path.is_file():
        return None
    try:
        data = read_json_bounded(path, 64 * 1024)
    except Unreadable:
        return None
    if not isinstance(data, dict):
        return None
    said = {key: data.get(key) for key in ("branch", "commit", "worktree", "timestamp")}
    if not all(value is None or isinstance(value, str) for value in said.values()):
        return None
    return PrunedNote(said["branch"], said["commit"], said["worktree"], said["timestamp"] or "")


LABEL_COLUMN = 14  # where `ralph status` starts each value, after its label


@dataclass
class LoopStatus:
    """What `ralph status` shows of a loop, from its state alone; its fields, in their order,
    are what `ralph status --json` prints."""

    loop_id: str
    task: str
    status: str
    stop_reason: str | None
    iteration: int
    max_iterations: int
    best_iteration: int | None
    best_reward: float | None
    baseline_reward: float | None
    reward_history: list[float]
    usage: dict[str, Any]
    branch: str | None
    base_branch: str | None
    base_commit: str | None
    best_commit: str | None
    worktree: str | None
    changed_files: list[ChangedFile] | None
    created_at: str
    updated_at: str
    worse: list[str] = field(default_factory=list)  # attempts that made something worse: kept
    # or rolled back, and why (rollback.verdicts)
    pruned: PrunedNote | None = None  # `ralph prune` removed its branch or worktree
    waiting_until: str | None = None  # a running loop waits out a usage limit (loop/limits.py)
    waiting_for: str | None = None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        best = "-" if self.best_reward is None else f"{self.best_reward:.2f}"
        waiting = self.status == "running" and self.waiting_until
        shown = [
            f"{self.loop_id}  {waiting_text(self.waiting_until) if waiting else self.status}",
            f"  task        {self.task}",
            f"  iteration   {self.iteration}/{self.max_iterations}  best {best}",
            f"  rewards     {sparkline(self.reward_history)} {self.reward_history}",
            f"  usage       {self.spent()}",
        ]
        gone = self.pruned
        if self.branch and gone and gone.branch == self.branch:
            at = f", it was at {gone.commit[:12]}" if gone.commit else ""
            shown.append(f"  branch      {self.branch} (pruned{at})")
        elif self.branch:
            commit = f" (best commit {self.best_commit[:12]})" if self.best_commit else ""
            shown.append(f"  branch      {self.branch}{commit}")
        if self.worktree:
            removed = " (pruned)" if gone and gone.worktree == self.worktree else ""
            shown.append(f"  worktree    {self.worktree}{removed}")
        if self.iteration:
            shown.append(f"  changed     {changed_text(files_json(self.changed_files))}")
        shown += [f"  {'worse' if n == 0 else '':<12}{text}" for n, text in enumerate(self.worse)]
        if self.stop_reason:
            shown.append(f"  stopped     {self.stop_reason}")
        if waiting and self.waiting_for:
            shown.append(f"  limit       {self.waiting_for}")
        for n, line in enumerate(shown):  # a value wraps under its own column
            yield Wrapped(line, hang=4 if n == 0 else LABEL_COLUMN)

    def spent(self) -> str:
        """Tokens and money so far; `none yet` before anything was counted (as the live
        footer says), not unknown."""
        if self.iteration == 0 and not self.usage.get("unrecorded_calls"):
            return "none yet"
        tokens_in, tokens_out = self.usage.get("tokens_in"), self.usage.get("tokens_out")
        tokens = (
            "tokens unknown"
            if tokens_in is None and tokens_out is None
            else f"{tokens_in or 0} in / {tokens_out or 0} out tokens"
        )
        cost = self.usage.get("cost_usd")
        return f"{tokens}, cost {'unknown' if cost is None else f'${cost:.4f}'}"


def loop_status(loop_id: str | None, cwd: Path | None = None) -> LoopStatus:
    """What `ralph status` shows of a loop (the latest by default), from its state and, for the
    attempts that made something worse, its records: no loop machinery is loaded, so the
    command answers at once."""
    from ralph.loop.rollback import may_have_worse, verdicts

    store = MemoryStore.discover(cwd)
    store.require()
    state = store.read_state(validate_loop_id(loop_id) if loop_id else store.latest_loop())
    return LoopStatus(
        loop_id=state.loop_id,
        task=state.task,
        status=store.effective_status(state),
        stop_reason=state.stop_reason,
        iteration=state.iteration,
        max_iterations=state.settings.max_iterations,
        best_iteration=state.best_iteration,
        best_reward=state.best_reward,
        baseline_reward=state.baseline.reward if state.baseline else None,
        reward_history=state.reward_history,
        usage=state.usage.to_json(),
        **git_outcome(state),  # branch, base_branch, base_commit, best_commit, worktree
        changed_files=changed_files(store, state),
        created_at=state.created_at,
        updated_at=state.updated_at,
        worse=[w.text for w in verdicts(store.valid_records(state.loop_id), state)]
        if may_have_worse(state)
        else [],
        pruned=pruned_note(store, state.loop_id),
        waiting_until=state.waiting_until,
        waiting_for=state.waiting_for,
    )


def way_back_of(store: MemoryStore, loop_id: str) -> tuple[str, ...]:
    """`LoopResult.way_back` of a loop an error stopped (saved as paused); () when there is
    no such loop, or no branch yet."""
    try:
        state = store.read_state(loop_id)
    except RalphError:
        return ()
    from ralph.workspace.branches import Branches

    lines = LoopResult.of(state, 2, "", reflections_dir="").way_back()
    with contextlib.suppress(RalphError):  # the switch only while the loop's branch is here
        if state.git and Branches(store.root).checked_out_here() != state.git.branch:
            lines = [line for line in lines if not line.startswith("switch ")]
    return tuple(lines)


def waiting_text(until: str | None) -> str:
    """`waiting until 13:05 UTC` (local time; the date too when not today)."""
    from ralph.usage_limits import clock_text

    try:
        return f"waiting until {clock_text(datetime.fromisoformat(until or '').timestamp())}"
    except ValueError:
        return f"waiting until {until}"
