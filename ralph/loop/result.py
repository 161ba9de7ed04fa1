"""How a loop ends: its stop reasons, exit codes and the one object `ralph run --json` prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ralph.errors import EXIT_ABORTED

if TYPE_CHECKING:
    from ralph.memory.state import LoopState

EXIT_CODES = {
    "success": 0,
    "already_green": 0,
    "limit": 1,
    "stalled": 1,
    "budget": 3,
    "aborted": EXIT_ABORTED,
    "interrupted": 130,  # Ctrl-C, SIGTERM, SIGHUP: paused, `ralph resume` continues it
    "diminishing": 1,  # Self-Refine's stops (policy.py)
    "degraded": 1,
}
FINAL_STATUS = {
    "success": "completed",
    "already_green": "completed",
    "limit": "failed",
    "stalled": "failed",
    "budget": "failed",
    "diminishing": "failed",
    "degraded": "failed",
}
ABORTED_MESSAGE = "aborted by `ralph abort`: the loop is over (start a new one with `ralph run`)"
INTERRUPTED_MESSAGE = "interrupted: `ralph resume` continues the loop"


@dataclass
class LoopResult:
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

    @classmethod
    def of(
        cls,
        state: LoopState,
        exit_code: int,
        message: str,
        *,
        reflections_dir: str,
        regressions: int = 0,
    ) -> LoopResult:
        """The result of the loop `state` describes, as it was saved."""
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
            **git_outcome(state),
        )

    def to_json(self) -> dict[str, Any]:
        """The one object `ralph run --json` prints."""
        return {
            "loop_id": self.loop_id,
            "status": self.status,
            "stop_reason": self.stop_reason,
            "iterations": self.iterations,
            "best_iteration": self.best_iteration,
            "best_reward": self.best_reward,
            "reward_history": self.reward_history,
            "usage": self.usage,
            "reflections_dir": self.reflections_dir,
            "exit_code": self.exit_code,
            "targets": self.targets,
            "guards": self.guards,
            "regressions": self.regressions,
            "branch": self.branch,
            "base_branch": self.base_branch,
            "base_commit": self.base_commit,
            "best_commit": self.best_commit,
        }


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


def loop_status(loop_id: str | None, cwd: Path | None = None) -> dict[str, Any]:
    """What `ralph status` shows of a loop (the latest by default), from its state alone: no
    loop machinery is loaded, so the command answers at once."""
    from ralph.ids import validate_loop_id
    from ralph.memory.store import MemoryStore

    store = MemoryStore.discover(cwd)
    store.require()
    state = store.read_state(validate_loop_id(loop_id) if loop_id else store.latest_loop())
    return {
        "loop_id": state.loop_id,
        "task": state.task,
        "status": store.effective_status(state),
        "stop_reason": state.stop_reason,
        "iteration": state.iteration,
        "max_iterations": state.settings.max_iterations,
        "best_iteration": state.best_iteration,
        "best_reward": state.best_reward,
        "baseline_reward": state.baseline.reward if state.baseline else None,
        "reward_history": state.reward_history,
        "usage": state.usage.to_json(),
        **git_outcome(state),  # branch, base_branch, best_commit, worktree
        "created_at": state.created_at,
        "updated_at": state.updated_at,
    }
