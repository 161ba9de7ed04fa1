"""Git under the loop's feet: a kill right after a commit, an agent running git itself, and the
user's own index and untracked files with --allow-dirty."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from ralph.ids import loop_branch
from ralph.memory.store import MemoryStore

from ..conftest import RunCli
from .conftest import (
    VERSIONS,
    arm,
    assert_invariants,
    finish,
    git,
    heuristic,
    install_hook,
    plan,
    start,
    write,
)


def iteration_commits(root: Path, branch: str) -> list[str]:
    subjects = git(root, "log", "--format=%s", branch).splitlines()
    return [s for s in subjects if " iteration " in s and "starting point" not in s]


def subject(loop_id: str, iteration: int) -> str:
    return f"ralph({loop_id[-8:]}): iteration {iteration} — tests fail"


def on_branch(root: Path, sha: str, branch: str) -> bool:
    import subprocess

    check = ["git", "merge-base", "--is-ancestor", sha, branch]
    return subprocess.run(check, cwd=root, capture_output=True).returncode == 0


def test_a_commit_the_state_does_not_know_is_set_aside_on_resume(
    ralph: RunCli, project: Path
) -> None:
    """kill -9 right after iteration 1's commit: resume did iteration 1 again on top of it (two
    "iteration 1" commits, the edit applied twice, a record listing no change). Decision: the
    branch is reset to the state's last commit; the unknown commit is kept on the rescue ref."""
    killer = f"{sys.executable} {os.environ['KILLER']}"
    install_hook(project, "reference-transaction", f'exec {killer} "txn-$1"')
    plan(project, {"1": write("partial"), "default": write("full")})
    arm("txn-committed")
    code, _, err = finish(start(project, *heuristic()))
    assert code == -signal.SIGKILL, err
    assert (Path(os.environ["SEEN_DIR"]) / "killed-at-txn-committed").exists()
    assert_invariants(project, finished=False)
    listed = json.loads(ralph("reflections", "list", "--json", cwd=project).out)
    assert listed[0]["status"] == "crashed"
    assert ralph("reflections", "validate", cwd=project).code == 0
    loop_id = MemoryStore(project).loop_ids()[0]
    branch = loop_branch(loop_id)
    killed = git(project, "rev-parse", branch)
    assert iteration_commits(project, branch) == [subject(loop_id, 1)]
    resumed = ralph("resume", loop_id, "--json", cwd=project)
    assert resumed.code == 0, resumed.err
    assert "a commit the loop's state does not know" in resumed.err
    summary = json.loads(resumed.out)
    assert summary["status"] == "completed" and summary["reward_history"][-1] == 1.0
    subjects = iteration_commits(project, branch)
    assert [s.split(" —")[0] for s in subjects] == [
        subject(loop_id, 2).split(" —")[0],
        subject(loop_id, 1).split(" —")[0],
    ]
    assert git(project, "rev-parse", f"refs/ralph/rescue/{loop_id}/1") == killed
    records = assert_invariants(project)
    first = records[0]
    assert first["actor_output"]["files_modified"] == ["calc.py"], "the redo's change is listed"
    assert on_branch(project, first["ralph"]["git_commit"], branch)


AGENT_GIT = {
    "commit": "git add -A && git commit -qm 'the agent commits'",
    "reset": "git reset -q --hard HEAD~1",
    "checkout": "git checkout -qf main",
    "delete": "b=$(git symbolic-ref --short HEAD); git checkout -qf main && git branch -qD $b",
}


@pytest.mark.parametrize("command", sorted(AGENT_GIT))
def test_the_agents_own_git_commands_are_undone_not_fatal(
    command: str, ralph: RunCli, project: Path
) -> None:
    """An agent that commits, resets, checks out main or deletes the loop branch stopped the
    loop with exit 2 (`cannot lock ref 'HEAD'`)."""
    plan(
        project,
        {
            "1": write("partial"),
            "2": {**write("half"), "shell": AGENT_GIT[command]},
            "default": write("full"),
        },
    )
    result = ralph(*heuristic("--no-rollback"), cwd=project)
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    loop_id = summary["loop_id"]
    branch = loop_branch(loop_id)
    assert git(project, "symbolic-ref", "--short", "HEAD") == branch
    records = assert_invariants(project)
    second = records[1]
    assert "the agent" in second["notes"] and "put its branch back" in second["notes"]
    assert "actor_moved_git" in second["ralph"]["quality_flags"]
    assert "put its branch back" in result.err
    assert all("actor_moved_git" not in r["ralph"]["quality_flags"] for r in records[::2])
    state = MemoryStore(project).read_state(loop_id)
    assert state.git is not None
    for sha in state.git.commits.values():
        assert on_branch(project, sha, branch), "the state names a commit off the branch"
    assert len(iteration_commits(project, branch)) == summary["iterations"] == 3
    assert git(project, "rev-parse", "main") == state.git.original_commit


