"""The loop's state file, typed: its parts read and write the schema's format, old files still
read, and the totals follow the one rule for money (unknown stays unknown)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ralph import schemas
from ralph.config import CheckSpec, Settings
from ralph.errors import StoreError
from ralph.evaluators.judging import Baseline
from ralph.memory.state import BaselineSummary, LoopState, Totals
from ralph.memory.store import MemoryStore
from ralph.records import Usage, sum_costs
from ralph.workspace.base import GitState

from .conftest import EXAMPLE_LOOP, REPO

A_STATE: dict[str, Any] = {  # as this version writes it, every part present
    "loop_id": "ralph-typed-1",
    "task": "make f pass its tests",
    "status": "paused",
    "created_at": "2026-01-01T00:00:00Z",
    "updated_at": "2026-01-01T00:01:00Z",
    "iteration": 2,
    "best_iteration": 1,
    "best_reward": 0.75,
    "reward_history": [0.75, 0.5],
    "baseline": {
        "passed": False,
        "reward": 0.25,
        "error_count": 3,
        "error_fingerprint": "abc",
        "success": "baseline",
        "roles": {"tests": "target", "ruff": "guard"},
        "check_error_counts": {"tests": 3, "ruff": 1},
    },
    "settings": Settings(
        actor="cmd:true", checks=[CheckSpec("tests", "pytest", "pytest")], max_iterations=4
    ).snapshot(),
    "git": {
        "branch": "ralph/ralph-typed-1",
        "base_commit": "b" * 40,
        "original_branch": "main",
        "original_commit": "b" * 40,
        "user_changes": "c" * 40,
        "commits": {"1": "d" * 40, "2": "e" * 40},
        "worktree": "/tmp/wt",
    },
    "usage": {"tokens_in": 900, "tokens_out": 100, "cost_usd": None, "wall_seconds": 12.5},
    "stop_reason": "interrupted",
    "pid": 123,
    "host": "here",
    "schema_version": "1.0",
}


def test_a_state_reads_and_writes_back_exactly() -> None:
    assert schemas.errors(schemas.LOOP_STATE, A_STATE) == []
    state = LoopState.from_json(A_STATE)
    assert state.baseline is not None and state.baseline.named("guard") == ["ruff"]
    assert state.git is not None and state.git.commit_of(0) == "b" * 40
    assert state.git.commit_of(2) == "e" * 40 and state.git.commit_of(3) is None
    assert state.settings.max_iterations == 4 and state.settings.checks[0].parser == "pytest"
    assert state.usage == Totals(900, 100, None, 12.5) and state.usage.tokens == 1000
    assert state.to_json() == A_STATE


def test_the_example_loop_from_an_earlier_version_still_reads(tmp_path: Path) -> None:
    """Its baseline has check_rewards and no roles, its settings only some keys."""
    shutil.copytree(REPO / ".aiwg", tmp_path / ".aiwg")
    store = MemoryStore(tmp_path)
    before = json.loads(store.state_path(EXAMPLE_LOOP).read_text())
    state = store.read_state(EXAMPLE_LOOP)
    assert state.baseline is not None and state.baseline.success is None
    assert state.baseline.check_rewards == {"pytest": 0.2727, "mypy": 1.0, "ruff": 1.0}
    assert state.settings.actor == "claude" and state.usage.cost_usd == 0.2158
    legacy = Baseline.legacy(state.baseline)  # judged strictly, as loops then were
    assert legacy.success == "strict" and legacy.named("target") == ["pytest", "mypy", "ruff"]
    store.write_state(state)
    after = json.loads(store.state_path(EXAMPLE_LOOP).read_text())
    for part in ("baseline", "git", "usage", "reward_history", "best_reward", "stop_reason"):
        assert after[part] == before[part], part
    settings = after["settings"]  # whole now: every setting, as a resume would run with it
    assert (settings["actor"], settings["max_iterations"]) == ("claude", 5)
    assert [c["command"] for c in settings["checks"]] == ["pytest", "mypy .", "ruff check ."]
    assert schemas.errors(schemas.LOOP_STATE, after) == []


def test_keys_an_earlier_or_later_version_wrote_are_left_out_not_an_error() -> None:
    data = {**A_STATE, "git": {**A_STATE["git"], "stash": "x"}}
    data["settings"] = {**A_STATE["settings"], "a_removed_setting": 1}
    state = LoopState.from_json(data)
    assert state.git is not None and state.git.branch == "ralph/ralph-typed-1"
    assert state.to_json() == A_STATE


def test_a_state_whose_settings_cannot_be_read_is_one_store_error(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    store.write_state(LoopState("ralph-bad-1", "task"))
    path = store.state_path("ralph-bad-1")
    data = json.loads(path.read_text())
    data["settings"]["timeout"] = "soon"
    path.write_text(json.dumps(data))
    with pytest.raises(StoreError, match="invalid loop state: timeout"):
        store.read_state("ralph-bad-1")
    assert store.list_loops()[0].problem is not None  # listed, not a crash


def test_a_state_with_a_status_the_schema_does_not_know_is_never_written(tmp_path: Path) -> None:
    """The one writer skips the schema; the one field its types leave open is
    checked, and nothing reaches the file."""
    store = MemoryStore(tmp_path)
    with pytest.raises(StoreError, match="status 'finished'"):
        store.write_state(LoopState("ralph-bad-2", "task", status="finished"))
    assert not store.state_path("ralph-bad-2").exists()


def test_a_worktree_loop_before_its_branch_keeps_only_the_worktree() -> None:
    git = GitState(worktree="/w")
    assert git.to_json() == {"worktree": "/w"}
    assert GitState.from_json({"worktree": "/w"}) == git
    started = GitState(branch="ralph/x", base_commit="a", worktree="/w").committed(1, "s")
    assert GitState.from_json(started.to_json()) == started
    detached = GitState.from_json({"branch": "ralph/x", "original_branch": None})
    assert detached.original_branch is None and detached.to_json() == {
        "branch": "ralph/x",
        "commits": {},
    }
    assert started.user_changes_note() is None
    kept = GitState(branch="ralph/x", user_changes="f" * 40, original_branch="main")
    note = str(kept.user_changes_note())
    assert "on main" in note and note.endswith("git stash apply --index ffffffffffff")


def test_baseline_summary_round_trips_as_the_evaluator_writes_it() -> None:
    summary = BaselineSummary.from_json(A_STATE["baseline"])
    assert summary.to_json() == A_STATE["baseline"]
    assert summary.named("target") == ["tests"]


# the one rule for money ----------------------------------------------------------------------


def test_a_sum_with_an_unknown_part_is_unknown() -> None:
    assert sum_costs(0.25, 0.5) == 0.75
    assert sum_costs(0.25, None) is None
    assert sum_costs() == 0.0  # no part: nothing was spent
    assert sum_costs(0.1, 0.2) == 0.3  # rounded, no float noise


def test_totals_stay_unknown_once_an_iteration_cost_is_unknown() -> None:
    totals = Totals()
    assert totals.cost_usd is None  # nobody reported a cost yet
    totals = totals.plus(Usage(actor_tokens_in=10, cost_usd=0.5), first=True)
    assert (totals.tokens_in, totals.cost_usd) == (10, 0.5)
    totals = totals.plus(Usage(reflector_tokens_out=5, cost_usd=0.25), first=False)
    assert (totals.tokens, totals.cost_usd) == (15, 0.75)
    totals = totals.plus(Usage(cost_usd=None), first=False)
    assert totals.cost_usd is None
    totals = totals.plus(Usage(cost_usd=1.0), first=False)
    assert totals.cost_usd is None  # unknown stays unknown


def test_counting_an_iteration_keeps_the_best_and_the_history() -> None:
    from .fakes.records import record

    state = LoopState("ralph-count-1", "task")
    state.count(record(1, reward=0.5, cost=0.1))
    state.count(record(2, reward=0.25, cost=0.2))
    assert (state.iteration, state.best_iteration, state.best_reward) == (2, 1, 0.5)
    assert state.reward_history == [0.5, 0.25] and state.usage.cost_usd == 0.3
