"""After the loop: the final lines, readable commits, `ralph apply`, `ralph prune`, and
their implicit feedback. Real git in temporary repositories, a fake agent script."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ralph.ids import loop_branch
from ralph.memory.feedback import read_feedback
from ralph.memory.store import MemoryStore
from ralph.workspace.branches import Branches

from .conftest import RunCli
from .fakes.calc_project import git, make_calc_repo

CALC = "def add(a, b):\n    return a - b\n"
CHECK = f'{sys.executable} -c "import calc, sys; sys.exit(calc.add(2, 3) != 5)"'
# the memory is meant to be committed: the final lines say how, while it is untracked
MEMORY = ".aiwg/ralph/reflections"
HINT = f'git add {MEMORY} && git commit -m "ralph: reflections" -- {MEMORY}'
# iteration 1: a wrong change; 2: nothing at all; 3 and later: the fix
AGENT = """#!/bin/sh
case "$RALPH_ITERATION" in
  1) sed -i 's/a - b/a * b/' calc.py ;;
  2) echo "looked around, changed nothing" ;;
  *) sed -i 's/a [-*] b/a + b/' calc.py ;;
esac
"""


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_calc_repo(tmp_path / "repo", calc=CALC, tests="", monkeypatch=monkeypatch)
    agent = tmp_path / "agent.sh"
    agent.write_text(AGENT)
    agent.chmod(0o755)
    return root


def run_loop(ralph: RunCli, repo: Path, *extra: str, task: str = "fix add") -> dict[str, object]:
    agent = repo.parent / "agent.sh"
    result = ralph(
        "run", task, "--actor", f"cmd:{agent}", "--check", CHECK, "--reflector", "heuristic",
        "--json", *extra, cwd=repo,
    )  # fmt: skip
    assert result.code in (0, 1), result.err
    summary: dict[str, object] = json.loads(result.out)
    summary["_err"] = result.err
    return summary


def subjects(repo: Path, rev: str) -> list[str]:
    return git(repo, "log", "--format=%s", f"main..{rev}").splitlines()


def test_commits_read_well_and_an_iteration_without_changes_gets_none(
    ralph: RunCli, repo: Path
) -> None:
    summary = run_loop(ralph, repo)
    loop_id = str(summary["loop_id"])
    short = loop_id[-8:]
    branch = loop_branch(loop_id)
    assert branch == f"ralph/fix-add-{short}" and not branch.startswith("ralph/ralph-")
    assert summary["branch"] == branch and summary["base_branch"] == "main"
    assert summary["best_commit"] == git(repo, "rev-parse", branch)
    assert subjects(repo, branch) == [
        f"ralph({short}): iteration 3 — {Path(sys.executable).name} pass",
        f"ralph({short}): iteration 1 — {Path(sys.executable).name} fail",
    ]  # no commit for iteration 2, which changed nothing
    first = git(repo, "log", "-1", "--format=%b", f"{branch}~1")
    assert "Root cause: " in first and "Reward: 0.00" in first and loop_id in first
    assert "Reward: 1.00 (+1.00 from iteration 2's 0.00)" in git(
        repo, "log", "-1", "--format=%b", branch
    )
    store = MemoryStore(repo)
    records = store.valid_records(loop_id)
    assert records[1].notes == "no changes: nothing to commit"
    assert records[1].ralph is not None and records[1].ralph.git_commit is None
    state = store.read_state(loop_id)
    assert state.git is not None
    first_commit = git(repo, "rev-parse", "HEAD~1")
    assert state.git.commit_of(2) == state.git.commit_of(1) == first_commit


def test_the_final_lines_name_the_branch_and_the_next_steps(ralph: RunCli, repo: Path) -> None:
    summary = run_loop(ralph, repo)
    loop_id, branch = str(summary["loop_id"]), str(summary["branch"])
    lines = str(summary["_err"]).splitlines()
    assert any("iteration 1: root cause: " in line for line in lines)  # not "My attempt ..."
    tail = lines[lines.index(next(x for x in lines if x.startswith("branch  "))) :]
    assert tail == [
        f"branch  {branch} (from main)",
        f"best    iteration 3, reward 1.00, commit {str(summary['best_commit'])[:12]}",
        f"review  git diff main...{branch}",
        f"apply   git switch main && ralph apply {loop_id}",
        f"or      git merge --squash {branch}",
        "drop    ralph prune  # removes finished loops' branches, keeps records",
        f"memory  {HINT}",
    ]


def test_the_step_summary_and_status_carry_the_branch(
    ralph: RunCli, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary_file = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary_file))
    summary = run_loop(ralph, repo)
    best = str(summary["best_commit"])
    assert f"Branch `{summary['branch']}` from `main`, best commit `{best[:12]}`" in (
        summary_file.read_text()
    )
    status = json.loads(ralph("status", str(summary["loop_id"]), "--json", cwd=repo).out)
    assert (status["branch"], status["base_branch"], status["best_commit"]) == (
        summary["branch"],
        "main",
        best,
    )
    markdown = ralph("status", str(summary["loop_id"]), "--markdown", cwd=repo).out
    assert f"branch `{summary['branch']}` from `main`, best commit `{best[:12]}`" in markdown


def test_the_summary_status_and_json_list_the_files_a_loop_changed(
    ralph: RunCli, repo: Path
) -> None:
    agent = repo.parent / "agent.sh"
    agent.write_text(
        "#!/bin/sh\nprintf 'One more line.\\n' >> README.md\n"
        "printf '\\000\\001' > logo.bin\nsed -i 's/a - b/a + b/' calc.py\n"
    )  # the README and a binary file beside the fix
    summary = run_loop(ralph, repo)
    assert summary["status"] == "completed"
    expected = [
        {"path": "README.md", "added": 1, "removed": 0},
        {"path": "calc.py", "added": 1, "removed": 1},
        {"path": "logo.bin", "added": None, "removed": None},
    ]
    assert summary["changed_files"] == expected  # ralph's own .aiwg/ is no change
    text = "changed: 3 files: README.md +1 -0, calc.py +1 -1, logo.bin (binary)"
    assert text in str(summary["_err"])
    loop_id = str(summary["loop_id"])
    status = json.loads(ralph("status", loop_id, "--json", cwd=repo).out)
    assert status["changed_files"] == expected
    shown = ralph("status", loop_id, cwd=repo).out
    assert "changed     3 files: README.md +1 -0, calc.py +1 -1, logo.bin (binary)" in shown


# -- apply ----------------------------------------------------------------------------------------


def test_apply_brings_the_best_iteration_as_uncommitted_changes_and_counts_as_accepted(
    ralph: RunCli, repo: Path
) -> None:
    summary = run_loop(ralph, repo)
    loop_id = str(summary["loop_id"])
    on_loop_branch = ralph("apply", loop_id, cwd=repo)
    assert on_loop_branch.code == 2 and "is checked out" in on_loop_branch.err
    git(repo, "switch", "-q", "main")
    result = ralph("apply", cwd=repo)  # the latest loop, as `ralph status` takes it
    assert result.code == 0, result.err
    assert "applied iteration 3" in result.out and "calc.py" in result.out
    assert git(repo, "rev-parse", "HEAD") == git(repo, "rev-parse", "main")  # nothing committed
    assert git(repo, "diff", "--cached", "--name-only") == "calc.py"
    assert "a + b" in (repo / "calc.py").read_text()
    feedback = read_feedback(MemoryStore(repo), loop_id)
    assert feedback is not None
    assert (feedback["verdict"], feedback["source"]) == ("accepted", "apply")


def test_apply_run_twice_says_its_own_work_is_staged_and_refuses_anything_else(
    ralph: RunCli, repo: Path
) -> None:
    """The semver trial: a second `ralph apply` before the commit refused its own staged
    change as "the index holds staged changes"."""
    loop_id = str(run_loop(ralph, repo)["loop_id"])
    git(repo, "switch", "-q", "main")
    assert ralph("apply", loop_id, cwd=repo).code == 0
    before = git(repo, "status", "--porcelain")
    again = ralph("apply", loop_id, cwd=repo)
    assert again.code == 0, again.err
    assert again.out.startswith(f"already applied (staged): iteration 3 of {loop_id}")
    assert "commit it: git commit" in again.out
    assert git(repo, "status", "--porcelain") == before
    data = json.loads(ralph("apply", loop_id, "--json", cwd=repo).out)
    assert (data["already"], data["files"], data["accepted"]) == (True, ["calc.py"], False)
    (repo / "notes.txt").write_text("mine\n")  # something else staged: the old refusal
    git(repo, "add", "notes.txt")
    mixed = ralph("apply", loop_id, cwd=repo)
    assert mixed.code == 2 and "the index holds staged changes" in mixed.err


def test_after_allow_dirty_with_staged_work_the_lines_say_to_commit_or_unstage_it_first(
    ralph: RunCli, repo: Path
) -> None:
    """The semver trial: the printed `apply` line failed on the user's own staged edit, which
    the loop had just given back; apply keeps refusing it (a commit would mix it in) and the
    line before `apply` says so. The user's bytes stay as they were."""
    (repo / "notes.txt").write_text("mine\n")
    git(repo, "add", "notes.txt")
    before = git(repo, "status", "--porcelain", "--", ".", ":!.aiwg")
    summary = run_loop(ralph, repo, "--allow-dirty")
    lines = str(summary["_err"]).splitlines()
    apply = next(n for n, line in enumerate(lines) if line.startswith("apply   "))
    assert lines[apply - 1] == (
        "first   commit or unstage your staged changes (notes.txt): apply stages only the "
        "loop's work, for a commit of its own"
    )
    assert lines[apply] == f"apply   ralph apply {summary['loop_id']}"
    assert git(repo, "status", "--porcelain", "--", ".", ":!.aiwg") == before
    git(repo, "commit", "-q", "-m", "my notes")  # as the line says, then apply works
    applied = ralph("apply", str(summary["loop_id"]), cwd=repo)
    assert applied.code == 0, applied.err
    assert git(repo, "diff", "--cached", "--name-only") == "calc.py"


