"""`ralph run --worktree`: loops side by side in one repository, memory in the main tree."""

from __future__ import annotations

import json
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ralph.ids import loop_branch
from ralph.memory.store import MemoryStore

from ..conftest import RunCli
from .conftest import (
    USER_FILES,
    agent,
    arm,
    assert_invariants,
    assert_no_leftovers,
    check_command,
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
    # each failing loop's whole stderr (pytest would cut a repr of `results` short)
    errors = "\n".join(err for code, _, err in results if code != 0)
    assert [code for code, _, _ in results] == [0, 0], errors
    assert all(
        "without your uncommitted edits in" in err and "calc.py" in err for *_, err in results
    )
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


def test_an_untracked_file_never_stops_a_worktree_loop_and_a_tracked_edit_only_warns(
    ralph: RunCli, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--worktree --dry-run` (and doctor with `worktree: true`) refused an untracked file of the
    main tree ("the working tree has uncommitted changes: agent.sh"), though the worktree is a
    fresh checkout of HEAD that never sees it."""
    (project / "agent.sh").write_text("echo my agent\n")
    plan(project, {"default": write("full")})
    dry = ralph(*heuristic("--worktree", "--dry-run"), cwd=project)
    assert dry.code == 0, dry.err
    assert "agent.sh" not in dry.out + dry.err and "without your uncommitted" not in dry.out
    monkeypatch.setenv("RALPH_WORKTREE", "1")
    doctor = ralph("doctor", "--no-run", "--json", cwd=project)
    found = json.loads(doctor.out)["findings"]
    rows = [row for row in found if (row["area"], row["name"]) == ("git", "repository")]
    assert rows and rows[0]["status"] == "ok", rows
    monkeypatch.delenv("RALPH_WORKTREE")
    (project / "tests" / "test_calc.py").write_text(
        (project / "tests" / "test_calc.py").read_text() + "\n# my edit\n"
    )
    warned = ralph(*heuristic("--worktree", "--dry-run"), cwd=project)
    assert warned.code == 0, warned.err
    assert "without your uncommitted edits" in warned.out + warned.err
    assert "tests/test_calc.py" in warned.out + warned.err
    result = ralph(*heuristic("--worktree"), cwd=project)
    assert result.code == 0, result.err
    warning = next(line for line in result.err.splitlines() if "without your uncommitted" in line)
    assert "tests/test_calc.py" in warning and "agent.sh" not in warning
    assert (project / "agent.sh").read_text() == "echo my agent\n"
    assert (project / "tests" / "test_calc.py").read_text().endswith("# my edit\n")


def half_written_worktree(repo: Path, name: str) -> Path:
    """A worktree entry as `git worktree add` leaves it between its open and its write of
    `commondir`: every git command that lists the worktrees then dies reading it
    ("failed to read .git/worktrees/<name>/commondir: Success")."""
    entry = Path(git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    entry = entry / "worktrees" / name
    entry.mkdir(parents=True)
    (entry / "locked").write_text("initializing")
    (entry / "gitdir").write_text(f"{repo.parent / name}/.git\n")
    (entry / "commondir").write_text("")
    return entry


def test_worktree_loops_started_at_once_wait_out_another_worktree_being_added(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen once in CI: a loop exited 2 on `git worktree failed: fatal: failed to read
    .git/worktrees/<other loop>/commondir: Success`, the other loop's `git worktree add` caught
    mid-write. Here that write stays half done until a loop pauses to try again."""
    from ralph.loop.assembly import run_task
    from ralph.testing import RecordingReporter
    from ralph.workspace import contention

    plan(project, {"default": write("full")})
    entry = half_written_worktree(project, "another-loop")
    paused: list[float] = []

    def other_write_done(seconds: float) -> None:  # meanwhile the other `worktree add` writes
        paused.append(seconds)
        (entry / "commondir").write_text("../..\n")
        (entry / "HEAD").write_text(git(project, "rev-parse", "HEAD") + "\n")

    monkeypatch.setattr(contention, "pause", other_write_done)
    flags = {"actor": agent(), "test": check_command(), "reflector": "heuristic", "worktree": True}
    ids = [f"ralph-at-once-0000000{n}" for n in range(3)]

    def loop(loop_id: str) -> int:
        return run_task("make f pass its tests", flags, RecordingReporter(), loop_id=loop_id,
                        cwd=project).exit_code  # fmt: skip

    with ThreadPoolExecutor(max_workers=len(ids)) as pool:
        codes = list(pool.map(loop, ids))
    assert codes == [0] * len(ids)
    assert paused  # the loops met the half-written entry, and waited it out
    store = MemoryStore(project)
    assert store.loop_ids() == ids
    for loop_id in ids:
        worktree = Path(str(store.read_state(loop_id).git.worktree))  # type: ignore[union-attr]
        assert (worktree / "calc.py").read_text() == "def f(x: int) -> int:\n    return abs(x)\n"
    assert_invariants(project)


def test_a_worktree_entry_left_half_written_fails_in_one_line_with_a_hint(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ralph.errors import RalphError
    from ralph.workspace import contention
    from ralph.workspace.worktree import add_worktree

    half_written_worktree(project, "killed-add")  # a `worktree add` killed mid-write
    paused: list[float] = []
    monkeypatch.setattr(contention, "pause", paused.append)
    with pytest.raises(RalphError) as failed:
        add_worktree(project, "ralph-after-a-kill-00000001")
    assert "failed to read .git/worktrees/killed-add/commondir" in failed.value.message
    assert failed.value.hint is not None and ".git/worktrees/killed-add" in failed.value.hint
    assert paused == list(contention.PAUSES)  # bounded: a few tries, then the failure stands


def test_a_worktree_loop_starts_from_the_branch_the_checkout_is_on(
    ralph: RunCli, project: Path
) -> None:
    """Its worktree starts on a detached HEAD, yet its work is for that branch: the state, the
    JSON and the final lines name it, and `ralph apply` merges there."""
    git(project, "switch", "-q", "-c", "feature")
    plan(project, {"default": write("full")})
    result = ralph(*heuristic("--worktree"), cwd=project)
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    assert summary["base_branch"] == "feature"
    state = MemoryStore(project).read_state(summary["loop_id"])
    assert state.git is not None and state.git.original_branch == "feature"
    assert f"branch  {summary['branch']} (from feature)" in result.err
    status = json.loads(ralph("status", summary["loop_id"], "--json", cwd=project).out)
    assert status["base_branch"] == "feature"
    assert ralph("apply", summary["loop_id"], cwd=project).code == 0
    assert git(project, "diff", "--cached", "--name-only") == "calc.py"


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
    human = ralph("status", summary["loop_id"], cwd=project).out
    assert "usage       none yet" in human  # no attempt: nothing counted, not "unknown"


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


def src_project(path: Path) -> Path:
    """A src-layout package whose test fails until `VALUE` is 2, committed on `main`."""
    (path / "src" / "calcpkg").mkdir(parents=True)
    (path / "tests").mkdir()
    (path / "pyproject.toml").write_text('[project]\nname = "calcpkg"\nversion = "0"\n')
    (path / "src" / "calcpkg" / "__init__.py").write_text("VALUE = 1\n")
    (path / "tests" / "test_value.py").write_text(
        "import calcpkg\n\ndef test_value():\n    assert calcpkg.VALUE == 2\n"
    )
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    return path


def test_a_worktree_loop_tests_the_worktrees_code_not_the_installed_checkout(
    ralph: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = src_project(tmp_path / "repo")
    # what `pip install -e .` of the main tree does: its src/ importable from anywhere
    monkeypatch.setenv("PYTHONPATH", str(repo / "src"))
    seen = tmp_path / "agent-pythonpath"  # what the agent would import from, outside the tree
    fix = (
        f"{sys.executable} -c \"import os; open('src/calcpkg/__init__.py', 'w').write('VALUE = 2');"
        f" open('{seen}', 'w').write(os.environ['PYTHONPATH'])\""
    )
    result = ralph(
        "run",
        "make the value test pass",
        "--actor",
        f"cmd:{fix}",
        "--test",
        f"{sys.executable} -m pytest -q -p no:cacheprovider tests",
        "--reflector",
        "heuristic",
        "--worktree",
        "--max-iterations",
        "2",
        "--json",
        cwd=repo,
    )
    assert result.code == 0, result.err
    assert json.loads(result.out)["reward_history"] == [1.0]
    worktree = Path(
        str(MemoryStore(repo).read_state(json.loads(result.out)["loop_id"]).git.worktree)
    )  # type: ignore[union-attr]
    expected = f"{worktree / 'src'}{os.pathsep}{repo / 'src'}"
    shown = f"{Path('<worktree>') / 'src'}{os.pathsep}{repo / 'src'}"  # its path said above
    assert f"PYTHONPATH={shown}" in result.err and f"git worktree {worktree}" in result.err
    assert seen.read_text() == expected  # the agent's own test runs import the worktree too
    assert (repo / "src" / "calcpkg" / "__init__.py").read_text() == "VALUE = 1\n"  # untouched


def test_the_import_path_is_the_worktrees_own_code(tmp_path: Path) -> None:
    from ralph.workspace.worktree import add_worktree, import_path

    repo = src_project(tmp_path / "repo")
    assert import_path(repo, {}) == {}  # the main tree imports itself already
    worktree = add_worktree(repo, "ralph-import-00000001")
    assert import_path(worktree, {}) == {"PYTHONPATH": str(worktree / "src")}
    assert import_path(worktree, {"PYTHONPATH": "/x"}) == {
        "PYTHONPATH": f"{worktree / 'src'}{os.pathsep}/x"
    }
    git(worktree, "rm", "-rq", "src")  # a flat layout: the worktree's top
    (worktree / "calcpkg.py").write_text("VALUE = 2\n")
    assert import_path(worktree, {}) == {"PYTHONPATH": str(worktree)}
    (worktree / "pyproject.toml").unlink()  # no Python project: nothing to put first
    assert import_path(worktree, {}) == {}
