"""SIGKILL of ralph itself at many points, then `ralph resume` to completion: nothing lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ralph.ids import loop_branch
from ralph.memory.store import MemoryStore

from ..conftest import RunCli
from .conftest import (
    USER_FILES,
    arm,
    assert_invariants,
    check_command,
    finish,
    git,
    heuristic,
    install_hook,
    leftovers,
    plan,
    start,
    write,
)

POINTS = {
    # point: (how the kill is reached, the iteration it interrupts)
    "actor": "the agent of iteration 2 edits calc.py, then kills ralph",
    "check": "the check of iteration 1 kills ralph (its second run; the first is the baseline)",
    "txn-prepared": "git's reference-transaction hook kills ralph before iteration 1's commit",
}
# "txn-committed" (the hook kills ralph after the commit, before the record is written):
# test_git_moves.py's test_a_commit_the_state_does_not_know_is_set_aside_on_resume, one run


@pytest.mark.parametrize("point", sorted(POINTS))
def test_sigkill_then_resume_completes(point: str, ralph: RunCli, project: Path) -> None:
    killer = f"{sys.executable} {os.environ['KILLER']}"
    extra: list[str] = []
    if point == "actor":
        # after the kill the agent hangs on, as an orphan: resume must stop it first
        plan(project, {"1": write("partial"), "2": {**write("half"), "kill": True, "hang": True}})
        arm("actor")
    elif point == "check":
        plan(project, {"1": write("partial")})
        extra = ["--test", f"{killer} check; {check_command()}"]
        arm("check", 2)
    else:
        plan(project, {"1": write("partial")})
        install_hook(project, "reference-transaction", f'exec {killer} "txn-$1"')
        arm(point)
    proc = start(project, *heuristic(*extra))
    code, _, err = finish(proc)
    assert code == -signal.SIGKILL, err
    assert (Path(os.environ["SEEN_DIR"]) / f"killed-at-{point}").exists()
    # a check, or git inside its hook, finishes on its own (a git command SIGKILLed mid-way
    # would leave a lock: test_stale_git_lock_*); the hanging agent is left to `resume`
    if point == "actor":
        assert leftovers(), "the orphaned agent should still be running"
    else:
        assert_invariants(project, finished=False)
    loop_id = MemoryStore(project).loop_ids()[0]
    listed = json.loads(ralph("reflections", "list", "--json", cwd=project).out)
    assert listed[0]["status"] == "crashed"
    assert ralph("reflections", "validate", cwd=project).code == 0

    plan(project, {"default": write("full")})
    resumed = ralph("resume", loop_id, "--json", cwd=project)
    assert resumed.code == 0, resumed.err
    if point == "actor":
        assert "process group" in resumed.err and "the crashed run (pid" in resumed.err
    summary = json.loads(resumed.out)
    assert summary["status"] == "completed" and summary["reward_history"][-1] == 1.0
    records = assert_invariants(project)
    assert records[-1]["evaluator_output"]["passed"] is True
    if point == "actor":  # iteration 1 kept; the interrupted attempt's edit saved, not lost
        assert summary["reward_history"] == [0.75, 1.0]
        ref = f"refs/ralph/rescue/{loop_id}/2"
        assert "return x if x < 3" in git(project, "show", f"{ref}:calc.py")


def test_kill_while_a_record_is_written_leaves_old_or_new(tmp_path: Path) -> None:
    """A writer killed at arbitrary instants: the record is always whole (old or new), and the
    temporary files of interrupted writes are cleared (as `ralph resume` does).

    Event-driven, so a busy machine cannot make it kill the writer before its first write:
    the writer says when each write is done; the kill comes after a whole one, mid-way into
    the next (the small delays only vary where in it)."""
    store = MemoryStore(tmp_path)
    target = store.record_path("ralph-x", 1)
    writer = (
        "import sys, itertools\n"
        "from pathlib import Path\n"
        "from ralph.memory.store import atomic_write_json\n"
        "for n in itertools.count():\n"
        "    atomic_write_json(Path(sys.argv[1]), {'n': n, 'pad': 'x' * 2_000_000})\n"
        "    print(n, flush=True)\n"
    )
    for delay in (0.0, 0.005, 0.01, 0.02, 0.05, 0.1):
        proc = subprocess.Popen(
            [sys.executable, "-c", writer, str(target)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip().isdigit(), "the writer finished a write"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        data = json.loads(target.read_text())
        assert len(data["pad"]) == 2_000_000
    assert store.record_paths("ralph-x") == [(1, target)]  # never a temp file
    store.clear_partial_writes("ralph-x")
    assert [p.name for p in target.parent.iterdir()] == ["001.json"]


def test_two_loops_at_once_on_one_tree(project: Path, tmp_path: Path) -> None:
    """Both start together: one runs, the other is refused naming it and --worktree."""
    gate = tmp_path / "gate"  # the winner's agent waits here until the loser is done
    plan(project, {"1": {**write("full"), "wait_for": str(gate)}})
    ids = ["ralph-first-00000001", "ralph-second-00000002"]
    procs = [start(project, *heuristic("--loop-id", loop_id)) for loop_id in ids]
    deadline = time.monotonic() + 90
    while all(proc.poll() is None for proc in procs):
        assert time.monotonic() < deadline, "neither loop was refused"
        time.sleep(0.05)
    gate.write_text("")
    results = [finish(proc) for proc in procs]
    assert sorted(code for code, _, _ in results) == [0, 2], results
    winner = next(i for i, r in enumerate(results) if r[0] == 0)
    loser_err = results[1 - winner][2]
    assert f"loop {ids[winner]} is already running in this working tree" in loser_err
    assert "--worktree" in loser_err and "Traceback" not in loser_err
    assert MemoryStore(project).loop_ids() == [ids[winner]]
    assert ids[1 - winner] not in git(project, "branch", "--list", "ralph/*")
    assert_invariants(project)
    for name, text in USER_FILES.items():
        assert (project / name).read_text() == text


def test_stale_git_lock_is_named_before_an_attempt_is_spent(ralph: RunCli, project: Path) -> None:
    """A kill -9 of everything mid-commit leaves git's lock file: resume says which, at once."""
    plan(project, {"default": write("partial")})
    first = ralph(*heuristic("--max-iterations", "1"), cwd=project)
    loop_id = json.loads(first.out)["loop_id"]
    lock = project / ".git" / "index.lock"
    lock.write_text("")
    resumed = ralph("resume", loop_id, "--max-iterations", "2", cwd=project)
    assert resumed.code == 2
    assert f"ralph: error: git is locked: {lock} exists" in resumed.err
    assert "delete that file" in resumed.err and "iteration 2" not in resumed.err
    lock.unlink()
    plan(project, {"default": write("full")})
    assert ralph("resume", loop_id, "--max-iterations", "2", cwd=project).code == 0
    assert_invariants(project)