def test_allow_dirty_keeps_what_was_staged_unstaged_and_untracked(
    ralph: RunCli, project: Path
) -> None:
    """--allow-dirty folded the user's staged, unstaged and untracked files into one commit:
    the content survived, what was staged and what was untracked did not. Then the loop left the
    user on its branch with their files inside its starting point and a stash entry behind.
    Now the loop's end gives the tree back: their branch, their index, their files, no entry."""
    (project / "staged.txt").write_text("staged v1\n")
    git(project, "add", "staged.txt")
    git(project, "commit", "-qm", "a file to stage changes of")
    (project / "staged.txt").write_text("staged v2\n")
    git(project, "add", "staged.txt")
    (project / "staged.txt").write_text("staged v2 plus an unstaged line\n")
    (project / "tests" / "test_calc.py").write_text(
        (project / "tests" / "test_calc.py").read_text() + "\n# unstaged note\n"
    )
    (project / "untracked.txt").write_text("new, never added\n")
    status = ("status", "--porcelain", "--", ".", ":(exclude).aiwg")
    before = git(project, *status)
    plan(project, {"default": write("full")})
    result = ralph(*heuristic("--allow-dirty"), cwd=project)
    assert result.code == 0, result.err
    assert "git stash apply --index" in result.err  # said at the start, while the loop holds it
    assert "yours   back on main with your uncommitted changes as they were" in result.err
    assert git(project, "symbolic-ref", "--short", "HEAD") == "main"
    assert git(project, *status) == before
    assert git(project, "show", ":staged.txt") == "staged v2"
    assert (project / "staged.txt").read_text() == "staged v2 plus an unstaged line\n"
    assert (project / "untracked.txt").read_text() == "new, never added\n"
    assert git(project, "stash", "list") == ""


def test_allow_dirty_then_the_printed_commands_bring_only_the_agents_change(
    ralph: RunCli, project: Path
) -> None:
    """`git switch main && ralph apply` after --allow-dirty deleted the user's untracked file
    from the tree and staged it as the loop's work, while the summary and SQUASH_MSG named only
    the agent's file; a stash entry stayed behind. Follow the printed lines exactly: the user's
    files are back byte for byte, apply stages the agent's change alone."""
    readme = project / "README.md"
    readme.write_bytes(b"# calc\r\nmy uncommitted edit \xe2\x9c\x93\n")
    notes = project / "NOTES.txt"
    notes.write_bytes(b"private notes\n\x00binary tail")
    notes.chmod(0o600)
    plan(project, {"default": write("full")})
    result = ralph(*heuristic("--allow-dirty"), cwd=project)
    assert result.code == 0, result.err
    loop_id = json.loads(result.out)["loop_id"]
    lines = result.err.splitlines()
    # only untracked files: nothing was stashed, nothing to give back; they never left
    assert not any(line.startswith("yours   ") for line in lines), result.err
    assert "changed: 1 file: calc.py" in result.err
    apply = next(line for line in lines if line.startswith("apply   "))
    assert apply == f"apply   git switch main && ralph apply {loop_id}"
    assert readme.read_bytes() == b"# calc\r\nmy uncommitted edit \xe2\x9c\x93\n"
    assert notes.read_bytes() == b"private notes\n\x00binary tail"
    assert notes.stat().st_mode & 0o777 == 0o600
    git(project, "switch", "-q", "main")
    applied = ralph(*apply.split("&& ")[1].split()[1:], cwd=project)
    assert applied.code == 0, applied.err
    assert "1 file, staged" in applied.out and "NOTES.txt" not in applied.out
    assert git(project, "diff", "--cached", "--name-only") == "calc.py"
    assert (project / "calc.py").read_text() == VERSIONS["full"]
    assert readme.read_bytes() == b"# calc\r\nmy uncommitted edit \xe2\x9c\x93\n"
    assert notes.read_bytes() == b"private notes\n\x00binary tail"
    squash = Path(git(project, "rev-parse", "--path-format=absolute", "--git-path", "SQUASH_MSG"))
    assert "NOTES" not in squash.read_text() and "README" not in squash.read_text()
    assert git(project, "stash", "list") == ""