def test_apply_refuses_staged_changes_and_edits_of_the_loops_files_and_changes_nothing(
    ralph: RunCli, repo: Path
) -> None:
    """apply refused any uncommitted file, so a tree given back by an --allow-dirty loop could
    not take the loop's work. It refuses what a `git commit` would mix in (staged changes) or
    what the merge would overwrite (an edit of a file the loop changed), nothing else."""
    loop_id = str(run_loop(ralph, repo)["loop_id"])
    git(repo, "switch", "-q", "main")
    (repo / "notes.txt").write_text("mine\n")
    git(repo, "add", "notes.txt")
    before = git(repo, "status", "--porcelain")
    staged = ralph("apply", loop_id, cwd=repo)
    assert staged.code == 2
    assert staged.err.startswith("ralph: error: the index holds staged changes: notes.txt")
    assert len(staged.err.strip().splitlines()) == 2  # one line and a hint
    assert git(repo, "status", "--porcelain") == before
    git(repo, "restore", "--staged", "notes.txt")
    (repo / "calc.py").write_text(CALC + "# my own line\n")
    before = git(repo, "status", "--porcelain")
    edited = ralph("apply", loop_id, cwd=repo)
    assert edited.code == 2
    assert "uncommitted changes to files the loop changed: calc.py" in edited.err
    assert git(repo, "status", "--porcelain") == before
    assert read_feedback(MemoryStore(repo), loop_id) is None
    git(repo, "checkout", "calc.py")
    applied = ralph("apply", loop_id, cwd=repo)  # an untracked file of the user's stays
    assert applied.code == 0, applied.err
    assert git(repo, "status", "--porcelain", "--", ".", ":!.aiwg") == "M  calc.py\n?? notes.txt"
    assert (repo / "notes.txt").read_text() == "mine\n"


