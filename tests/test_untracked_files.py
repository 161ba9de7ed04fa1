"""Untracked files neither block nor travel: the untracked, unignored files present when a loop
starts (the user's agent script, a notes file, the `.claude/settings.json` that
`ralph hook install claude` writes) are the user's. A loop starts with them present, never
commits them (with or without `--allow-dirty`), never removes them on rollback, and `apply` and
`prune` leave them alone. A file the agent creates is the loop's work. Where ralph refuses
uncommitted changes to tracked files, its hint is a command that works when pasted.

Before: an untracked file made `run` refuse ("commit or stash them first", and plain `git
stash` leaves untracked files: "No local changes to save"), doctor said "a loop cannot start
here", and with `--allow-dirty` the user's private files were committed on the loop's branch.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from ralph.errors import PreflightError
from ralph.ids import loop_branch
from ralph.workspace.git import GitWorkspace

from .conftest import RunCli
from .fakes.calc_project import make_calc_repo
from .test_gitops import A_PY, B_PY, IDENTITY, LOOP, git, tracked, write
from .test_loop import ACTOR, TESTS, VERSIONS, plan, run_args
from .test_loop import write as version


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """test_gitops' repository: a.py, b.py, `.gitignore`; no user git config leaks in."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var, value in IDENTITY.items():
        monkeypatch.setenv(var, value)
    root = tmp_path / "project"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    for name, text in (("a.py", A_PY), ("b.py", B_PY), (".gitignore", "*.log\n")):
        write(root, name, text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    return root


@pytest.fixture
def calc_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """test_loop's calc project and its planned `cmd:` actor."""
    root = make_calc_repo(
        tmp_path / "repo", calc=VERSIONS["zero"], tests=TESTS, monkeypatch=monkeypatch
    )
    tools = tmp_path / "tools"
    (tools / "seen").mkdir(parents=True)
    (tools / "actor.py").write_text(ACTOR)
    monkeypatch.setenv("SEEN_DIR", str(tools / "seen"))
    monkeypatch.setenv("PLAN", str(tools / "plan.json"))
    monkeypatch.setenv("CI", "true")
    return root


USERS = {
    "notes.txt": "my notes\n",
    "my-agent.sh": "#!/bin/sh\necho private\n",
    ".claude/settings.json": '{"hooks": {}}\n',
    "scratch/idea.py": "print('mine')\n",
}


def users_files(root: Path) -> None:
    for name, text in USERS.items():
        write(root, name, text)


def assert_users_files_intact(root: Path) -> None:
    for name, text in USERS.items():
        assert (root / name).read_text() == text, f"{name} changed or went"


def test_a_loop_starts_over_untracked_files_and_never_commits_or_removes_them(
    repo: Path,
) -> None:
    users_files(repo)
    workspace = GitWorkspace(repo)
    assert workspace.dirty_files(untracked=False) == []
    state = workspace.start_loop(LOOP, allow_dirty=False)  # refused before
    assert state.base_commit == git(repo, "rev-parse", "main") and state.user_changes is None
    workspace.begin_iteration()
    write(repo, "a.py", A_PY.replace("a - b", "a + b"))
    write(repo, "scratch/agents.py", "made by the agent\n")  # beside a user's file
    write(repo, "made.py", "made by the agent\n")
    created = sorted(f.path for f in workspace.changes().files if f.kind == "created")
    assert created == ["made.py", "scratch/agents.py"]
    first = workspace.commit_iteration("iteration 1")
    assert first is not None
    assert sorted(tracked(repo, first)) == [
        ".gitignore", "a.py", "b.py", "made.py", "scratch/agents.py"
    ]  # fmt: skip
    assert workspace.dirty_files() == []  # the user's files are no change of the loop's
    workspace.restore(state.base_commit or "")  # a rollback to the very start
    assert not (repo / "made.py").exists() and not (repo / "scratch/agents.py").exists()
    assert_users_files_intact(repo)


def test_allow_dirty_carries_tracked_edits_but_never_the_untracked_files(repo: Path) -> None:
    users_files(repo)
    write(repo, "b.py", "X = 10\n")
    workspace = GitWorkspace(repo)
    state = workspace.start_loop(LOOP, allow_dirty=True)
    start = state.base_commit or ""
    assert git(repo, "show", "--name-only", "--format=", start).split() == ["b.py"]
    assert state.user_changes is not None
    assert git_ok(repo, "rev-parse", "-q", "--verify", f"{state.user_changes}^3") == ""
    workspace.begin_iteration()
    write(repo, "a.py", A_PY.replace("a - b", "a + b"))
    sha = workspace.commit_iteration("iteration 1")
    for commit in (start, sha or ""):
        assert not set(USERS) & set(tracked(repo, commit))
    given = workspace.end_loop(state)
    assert given is not None and given.restored, given
    assert git(repo, "branch", "--show-current") == "main"
    assert (repo / "b.py").read_text() == "X = 10\n"
    assert_users_files_intact(repo)
    assert git(repo, "stash", "list") == ""


def test_tracked_changes_are_refused_with_a_hint_that_works_when_pasted(repo: Path) -> None:
    users_files(repo)
    write(repo, "a.py", A_PY + "# edited\n")
    write(repo, "staged.py", "new and staged\n")
    git(repo, "add", "staged.py")
    with pytest.raises(PreflightError) as caught:
        GitWorkspace(repo).start_loop(LOOP, allow_dirty=False)
    assert "a.py" in caught.value.message and "staged.py" in caught.value.message
    assert "notes.txt" not in caught.value.message  # untracked: never a reason to refuse
    hint = caught.value.hint or ""
    assert "--allow-dirty" in hint
    pasted = hint.split("`")[1]  # the command to paste, as the hint quotes it
    subprocess.run(shlex.split(pasted), cwd=repo, check=True, capture_output=True)
    state = GitWorkspace(repo).start_loop(LOOP, allow_dirty=False)
    assert state.branch == loop_branch(LOOP)
    assert_users_files_intact(repo)


def git_ok(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    return done.stdout.strip()


@pytest.mark.parametrize("dirty", [False, True], ids=["clean", "allow-dirty"])
def test_run_apply_and_prune_leave_the_users_untracked_files_alone(
    ralph: RunCli, calc_repo: Path, dirty: bool
) -> None:
    """As a new user does: an agent script and notes beside the project, the hook's settings;
    `ralph run` (a worse attempt rolled back, then the fix), `git switch main`, `ralph apply`,
    `ralph prune`."""
    users_files(calc_repo)
    plan(calc_repo, {"1": version("zero"), "default": version("full")})
    extra = ["--allow-dirty"] if dirty else []
    if dirty:
        (calc_repo / "README.md").write_text("my edit\n")
    result = ralph(*run_args("--max-iterations", "3", *extra), cwd=calc_repo)
    assert result.code == 0, result.err
    loop_id = json.loads(result.out)["loop_id"]
    committed = git(calc_repo, "log", "--format=", "--name-only", loop_branch(loop_id)).split()
    assert "calc.py" in committed and not set(USERS) & set(committed)
    assert_users_files_intact(calc_repo)
    if git(calc_repo, "branch", "--show-current") != "main":
        git(calc_repo, "switch", "-q", "main")
    applied = ralph("apply", loop_id, cwd=calc_repo)
    assert applied.code == 0, applied.err
    assert_users_files_intact(calc_repo)
    git(calc_repo, "commit", "-qm", "the loop's fix")
    pruned = ralph("prune", cwd=calc_repo)
    assert pruned.code == 0, pruned.err
    assert_users_files_intact(calc_repo)


def test_doctor_lets_a_loop_start_beside_untracked_files(ralph: RunCli, calc_repo: Path) -> None:
    users_files(calc_repo)
    result = ralph("doctor", *run_args()[2:4], "--no-run", "--json", cwd=calc_repo)
    assert result.out, result.err
    rows = {(r["area"], r["name"]): r for r in json.loads(result.out)["findings"]}
    git_row = rows["git", "repository"]
    assert git_row["ok"] is True, git_row
    assert "kept out of the loop: 4 untracked files" in git_row["detail"]


def test_many_untracked_files_are_kept_out_by_their_folder(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Git matches every path against every exclude line: beyond `MAX_LISTED` files, a folder
    wholly untracked is one line, and stays out of the loop's commits whole."""
    from ralph.workspace import ignored

    monkeypatch.setattr(ignored, "MAX_LISTED", 3)
    for n in range(5):
        write(repo, f"data/part-{n}.csv", f"{n}\n")
    write(repo, "notes.txt", "mine\n")
    workspace = GitWorkspace(repo)
    workspace.start_loop(LOOP, allow_dirty=False)
    exclude = Path(git(repo, "rev-parse", "--path-format=absolute", "--git-path", "ralph"))
    lines = (exclude / LOOP / "exclude").read_text().splitlines()
    assert "/data/" in lines and "/notes.txt" in lines and "/data/part-0.csv" not in lines
    workspace.begin_iteration()
    write(repo, "a.py", A_PY.replace("a - b", "a + b"))
    sha = workspace.commit_iteration("iteration 1")
    assert sorted(tracked(repo, sha or "")) == [".gitignore", "a.py", "b.py"]
    assert (repo / "data/part-4.csv").read_text() == "4\n"