def test_allow_dirty_on_the_file_the_agent_fixes_applies_the_fix_alone_to_the_index(
    ralph: RunCli, project: Path
) -> None:
    """The trial's case: the user's uncommitted edit and the agent's fix in one file. Given
    back, the file holds the user's edit; `ralph apply` puts both in the tree and stages the
    fix alone, so a plain `git commit` never takes the user's edit as the loop's work."""
    calc = project / "calc.py"
    calc.write_text("# my uncommitted note\n" + VERSIONS["zero"])
    plan(project, {"default": {"shell": "sed -i 's/return 0/return abs(x)/' calc.py"}})
    result = ralph(*heuristic("--allow-dirty"), cwd=project)
    assert result.code == 0, result.err
    assert calc.read_text() == "# my uncommitted note\n" + VERSIONS["zero"]
    applied = ralph("apply", json.loads(result.out)["loop_id"], cwd=project)
    assert applied.code == 0, applied.err
    assert git(project, "show", ":calc.py") + "\n" == VERSIONS["full"]  # the fix alone
    assert calc.read_text() == "# my uncommitted note\n" + VERSIONS["full"]  # and the user's
    assert git(project, "diff", "--name-only") == "calc.py"  # the note: unstaged, as it was
    assert git(project, "stash", "list") == ""


def test_apply_refuses_a_fix_that_does_not_merge_with_the_users_edit_and_keeps_the_edit(
    ralph: RunCli, project: Path
) -> None:
    """The user's edit right beside the agent's: no clean merge into HEAD. Refused (exit 2),
    and the file, the index and HEAD are as they were."""
    calc = project / "calc.py"
    calc.write_text(VERSIONS["zero"] + "# my uncommitted note\n")
    plan(project, {"default": {"shell": "sed -i 's/return 0/return abs(x)/' calc.py"}})
    result = ralph(*heuristic("--allow-dirty"), cwd=project)
    assert result.code == 0, result.err
    before = git(project, "status", "--porcelain", "--", ".", ":(exclude).aiwg")
    applied = ralph("apply", json.loads(result.out)["loop_id"], cwd=project)
    assert applied.code == 2
    assert "do not merge cleanly into HEAD where you have uncommitted edits: calc.py" in (
        applied.err
    )
    assert calc.read_text() == VERSIONS["zero"] + "# my uncommitted note\n"
    assert git(project, "status", "--porcelain", "--", ".", ":(exclude).aiwg") == before


def test_abort_of_a_dead_allow_dirty_loop_gives_the_users_tree_back(
    ralph: RunCli, project: Path
) -> None:
    """A loop killed mid-attempt ends by `ralph abort`: that end gives back what the loop held
    (the user's branch and uncommitted work), as a loop ending on its own does."""
    (project / "untracked.txt").write_text("mine\n")
    (project / "calc.py").write_text(VERSIONS["half"])  # a tracked edit: the loop holds it
    plan(project, {"default": {"kill": True}})
    arm("actor")
    code, _, err = finish(start(project, *heuristic("--allow-dirty")))
    assert code == -signal.SIGKILL, err
    loop_id = MemoryStore(project).loop_ids()[0]
    assert git(project, "symbolic-ref", "--short", "HEAD") == loop_branch(loop_id)
    aborted = ralph("abort", loop_id, cwd=project)
    assert aborted.code == 0, aborted.err
    assert "yours   back on main with your uncommitted changes" in aborted.out
    assert git(project, "symbolic-ref", "--short", "HEAD") == "main"
    assert (project / "untracked.txt").read_text() == "mine\n"
    assert (project / "calc.py").read_text() == VERSIONS["half"]
    status = git(project, "status", "--porcelain", "--", ".", ":(exclude).aiwg").splitlines()
    assert sorted(line.strip() for line in status) == ["?? untracked.txt", "M calc.py"]
    assert git(project, "stash", "list") == ""