def test_apply_a_chosen_iteration_and_refuse_one_that_is_not_there(
    ralph: RunCli, repo: Path
) -> None:
    loop_id = str(run_loop(ralph, repo)["loop_id"])
    git(repo, "switch", "-q", "main")
    missing = ralph("apply", loop_id, "--iteration", "7", cwd=repo)
    assert missing.code == 2 and f"loop {loop_id} has no iteration 7" in missing.err
    chosen = ralph("apply", loop_id, "--iteration", "1", "--json", cwd=repo)
    assert chosen.code == 0, chosen.err
    assert json.loads(chosen.out)["files"] == ["calc.py"]
    assert "a * b" in (repo / "calc.py").read_text()


def test_apply_of_a_failed_loop_is_refused_unless_forced_and_never_counts_as_accepted(
    ralph: RunCli, repo: Path
) -> None:
    summary = run_loop(ralph, repo, "--max-iterations", "1")  # only the wrong change
    assert summary["status"] == "failed"
    loop_id = str(summary["loop_id"])
    git(repo, "switch", "-q", "main")
    refused = ralph("apply", loop_id, cwd=repo)
    assert refused.code == 2
    assert f"loop {loop_id} did not succeed" in refused.err and "--force" in refused.err
    assert "--iteration N" in refused.err and len(refused.err.strip().splitlines()) == 2
    assert git(repo, "diff", "HEAD", "--name-only") == ""
    assert "a - b" in (repo / "calc.py").read_text()
    forced = ralph("apply", loop_id, "--force", "--json", cwd=repo)
    assert forced.code == 0, forced.err
    assert json.loads(forced.out)["accepted"] is False
    assert "a * b" in (repo / "calc.py").read_text()
    assert read_feedback(MemoryStore(repo), loop_id) is None  # its lessons are not confirmed
    git(repo, "reset", "-q", "--hard")
    chosen = ralph("apply", loop_id, "--iteration", "1", cwd=repo)
    assert chosen.code == 0, chosen.err
    assert "counted as accepted" not in chosen.out
    assert read_feedback(MemoryStore(repo), loop_id) is None


