"""`ralph run --worktree`: loops side by side in one repository, memory in the main tree."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from ralph.ids import loop_branch
from ralph.memory.store import MemoryStore

from ..conftest import RunCli
from .conftest import (
    USER_FILES,
    arm,
    assert_invariants,
    assert_no_leftovers,
    finish,
    git,
    heuristic,
    plan,
    start,
    write,
)


def test_two_worktree_loops_run_at_once_and_record_in_the_main_repo(
    ralph: RunCli, project: Path
) -> None:
    plan(project, {"1": write("partial"), "2": write("full")})
    (project / "calc.py").write_text("# the user's uncommitted work\n")
    ids = ["ralph-left-00000001", "ralph-right-00000002"]
    procs = [start(project, *heuristic("--worktree", "--loop-id", loop_id)) for loop_id in ids]
    results = [finish(proc) for proc in procs]
    assert [code for code, _, _ in results] == [0, 0], results
    assert all("uncommitted changes in" in err and "calc.py" in err for _, _, err in results)
    assert (project / "calc.py").read_text() == "# the user's uncommitted work\n"
    assert git(project, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    store = MemoryStore(project)
    assert store.loop_ids() == sorted(ids)
    for loop_id in ids:
        state = store.read_state(loop_id)
        worktree = Path(str(state.git and state.git.worktree))
        common = git(project, "rev-parse", "--path-format=absolute", "--git-common-dir")
        assert worktree == Path(common) / "ralph-worktrees" / loop_id
        assert git(worktree, "rev-parse", "--abbrev-ref", "HEAD") == loop_branch(loop_id)
        assert (worktree / "calc.py").read_text() == "def f(x: int) -> int:\n    return abs(x)\n"
        assert not (worktree / ".aiwg").exists()  # records went to the main repository
        status = json.loads(ralph("status", loop_id, "--json", cwd=project).out)
        assert status["worktree"] == str(worktree)
        human = ralph("status", loop_id, cwd=project).out
        assert str(worktree) in human
    assert "??" not in git(project, "status", "--porcelain", "--", "tests")  # no copy in sight
    git(project, "checkout", "-q", "calc.py")
    assert_invariants(project)
    for name, text in USER_FILES.items():
        assert (project / name).read_text() == text


def test_worktree_loop_resumes_from_inside_its_worktree(ralph: RunCli, project: Path) -> None:
    plan(project, {"1": write("partial"), "2": write("full")})
    result = ralph(*heuristic("--worktree", "--max-iterations", "1"), cwd=project)
    assert result.code == 1, result.err
    loop_id = json.loads(result.out)["loop_id"]
    worktree = Path(str(MemoryStore(project).read_state(loop_id).git.worktree))  # type: ignore[union-attr]
    resumed = ralph("resume", loop_id, "--max-iterations", "2", "--json", cwd=worktree)
    assert resumed.code == 0, resumed.err
    assert json.loads(resumed.out)["reward_history"] == [0.75, 1.0]
    assert (project / "calc.py").read_text() == "def f(x: int) -> int:\n    return 0\n"
    assert_invariants(project)


def test_already_green_worktree_is_removed(ralph: RunCli, project: Path) -> None:
    (project / "calc.py").write_text("def f(x: int) -> int:\n    return abs(x)\n")
    git(project, "commit", "-qam", "fixed")
    result = ralph(*heuristic("--worktree"), cwd=project)
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    assert summary["stop_reason"] == "already_green"
    assert git(project, "worktree", "list").count("\n") == 0  # only the main tree
    status = json.loads(ralph("status", summary["loop_id"], "--json", cwd=project).out)
    assert status["worktree"] is None  # the state names no worktree that is gone


def test_worktree_needs_git(ralph: RunCli, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RALPH_WORKTREE", "1")  # the flag's variable (config key `worktree`)
    result = ralph(*heuristic("--no-git"), cwd=project)
    assert result.code == 2 and "--worktree needs git" in result.err


def test_worktree_loop_killed_then_resumed_from_the_main_tree(ralph: RunCli, project: Path) -> None:
    # the agent of iteration 2 edits calc.py in the worktree, then SIGKILLs ralph and hangs on
    plan(project, {"1": write("partial"), "2": {**write("half"), "kill": True, "hang": True}})
    arm("actor")
    code, _, err = finish(start(project, *heuristic("--worktree")))
    assert code == -signal.SIGKILL, err
    loop_id = MemoryStore(project).loop_ids()[0]
    worktree = Path(str(MemoryStore(project).read_state(loop_id).git.worktree))  # type: ignore[union-attr]
    assert json.loads(ralph("status", loop_id, "--json", cwd=project).out)["status"] == "crashed"

    plan(project, {"default": write("full")})
    resumed = ralph("resume", loop_id, "--json", cwd=project)
    assert resumed.code == 0, resumed.err
    assert json.loads(resumed.out)["reward_history"] == [0.75, 1.0]
    assert (worktree / "calc.py").read_text() == "def f(x: int) -> int:\n    return abs(x)\n"
    rescued = git(worktree, "for-each-ref", "--format=%(refname)", "refs/ralph/rescue")
    assert rescued.endswith(f"{loop_id}/2")  # the killed attempt's edit is kept, not lost
    assert (project / "calc.py").read_text() == "def f(x: int) -> int:\n    return 0\n"
    assert git(project, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert_no_leftovers()
    assert_invariants(project)
