"""gitops: the loop's workspace never loses user work and never commits or resets memory."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ralph.errors import PreflightError, RalphError
from ralph.ids import loop_branch
from ralph.workspace import open_workspace
from ralph.workspace.base import DIFF_CAP, ChangeSet, FileChange
from ralph.workspace.git import GitWorkspace
from ralph.workspace.locate import find_repo_root
from ralph.workspace.snapshot import SnapshotWorkspace

LOOP = "ralph-fix-tests-0123abcd"
A_PY = "def add(a, b):\n    return a - b\n\n\nprint(add(1, 2))\n"
B_PY = "X = 1\nY = 2\n"
IDENTITY = {
    "GIT_AUTHOR_NAME": "Test User",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test User",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}


@pytest.fixture(autouse=True)
def git_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user or system git config leaks in; an identity comes from the environment."""
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "XDG_CONFIG_HOME", "EMAIL"):
        monkeypatch.delenv(var, raising=False)
    for var, value in IDENTITY.items():
        monkeypatch.setenv(var, value)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=Setup", "-c", "user.email=setup@example.com", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(root, "a.py", A_PY)
    write(root, "b.py", B_PY)
    write(root, ".gitignore", "*.log\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    return root


def tracked(repo: Path, rev: str = "HEAD") -> list[str]:
    return git(repo, "ls-tree", "-r", "--name-only", rev).splitlines()


# -- preflight and branch ------------------------------------------------------------------------


def test_dirty_tree_is_refused_naming_the_files(repo: Path) -> None:
    write(repo, "a.py", A_PY + "# edited\n")
    write(repo, "notes.txt", "mine\n")  # untracked: the user's, never a reason to refuse
    with pytest.raises(PreflightError) as caught:
        GitWorkspace(repo).start_loop(LOOP, allow_dirty=False)
    assert "a.py" in caught.value.message and "notes.txt" not in caught.value.message
    assert caught.value.hint is not None and "--allow-dirty" in caught.value.hint
    assert git(repo, "branch", "--show-current") == "main"


def test_dirty_message_names_at_most_ten_files(repo: Path) -> None:
    for n in range(13):
        write(repo, f"new{n:02}.txt", "x\n")
    git(repo, "add", "-A")  # staged: uncommitted changes
    with pytest.raises(PreflightError) as caught:
        GitWorkspace(repo).start_loop(LOOP, allow_dirty=False)
    assert "new09.txt" in caught.value.message and "new10.txt" not in caught.value.message
    assert "(+3 more)" in caught.value.message


def test_fresh_repository_without_commits_is_refused_with_a_hint(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    with pytest.raises(PreflightError) as caught:
        GitWorkspace(tmp_path).start_loop(LOOP, allow_dirty=True)
    assert "no commits" in caught.value.message
    assert caught.value.hint is not None and "commit something first" in caught.value.hint


def test_start_loop_creates_and_checks_out_the_loop_branch(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    state = GitWorkspace(repo).start_loop(LOOP, allow_dirty=False)
    assert state.branch == loop_branch(LOOP)
    assert state.base_commit == head
    assert state.original_branch == "main"
    assert git(repo, "branch", "--show-current") == loop_branch(LOOP)
    # started again while its branch is as it began (a start killed before its state named the
    # branch, then resumed): the loop's own branch is adopted
    assert GitWorkspace(repo).start_loop(LOOP, allow_dirty=False) == state
    git(repo, "commit", "-q", "--allow-empty", "-m", "more on the branch")
    with pytest.raises(PreflightError, match="already exists"):
        GitWorkspace(repo).start_loop(LOOP, allow_dirty=False)


def test_memory_is_never_dirty_and_never_committed(repo: Path) -> None:
    write(repo, ".aiwg/ralph/reflections/old/001.json", "{}\n")
    write(repo, ".aiwg/ralph/config.yaml", "max_iterations: 3\n")
    git(repo, "add", ".aiwg/ralph/config.yaml")  # even what the user staged stays out
    workspace = GitWorkspace(repo)
    assert workspace.dirty_files() == []
    workspace.start_loop(LOOP, allow_dirty=False)
    workspace.begin_iteration()
    write(repo, "a.py", A_PY.replace("a - b", "a + b"))
    write(repo, f".aiwg/ralph/reflections/{LOOP}/001.json", '{"iteration": 1}\n')
    assert [f.path for f in workspace.changes().files] == ["a.py"]
    workspace.commit_iteration(f"ralph: {LOOP} iteration 1 reward 1.00")
    assert tracked(repo) == [".gitignore", "a.py", "b.py"]
    assert (repo / f".aiwg/ralph/reflections/{LOOP}/001.json").read_text() == '{"iteration": 1}\n'
    assert git(repo, "diff", "--cached", "--name-only") == ".aiwg/ralph/config.yaml"


def test_memory_of_a_project_in_a_subdirectory_is_excluded_too(repo: Path) -> None:
    project = repo / "service"
    write(project, "main.py", "print(1)\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "service")
    write(project, ".aiwg/ralph/reflections/x/001.json", "{}\n")
    workspace = open_workspace(project)
    assert isinstance(workspace, GitWorkspace)
    assert workspace.dirty_files() == []
    write(project, "main.py", "print(2)\n")
    workspace.commit_iteration("ralph: sub")
    assert "service/main.py" in tracked(repo)
    assert not [p for p in tracked(repo) if ".aiwg" in p]


# -- commits --------------------------------------------------------------------------------------


def test_an_iteration_with_changes_gets_a_commit_one_without_gets_none(repo: Path) -> None:
    workspace = GitWorkspace(repo)
    workspace.start_loop(LOOP, allow_dirty=False)
    write(repo, "a.py", A_PY.replace("a - b", "a + b"))
    write(repo, "debug.log", "ignored\n")
    first = workspace.commit_iteration(f"ralph: {LOOP} iteration 1 reward 0.62")
    second = workspace.commit_iteration(f"ralph: {LOOP} iteration 2 reward 0.62")  # no change
    assert first and second is None and workspace.current_commit() == first
    log = git(repo, "log", "-2", "--format=%s|%an <%ae>").splitlines()
    assert log[0] == f"ralph: {LOOP} iteration 1 reward 0.62|Test User <test@example.com>"
    assert "debug.log" not in tracked(repo)
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""


def test_commits_work_without_any_git_identity(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in IDENTITY:
        monkeypatch.delenv(var)
    write(repo, "b.py", B_PY + "Z = 3\n")
    sha = GitWorkspace(repo).commit_iteration("ralph: no identity")
    assert git(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>", sha) == (
        "ralph <ralph@localhost>|ralph <ralph@localhost>"
    )


def test_a_configured_identity_is_used(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in IDENTITY:
        monkeypatch.delenv(var)
    git(repo, "config", "user.name", "Ada Lovelace")
    git(repo, "config", "user.email", "ada@example.com")
    write(repo, "b.py", B_PY + "Z = 3\n")
    sha = GitWorkspace(repo).commit_iteration("ralph: configured")
    assert git(repo, "log", "-1", "--format=%an <%ae>", sha) == "Ada Lovelace <ada@example.com>"


# -- changes --------------------------------------------------------------------------------------


def test_changes_report_each_kind_with_exact_counts(repo: Path) -> None:
    workspace = GitWorkspace(repo)
    workspace.begin_iteration()
    write(repo, "a.py", A_PY.replace("a - b", "a + b") + "\n\nprint(add(2, 2))\n")
    write(repo, "pkg/new.py", "one\ntwo\nthree\nfour\n")
    (repo / "b.py").unlink()
    (repo / "blob.bin").write_bytes(b"\x00\x01\x02binary")
    write(repo, "run.log", "ignored\n")
    write(repo, ".aiwg/ralph/loops/x/state.json", "{}\n")
    changes = workspace.changes()
    got = {f.path: (f.kind, f.additions, f.deletions) for f in changes.files}
    assert got == {
        "a.py": ("modified", 4, 1),
        "b.py": ("deleted", 0, 2),
        "blob.bin": ("created", 0, 0),
        "pkg/new.py": ("created", 4, 0),
    }
    by_path = {f.path: f for f in changes.files}
    assert "+    return a + b" in by_path["a.py"].diff
    assert "-    return a - b" in by_path["a.py"].diff
    assert by_path["blob.bin"].diff == "binary file"
    total = changes.total()
    assert (total.files_changed, total.lines_added, total.lines_deleted) == (4, 8, 3)
    assert changes.summary() == "4 files changed, +8 -3: a.py, b.py, blob.bin, pkg/new.py"
    actions = changes.actions()
    assert [a.type for a in actions] == [
        "code_modification",
        "file_deletion",
        "file_creation",
        "file_creation",
    ]
    assert actions[0].changes is not None and actions[0].changes.additions == 4
    # the user's own index is untouched: nothing staged, new files still untracked
    assert git(repo, "diff", "--cached", "--name-only") == ""
    assert "?? pkg/" in git(repo, "status", "--porcelain")


def test_a_same_size_edit_as_new_as_the_index_is_seen(repo: Path) -> None:
    """git trusts an entry's stat (in whole seconds) unless the entry is as new as the index
    file ("racy git"). The scratch copy of the index got a fresh mtime, so an edit of the same
    size in the second of a checkout went unseen: a resumed attempt was recorded as no change.
    Timestamps are set back here instead of waited for; ctime cannot be, so it is not trusted."""
    git(repo, "config", "core.trustctime", "false")
    past = (repo / "b.py").stat().st_mtime_ns - 10_000_000_000
    os.utime(repo / "b.py", ns=(past, past))
    git(repo, "update-index", "-q", "--refresh")  # the entry holds `past`; not racy yet
    workspace = GitWorkspace(repo)
    workspace.begin_iteration()
    write(repo, "b.py", B_PY.replace("1", "3"))  # the same size, the same inode
    os.utime(repo / "b.py", ns=(past, past))
    os.utime(repo / ".git" / "index", ns=(past, past))  # the index written in that second too
    assert [f.path for f in workspace.changes().files] == ["b.py"]


def test_changes_are_relative_to_the_start_of_the_iteration(repo: Path) -> None:
    write(repo, "notes.txt", "the user's own notes\n")
    write(repo, "b.py", B_PY + "USER = True\n")
    workspace = GitWorkspace(repo)
    workspace.start_loop(LOOP, allow_dirty=True)
    workspace.begin_iteration()
    assert workspace.changes().files == []
    write(repo, "a.py", "print('fixed')\n")
    assert [f.path for f in workspace.changes().files] == ["a.py"]
    assert (repo / "notes.txt").read_text() == "the user's own notes\n"


def test_actions_cap_long_diffs_and_redact_secrets() -> None:
    secret = "sk-" + "A" * 40
    change = FileChange("big.py", "created", 5000, 0, f"+KEY = '{secret}'\n" + "+x\n" * 5000)
    action = ChangeSet([change]).actions()[0]
    assert action.changes is not None and action.changes.diff is not None
    assert len(action.changes.diff) < DIFF_CAP + 100
    assert "diff truncated" in action.changes.diff
    assert secret not in action.changes.diff
    assert ChangeSet([]).summary() == "no changes"


# -- rollback and rescue --------------------------------------------------------------------------


def test_restore_brings_back_an_earlier_iteration_and_keeps_memory(repo: Path) -> None:
    workspace = GitWorkspace(repo)
    workspace.start_loop(LOOP, allow_dirty=False)
    write(repo, "a.py", "VERSION = 1\n")
    good = workspace.commit_iteration(f"ralph: {LOOP} iteration 1 reward 0.90")
    write(repo, "a.py", "VERSION = 2\n")
    write(repo, "lib/extra.py", "added later\n")
    (repo / "b.py").unlink()
    workspace.commit_iteration(f"ralph: {LOOP} iteration 2 reward 0.40")
    write(repo, f".aiwg/ralph/reflections/{LOOP}/002.json", "{}\n")
    write(repo, "cache.log", "ignored user file\n")

    workspace.restore(good)

    assert (repo / "a.py").read_text() == "VERSION = 1\n"
    assert (repo / "b.py").read_text() == B_PY
    assert not (repo / "lib").exists()
    assert (repo / f".aiwg/ralph/reflections/{LOOP}/002.json").read_text() == "{}\n"
    assert (repo / "cache.log").read_text() == "ignored user file\n"
    third = workspace.commit_iteration(f"ralph: {LOOP} iteration 3 reward 0.90")
    assert git(repo, "rev-parse", f"{third}^{{tree}}") == git(repo, "rev-parse", f"{good}^{{tree}}")


def test_restore_to_the_start_keeps_the_users_uncommitted_work(repo: Path) -> None:
    write(repo, "notes.txt", "the user's own notes\n")
    write(repo, "b.py", B_PY + "USER = True\n")
    workspace = GitWorkspace(repo)
    state = workspace.start_loop(LOOP, allow_dirty=True)
    assert state.base_commit != state.original_commit
    write(repo, "b.py", "changed by the agent\n")
    write(repo, "agent.py", "made by the agent\n")
    workspace.commit_iteration(f"ralph: {LOOP} iteration 1 reward 0.10")

    workspace.restore(state.base_commit)

    assert (repo / "notes.txt").read_text() == "the user's own notes\n"
    assert (repo / "b.py").read_text() == B_PY + "USER = True\n"
    assert not (repo / "agent.py").exists()


def test_the_users_work_stays_saved_when_their_branch_moved_and_the_note_brings_it_back(
    repo: Path,
) -> None:
    """Where the loop cannot give the work back itself (the user's branch moved meanwhile), its
    end says where the work is and the one command that brings it back; that command works."""
    write(repo, "notes.txt", "the user's own notes\n")
    write(repo, "b.py", B_PY + "USER = True\n")
    workspace = GitWorkspace(repo)
    state = workspace.start_loop(LOOP, allow_dirty=True)
    write(repo, "agent.py", "made by the agent\n")
    workspace.commit_iteration(f"ralph: {LOOP} iteration 1 reward 0.10")
    moved = git(repo, "commit-tree", f"{state.original_commit}^{{tree}}", "-p",
                str(state.original_commit), "-m", "elsewhere")  # fmt: skip
    git(repo, "update-ref", "refs/heads/main", moved)
    given = workspace.end_loop(state)
    assert given is not None and not given.restored
    assert git(repo, "symbolic-ref", "--short", "HEAD") == loop_branch(LOOP)  # nothing moved
    command = given.note.split("to get them back: ")[1]
    assert command == f"git switch main && git stash apply --index {state.user_changes[:12]}"
    subprocess.run(command, shell=True, cwd=repo, check=True, capture_output=True)
    assert (repo / "notes.txt").read_text() == "the user's own notes\n"
    assert (repo / "b.py").read_text() == B_PY + "USER = True\n"
    assert not (repo / "agent.py").exists()


def test_restore_refuses_to_overwrite_uncommitted_changes(repo: Path) -> None:
    workspace = GitWorkspace(repo)
    base = workspace.start_loop(LOOP, allow_dirty=False).base_commit
    write(repo, "a.py", "unsaved\n")
    with pytest.raises(RalphError, match="uncommitted"):
        workspace.restore(base)
    assert (repo / "a.py").read_text() == "unsaved\n"


def test_rescue_saves_leftovers_on_a_ref_and_clears_only_them(repo: Path) -> None:
    workspace = GitWorkspace(repo)
    workspace.start_loop(LOOP, allow_dirty=False)
    workspace.commit_iteration(f"ralph: {LOOP} iteration 1 reward 0.50")  # nothing: no commit
    head = workspace.current_commit()
    write(repo, "a.py", "half-done edit\n")
    write(repo, "wip/new.py", "unfinished\n")
    (repo / "b.py").unlink()
    write(repo, "trace.log", "ignored\n")
    write(repo, f".aiwg/ralph/loops/{LOOP}/002/actor.log", "partial log\n")

    ref = workspace.rescue(LOOP, 2)

    assert ref == f"refs/ralph/rescue/{LOOP}/2"
    assert sorted(tracked(repo, ref)) == [".gitignore", "a.py", "wip/new.py"]
    assert git(repo, "show", f"{ref}:a.py") == "half-done edit"
    assert git(repo, "rev-parse", f"{ref}^") == head
    assert (repo / "a.py").read_text() == A_PY
    assert (repo / "b.py").read_text() == B_PY
    assert not (repo / "wip").exists()
    assert (repo / "trace.log").read_text() == "ignored\n"
    assert (repo / f".aiwg/ralph/loops/{LOOP}/002/actor.log").read_text() == "partial log\n"
    assert workspace.dirty_files() == [] and workspace.current_commit() == head
    assert workspace.rescue(LOOP, 2) is None

    write(repo, "a.py", "second crash\n")
    first = git(repo, "rev-parse", ref)
    assert workspace.rescue(LOOP, 2) == ref
    assert git(repo, "rev-parse", f"{ref}^2") == first  # an earlier rescue is never dropped


def test_resume_checks_out_the_loop_branch_and_keeps_memory_bytes(repo: Path) -> None:
    workspace = GitWorkspace(repo)
    state = workspace.start_loop(LOOP, allow_dirty=False)
    write(repo, "a.py", "loop work\n")
    state = state.committed(1, workspace.commit_iteration(f"ralph: {LOOP} iteration 1 reward 0.50"))
    git(repo, "checkout", "-q", "main")
    write(repo, ".aiwg/ralph/reflections/other/001.json", '{"kept": true}\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "user commits memory on main")

    assert GitWorkspace(repo).resume_loop(state, LOOP, 1) == []

    assert git(repo, "branch", "--show-current") == state.branch
    assert (repo / "a.py").read_text() == "loop work\n"
    memory = repo / ".aiwg/ralph/reflections/other/001.json"
    assert memory.read_text() == '{"kept": true}\n'


def test_resume_refuses_to_switch_over_uncommitted_changes(repo: Path) -> None:
    workspace = GitWorkspace(repo)
    state = workspace.start_loop(LOOP, allow_dirty=False)
    git(repo, "checkout", "-q", "main")
    write(repo, "b.py", "user edit on main\n")
    with pytest.raises(PreflightError, match=r"b\.py"):
        workspace.resume_loop(state, LOOP, 0)
    assert git(repo, "branch", "--show-current") == "main"


# -- without git ----------------------------------------------------------------------------------


def test_open_workspace_picks_git_or_a_snapshot(repo: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert find_repo_root(repo / "a.py") == repo.resolve()
    assert find_repo_root(plain) is None
    assert isinstance(open_workspace(repo), GitWorkspace)
    assert isinstance(open_workspace(repo, use_git=False), SnapshotWorkspace)
    assert isinstance(open_workspace(plain), SnapshotWorkspace)


def test_snapshot_workspace_detects_the_three_kinds_of_change(tmp_path: Path) -> None:
    write(tmp_path, "a.py", A_PY)
    write(tmp_path, "b.py", B_PY)
    write(tmp_path, "same.txt", "aaaa\n")
    workspace = SnapshotWorkspace(tmp_path)
    workspace.begin_iteration()
    write(tmp_path, "a.py", A_PY.replace("a - b", "a + b"))
    write(tmp_path, "new/c.py", "one\ntwo\n")
    (tmp_path / "b.py").unlink()
    write(tmp_path, "same.txt", "bbbb\n")  # same size, same instant: still noticed
    (tmp_path / "img.bin").write_bytes(b"\x89PNG\x00\x00")
    for skipped in ("__pycache__/a.cpython-311.pyc", ".aiwg/ralph/x.json", "node_modules/m.js"):
        write(tmp_path, skipped, "ignored\n")
    write(tmp_path, "stray.pyc", "ignored\n")

    got = {f.path: (f.kind, f.additions, f.deletions) for f in workspace.changes().files}

    assert got == {
        "a.py": ("modified", 1, 1),
        "b.py": ("deleted", 0, 2),
        "img.bin": ("created", 0, 0),
        "new/c.py": ("created", 2, 0),
        "same.txt": ("modified", 1, 1),
    }
    diffs = {f.path: f.diff for f in workspace.changes().files}
    assert "+    return a + b" in diffs["a.py"] and diffs["img.bin"] == "binary file"
    assert workspace.commit_iteration("no git") is None and workspace.current_commit() is None
    with pytest.raises(RalphError, match="rollback needs git"):
        workspace.restore("abc")
    workspace.begin_iteration()
    assert workspace.changes().files == []


def test_a_worktrees_moved_file_is_two_whole_paths_for_prune(repo: Path) -> None:
    """A staged rename is one `-z` entry plus the old path with no status prefix; cutting three
    characters off that path named a file that does not exist and miscounted the changes."""
    from ralph.workspace.branches import Branches

    tree = repo.parent / "loop-tree"
    git(repo, "worktree", "add", "-q", "-b", LOOP, str(tree))
    git(tree, "mv", "b.py", "moved_b.py")
    write(tree, "notes.txt", "mine\n")

    changes = Branches(repo).worktree_changes(tree)

    assert sorted(changes) == ["b.py", "moved_b.py", "notes.txt"]