def test_apply_of_a_loop_that_changed_nothing_says_so_in_one_line(
    ralph: RunCli, repo: Path
) -> None:
    """Its best iteration's commit is the base: no diff of a commit with itself, and no
    --iteration N to try when no iteration changed anything."""
    (repo.parent / "agent.sh").write_text("#!/bin/sh\necho 'looked around, changed nothing'\n")
    summary = run_loop(ralph, repo, "--max-iterations", "2")
    assert summary["status"] == "failed" and summary["best_commit"] == summary["base_commit"]
    loop_id = str(summary["loop_id"])
    git(repo, "switch", "-q", "main")
    for extra in ((), ("--force",), ("--iteration", "2")):
        refused = ralph("apply", loop_id, *extra, cwd=repo)
        assert refused.code == 2
        assert refused.err.strip() == f"ralph: error: loop {loop_id} changed nothing to apply"
    assert git(repo, "diff", "HEAD", "--name-only") == ""


def test_apply_of_an_iteration_that_changed_nothing_names_those_that_did(
    ralph: RunCli, repo: Path
) -> None:
    """Iteration 1 changed nothing and stays the best (no later one scored higher); 2 made a
    change; 3 undid it, a commit with the base's tree: apply names iteration 2, the one with
    work to take, instead of a diff of the base with itself."""
    (repo.parent / "agent.sh").write_text(
        '#!/bin/sh\ncase "$RALPH_ITERATION" in\n'
        "  2) sed -i 's/a - b/a * b/' calc.py ;;\n"
        "  3) sed -i 's/a [*] b/a - b/' calc.py ;;\n"
        "esac\n"
    )
    summary = run_loop(ralph, repo, "--max-iterations", "3")
    assert (summary["status"], summary["iterations"], summary["best_iteration"]) == (
        "failed",
        3,
        1,
    )
    loop_id = str(summary["loop_id"])
    state = MemoryStore(repo).read_state(loop_id).git
    assert state is not None and state.commit_of(3) not in (None, state.base_commit)
    git(repo, "switch", "-q", "main")
    for extra in ((), ("--force",), ("--iteration", "3")):
        refused = ralph("apply", loop_id, *extra, cwd=repo)
        assert refused.code == 2
        chosen = extra[-1] if extra[:1] == ("--iteration",) else "1"
        assert refused.err.splitlines() == [
            f"ralph: error: iteration {chosen} of loop {loop_id} changed nothing to apply",
            "hint: iteration 2 changed the code: apply it with --iteration 2",
        ]
    assert git(repo, "diff", "HEAD", "--name-only") == ""
    taken = ralph("apply", loop_id, "--iteration", "2", cwd=repo)
    assert taken.code == 0, taken.err
    assert "a * b" in (repo / "calc.py").read_text()