@pytest.mark.parametrize("dirty", [False, True], ids=["clean", "allow-dirty"])
def test_a_kill_right_after_the_branch_is_created_is_resumable(
    dirty: bool, ralph: RunCli, project: Path
) -> None:
    """The state did not name the branch yet, so `resume` began the loop again and failed
    forever with "branch ... already exists". Now it adopts its own branch: still at the start
    commit (or at the starting point of --allow-dirty), its start recorded before it existed."""
    killer = f"{sys.executable} {os.environ['KILLER']}"
    install_hook(project, "reference-transaction", f'exec {killer} "new-$1"')
    extra = ["--allow-dirty"] if dirty else []
    if dirty:
        (project / "tests" / "test_calc.py").write_text(
            (project / "tests" / "test_calc.py").read_text() + "\n# my unstaged note\n"
        )
    plan(project, {"default": write("full")})
    arm("new-committed")
    code, _, err = finish(start(project, *heuristic(*extra)))
    assert code == -signal.SIGKILL, err
    loop_id = MemoryStore(project).loop_ids()[0]
    branch = loop_branch(loop_id)
    assert git(project, "branch", "--list", branch).strip(), "the branch was created"
    state = MemoryStore(project).read_state(loop_id)
    assert state.git is None or state.git.branch is None, "the state did not name it yet"
    resumed = ralph("resume", loop_id, "--json", cwd=project)  # the settings are the state's
    assert resumed.code == 0, resumed.err
    summary = json.loads(resumed.out)
    assert summary["status"] == "completed"
    # --allow-dirty: the loop's end gives the user's branch and uncommitted work back
    assert git(project, "symbolic-ref", "--short", "HEAD") == ("main" if dirty else branch)
    state = MemoryStore(project).read_state(loop_id)
    assert state.git is not None and state.git.original_branch == "main"
    assert state.git.original_commit == git(project, "rev-parse", "main")
    if dirty:
        assert state.git.user_changes and state.git.base_commit != state.git.original_commit
        assert "my unstaged note" in git(
            project, "show", f"{state.git.base_commit}:tests/test_calc.py"
        )
        assert "my unstaged note" in (project / "tests" / "test_calc.py").read_text()
        assert git(project, "stash", "list") == ""
    assert_invariants(project)
    for name, text in USER_FILES.items():
        assert (project / name).read_text() == text


def test_a_branch_of_that_name_not_made_by_this_loop_is_still_refused(
    ralph: RunCli, project: Path
) -> None:
    """Adoption is for the loop's own, untouched branch; any other is left alone."""
    loop_id = "ralph-taken-00000001"
    git(project, "branch", "ralph/taken-00000001")
    plan(project, {"default": write("full")})
    result = ralph(*heuristic("--loop-id", loop_id), cwd=project)
    assert result.code == 2
    assert "branch ralph/taken-00000001 already exists" in result.err