def test_apply_with_conflicts_says_so_and_exits_1(ralph: RunCli, repo: Path) -> None:
    loop_id = str(run_loop(ralph, repo)["loop_id"])
    git(repo, "switch", "-q", "main")
    (repo / "calc.py").write_text("def add(a, b):\n    return sum([a, b])\n")
    git(repo, "commit", "-qam", "meanwhile on main")
    result = ralph("apply", loop_id, cwd=repo)
    assert result.code == 1
    assert "conflicts in calc.py" in result.out and "git reset --merge" in result.out


# -- prune ----------------------------------------------------------------------------------------


def test_prune_removes_finished_branches_keeps_records_and_marks_the_unapplied_not_taken(
    ralph: RunCli, repo: Path
) -> None:
    applied = str(run_loop(ralph, repo, task="fix add one")["loop_id"])
    git(repo, "switch", "-q", "main")
    assert ralph("apply", applied, cwd=repo).code == 0
    git(repo, "reset", "-q", "--hard")
    dropped = str(run_loop(ralph, repo, task="fix add two")["loop_id"])
    git(repo, "switch", "-q", "main")
    store = MemoryStore(repo)
    records_before = sorted(p.name for p in (store.base / "reflections").rglob("*.json"))

    preview = ralph("prune", "--dry-run", cwd=repo)
    assert preview.code == 0, preview.err
    assert f"would remove branch {loop_branch(dropped)}" in preview.out
    assert f"would remove branch {loop_branch(applied)}" in preview.out
    assert git(repo, "branch", "--list", "ralph/*").count("ralph/") == 2
    assert read_feedback(store, dropped) is None

    result = ralph("prune", cwd=repo)
    assert result.code == 0, result.err
    assert f"removed branch {loop_branch(dropped)}" in result.out
    assert f"[{dropped}, completed, not taken]" in result.out
    assert git(repo, "branch", "--list", "ralph/*") == ""
    assert sorted(p.name for p in (store.base / "reflections").rglob("*.json")) == records_before
    not_taken = read_feedback(store, dropped)
    assert not_taken is not None
    assert (not_taken["verdict"], not_taken["source"]) == ("not_taken", "prune")
    kept = read_feedback(store, applied)
    assert kept is not None and kept["verdict"] == "accepted"  # apply's signal stays
    assert ralph("prune", cwd=repo).out.strip() == "nothing to prune"

    analysis = json.loads(ralph("analyze", "--json", cwd=repo).out)
    acceptance = analysis["summary"]["acceptance"]
    assert (acceptance["accepted"], acceptance["not_taken"]) == (1, 1)
    assert acceptance["acceptance_rate"] == 0.5


def test_status_after_prune_says_the_branch_was_pruned_and_where_it_was(
    ralph: RunCli, repo: Path
) -> None:
    """The semver trial: `ralph status` named the deleted branch as if it were there."""
    loop_id = str(run_loop(ralph, repo)["loop_id"])
    git(repo, "switch", "-q", "main")
    best = str(json.loads(ralph("status", loop_id, "--json", cwd=repo).out)["best_commit"])
    assert ralph("prune", cwd=repo).code == 0
    status = ralph("status", loop_id, cwd=repo)
    assert status.code == 0, status.err
    assert f"  branch      {loop_branch(loop_id)} (pruned, it was at {best[:12]})" in status.out
    assert "best commit" not in status.out
    data = json.loads(ralph("status", loop_id, "--json", cwd=repo).out)
    assert data["branch"] == loop_branch(loop_id)  # the contract's field keeps its meaning
    assert data["pruned"]["branch"] == loop_branch(loop_id)
    assert data["pruned"]["commit"] == best and data["pruned"]["worktree"] is None


def test_abort_and_a_loop_without_progress_end_with_the_way_back_to_the_branch(
    ralph: RunCli, repo: Path
) -> None:
    """The semver trial: after `ralph abort` the checkout was on the loop's branch and no line
    said so; the final lines of a loop that did no better now end with the switch too."""
    first = run_loop(ralph, repo, "--max-iterations", "1", task="fix add one")
    lines = str(first["_err"]).strip().splitlines()
    drop = next(n for n, line in enumerate(lines) if line.startswith("drop    ralph prune"))
    assert lines[drop + 1] == "switch  git switch main", lines  # then the memory line
    git(repo, "switch", "-q", "main")
    second = str(run_loop(ralph, repo, "--max-iterations", "1", task="fix add two")["loop_id"])
    elsewhere = ralph("abort", str(first["loop_id"]), cwd=repo)  # on the second's branch
    assert elsewhere.code == 0, elsewhere.err
    assert "switch" not in elsewhere.out
    aborted = ralph("abort", second, cwd=repo)
    assert aborted.code == 0, aborted.err
    assert aborted.out.strip().splitlines()[-2:] == [
        f"branch  {loop_branch(second)} is still checked out here",
        "switch  git switch main",
    ]
    git(repo, "switch", "-q", "main")  # the line works as printed


def test_prune_knows_a_force_applied_failed_loop_was_taken(ralph: RunCli, repo: Path) -> None:
    """Applying a failed loop is no verdict on its lessons, yet its work was taken: prune must
    not record it as not taken (a squash leaves no branch holding the loop's commit)."""
    loop_id = str(run_loop(ralph, repo, "--max-iterations", "1")["loop_id"])
    git(repo, "switch", "-q", "main")
    assert ralph("apply", loop_id, "--force", cwd=repo).code == 0
    git(repo, "commit", "-q", "--no-edit")
    result = ralph("prune", cwd=repo)
    assert result.code == 0, result.err
    assert f"removed branch {loop_branch(loop_id)}" in result.out
    assert f"[{loop_id}, failed]" in result.out  # not ", not taken"
    assert read_feedback(MemoryStore(repo), loop_id) is None


def test_prune_keeps_the_most_recent_and_a_checked_out_branch(ralph: RunCli, repo: Path) -> None:
    older = str(run_loop(ralph, repo, task="fix add one")["loop_id"])
    git(repo, "switch", "-q", "main")
    newer = str(run_loop(ralph, repo, task="fix add two")["loop_id"])  # checked out now
    result = ralph("prune", cwd=repo)
    assert f"kept {newer}: {loop_branch(newer)} is checked out" in result.out
    assert f"removed branch {loop_branch(older)}" in result.out
    git(repo, "switch", "-q", "main")
    third = str(run_loop(ralph, repo, task="fix add three")["loop_id"])
    git(repo, "switch", "-q", "main")
    result = ralph("prune", "--keep", "1", "--json", cwd=repo)
    items = {item["loop_id"]: item for item in json.loads(result.out)["loops"]}
    assert items[third]["kept"] == "one of the 1 most recent (--keep)"
    assert items[newer]["kept"] is None
    assert git(repo, "branch", "--list", "ralph/*").strip() == loop_branch(third)


def test_prune_refuses_a_running_loop_and_changes_nothing(ralph: RunCli, repo: Path) -> None:
    loop_id = str(run_loop(ralph, repo)["loop_id"])
    git(repo, "switch", "-q", "main")
    store = MemoryStore(repo)
    state = store.read_state(loop_id)
    state.status = "running"
    store.write_state(state)
    with store.lock(loop_id, repo):
        result = ralph("prune", loop_id, cwd=repo)
        everything = ralph("prune", cwd=repo)
    assert result.code == 2 and f"loop {loop_id} is running" in result.err
    assert everything.out.strip() == "nothing to prune"
    assert git(repo, "branch", "--list", "ralph/*").strip() == loop_branch(loop_id)


def test_prune_removes_a_worktree_loops_worktree(ralph: RunCli, repo: Path) -> None:
    summary = run_loop(ralph, repo, "--worktree")
    state = MemoryStore(repo).read_state(str(summary["loop_id"]))
    assert state.git is not None
    worktree = Path(str(state.git.worktree))
    assert worktree.is_dir()
    assert f"apply   ralph apply {summary['loop_id']}" in str(summary["_err"])  # no switch
    result = ralph("prune", cwd=repo)
    assert result.code == 0, result.err
    assert f"removed worktree {worktree}, branch {summary['branch']}" in result.out
    assert not worktree.exists()
    listed = subprocess.run(
        ["git", "worktree", "list"], cwd=repo, capture_output=True, text=True, check=True
    )
    assert str(worktree) not in listed.stdout
    status = ralph("status", str(summary["loop_id"]), cwd=repo).out
    assert f"  worktree    {worktree} (pruned)" in status and "(pruned, it was at " in status


def test_prune_counts_only_the_users_files_in_a_worktree_not_tools_files(
    ralph: RunCli, repo: Path
) -> None:
    summary = run_loop(ralph, repo, "--worktree")
    state = MemoryStore(repo).read_state(str(summary["loop_id"]))
    assert state.git is not None
    worktree = Path(str(state.git.worktree))
    (worktree / ".coverage").write_text("coverage data")
    (worktree / "helpers").mkdir()
    (worktree / "helpers" / "old.cpython-311.pyc").write_bytes(b"\x00")
    (worktree / "notes.txt").write_text("mine")
    kept = ralph("prune", cwd=repo)
    assert kept.code == 0, kept.err
    assert f"its worktree {worktree} has uncommitted changes (1 file)" in kept.out
    (worktree / "notes.txt").unlink()
    result = ralph("prune", cwd=repo)
    assert result.code == 0, result.err
    assert f"removed worktree {worktree}, branch {summary['branch']}" in result.out
    assert not worktree.exists()


def test_a_cmd_actors_tokens_are_unknown_never_0(ralph: RunCli, repo: Path) -> None:
    summary = run_loop(ralph, repo)
    loop_id = str(summary["loop_id"])
    assert summary["usage"]["tokens_in"] is None  # type: ignore[index]
    record = json.loads(MemoryStore(repo).record_path(loop_id, 1).read_text())
    usage = record["ralph"]["usage"]
    assert "actor_tokens_in" in usage and usage["actor_tokens_in"] is None
    assert usage["actor_tokens_out"] is None
    status = ralph("status", loop_id, cwd=repo)
    assert "usage       tokens unknown, cost unknown" in status.out
    assert f"branch      {summary['branch']} (best commit " in status.out
    analysis = json.loads(ralph("analyze", "--json", cwd=repo).out)
    assert analysis["summary"]["tokens"] is None and analysis["loops"][0]["tokens"] is None
    assert "tokens unknown" in ralph("analyze", cwd=repo).out


def test_a_loop_on_an_old_style_branch_resumes_on_it(ralph: RunCli, repo: Path) -> None:
    """Loops started before the branch names changed keep `ralph/ralph-…`: their state names it."""
    summary = run_loop(ralph, repo, "--max-iterations", "1")
    loop_id = str(summary["loop_id"])
    old = f"ralph/{loop_id}"
    git(repo, "branch", "-m", str(summary["branch"]), old)
    store = MemoryStore(repo)
    state = store.read_state(loop_id)
    assert state.git is not None
    state.git = dataclasses.replace(state.git, branch=old)
    store.write_state(state)
    resumed = ralph("resume", loop_id, "--max-iterations", "3", "--json", cwd=repo)
    assert resumed.code == 0, resumed.err
    assert json.loads(resumed.out)["branch"] == old
    assert git(repo, "branch", "--show-current") == old
    assert subjects(repo, old)[0].startswith(f"ralph({loop_id[-8:]}): iteration 3 — ")


ROLLED_BACK_AGENT = """#!/bin/sh
case "$RALPH_ITERATION" in
  1) printf 'build/\\n' > .gitignore ;;
  *) sed -i 's/a - b/a + b/' calc.py ;;
esac
"""
GUARD = "sh -c 'grep -q pycache .gitignore'"  # passes before the loop; iteration 1 breaks it


def test_apply_prepares_ralphs_commit_message_without_the_reverted_attempt(
    ralph: RunCli, repo: Path
) -> None:
    """Iteration 1 breaks a passing check and is rolled back, 2 fixes add: after apply, `git commit
    --no-edit` commits ralph's message (the task, the loop, what turned green, what was kept),
    not git's "Squashed commit of the following:" list of every commit of the loop branch."""
    agent = repo.parent / "agent.sh"
    agent.write_text(ROLLED_BACK_AGENT)
    summary = run_loop(ralph, repo, "--check", GUARD, task="fix add so it adds")
    assert summary["status"] == "completed", summary["_err"]
    assert "iteration 1: rolled back: broke what worked before" in str(summary["_err"])
    loop_id = str(summary["loop_id"])
    git(repo, "switch", "-q", "main")
    assert ralph("apply", loop_id, cwd=repo).code == 0
    git(repo, "commit", "-q", "--no-edit")
    message = git(repo, "log", "-1", "--format=%B")
    assert message.splitlines()[0] == "fix add so it adds"
    assert f"Loop: {loop_id}, iteration 2, reward 1.00" in message
    assert f"Checks now green: {Path(sys.executable).name}" in message
    # a `cmd:` agent says nothing of its own: its files, not ralph's stand-in sentence
    assert "Iterations kept:\n- iteration 2: changed calc.py" in message
    assert "iteration 1" not in message and "Squashed commit" not in message
    assert "without a summary of its own" not in message


# -- the memory is meant to be committed -----------------------------------------------------------


def test_run_and_apply_say_how_to_commit_the_memory_while_it_is_untracked(
    ralph: RunCli, repo: Path
) -> None:
    """After every run `.aiwg/ralph/reflections/<loop>/` was untracked and no line said that it
    is meant to be committed. The hint commits the records alone, the applied work stays staged;
    once they are committed, or ignored, no hint."""
    from ralph.loop.result import memory_hint

    summary = run_loop(ralph, repo)
    assert f"memory  {HINT}" in str(summary["_err"]).splitlines()
    git(repo, "switch", "-q", "main")
    applied = ralph("apply", str(summary["loop_id"]), cwd=repo)
    assert applied.code == 0, applied.err
    assert f"memory: {HINT}" in applied.out.splitlines()
    subprocess.run(HINT, shell=True, cwd=repo, check=True, capture_output=True)
    assert git(repo, "log", "-1", "--format=%s") == "ralph: reflections"
    assert git(repo, "diff", "--cached", "--name-only") == "calc.py"  # the apply, still staged
    store = MemoryStore(repo)
    assert memory_hint(store) is None  # committed
    git(repo, "restore", "--staged", "--worktree", "calc.py")
    again = run_loop(ralph, repo, "--loop-id", "ralph-second-00000002")
    assert f"memory  {HINT}" in str(again["_err"]).splitlines()
    exclude = Path(git(repo, "rev-parse", "--path-format=absolute", "--git-path", "info/exclude"))
    exclude.write_text(".aiwg/ralph/reflections/\n")
    assert memory_hint(store) is None  # ignored


def test_a_loop_whose_change_is_on_main_already_is_taken_not_not_taken(
    ralph: RunCli, repo: Path
) -> None:
    """The two-bug batch: both loops made the same change; the first's apply took it for both,
    the second's said "nothing to apply", and prune then called the second "not taken"."""
    first = str(run_loop(ralph, repo, task="fix add one")["loop_id"])
    git(repo, "switch", "-q", "main")
    second = str(run_loop(ralph, repo, task="fix add two")["loop_id"])
    git(repo, "switch", "-q", "main")
    assert ralph("apply", first, cwd=repo).code == 0
    git(repo, "commit", "-qm", "the fix")
    again = ralph("apply", second, cwd=repo)
    assert again.code == 0 and "nothing to apply" in again.out

    result = ralph("prune", cwd=repo)
    assert result.code == 0, result.err
    assert "not taken" not in result.out
    store = MemoryStore(repo)
    assert read_feedback(store, second) is None
    acceptance = json.loads(ralph("analyze", "--json", cwd=repo).out)["summary"]["acceptance"]
    assert acceptance["not_taken"] == 0


def test_a_change_cherry_picked_and_then_edited_is_held_by_the_branch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_calc_repo(tmp_path / "repo", calc=CALC, tests="", monkeypatch=monkeypatch)
    base = git(root, "rev-parse", "HEAD").strip()
    git(root, "switch", "-q", "-c", "ralph/loop")
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    git(root, "commit", "-qam", "the loop's fix")
    loop = git(root, "rev-parse", "HEAD").strip()
    git(root, "switch", "-q", "main")
    branches = Branches(root)
    assert not branches.holds_change("main", base, loop)
    (root / "README").write_text("meanwhile on main\n")
    git(root, "add", "README")
    git(root, "commit", "-qm", "meanwhile")
    git(root, "cherry-pick", loop)
    (root / "calc.py").write_text("def add(a, b):\n    return a + b  # checked\n")
    git(root, "commit", "-qam", "edited after")
    assert branches.holds_change("main", base, loop)  # by patch (git cherry), not by content
