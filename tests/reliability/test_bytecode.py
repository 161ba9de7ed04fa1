"""Bytecode never dirties the user's tree nor enters a loop's commits, with Python writing
bytecode as it does for real users (PYTHONDONTWRITEBYTECODE unset). Before: the baseline's
pytest wrote `__pycache__/` into a tree that does not ignore it, then ralph refused to start
over "uncommitted changes" it had made itself and left them behind; an agent's own test runs
wrote bytecode that `git add -A` committed on the loop branch and `ralph apply` brought over."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ralph.actors.command import CommandActor
from ralph.actors.confine import confine
from ralph.config import CheckSpec
from ralph.files import ACTOR_PYCACHE, CHECKS_PYCACHE, PYCACHE_PREFIX
from ralph.ids import loop_branch
from ralph.loop.parity import find_failure
from ralph.sandbox import Policy
from ralph.workspace.branches import Branches
from ralph.workspace.git import Git, GitWorkspace
from ralph.workspace.trees import Trees
from ralph.workspace.worktree import add_worktree, remove_worktree

from ..conftest import RunCli
from ..fakes.calc_project import git

CALC_PYC = f"calc.{sys.implementation.cache_tag}.pyc"
BROKEN = "def add(a, b):\n    return a - b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
# the agent fixes calc.py, then runs Python on it as an agent running the tests would
AGENT = """
import os, subprocess, sys
from pathlib import Path
Path("calc.py").write_text(Path("calc.py").read_text().replace("a - b", "a + b"))
env = dict(os.environ)
if os.environ.get("AGENT_CLEARS_PREFIX"):  # a tool that starts Python with its own env
    env.pop("PYTHONPYCACHEPREFIX", None)
    Path(".coverage").write_text("coverage data")
    Path("vendor/blob.pyc").write_bytes(b"rebuilt")
subprocess.run([sys.executable, "-c", "import calc"], env=env, check=True)
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """calc.py with a bug, its test, a conftest; no `.gitignore`: git sees `__pycache__/`."""
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.delenv(PYCACHE_PREFIX, raising=False)
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "t")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "t@example.invalid")
    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    (root / "vendor").mkdir()
    (root / "calc.py").write_text(BROKEN)
    (root / "tests" / "test_calc.py").write_text(TEST)
    (root / "conftest.py").write_text("")
    (root / "vendor" / "blob.pyc").write_bytes(b"tracked on purpose")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    (tmp_path / "agent.py").write_text(AGENT)
    return root


def run_loop(ralph: RunCli, root: Path) -> str:
    """`ralph run` with the agent and a pytest check; the loop's id."""
    agent = f"cmd:{sys.executable} {root.parent / 'agent.py'}"
    check = f"{sys.executable} -m pytest -q"
    result = ralph(
        "run", "fix add", "-a", agent, "--test", check, "--reflector", "heuristic",
        "--sandbox", "none", "--max-iterations", "2", "--json", cwd=root,
    )  # fmt: skip
    assert result.code == 0, result.err
    return str(json.loads(result.out)["loop_id"])


def bytecode_in_tree(root: Path) -> list[str]:
    """Bytecode files and `__pycache__` folders outside ralph's memory."""
    found = []
    for path in root.rglob("*"):
        rel = path.relative_to(root).as_posix()
        if rel.startswith((".git/", ".aiwg/")) or rel == "vendor/blob.pyc":
            continue
        if path.name == "__pycache__" or path.suffix in (".pyc", ".pyo"):
            found.append(rel)
    return sorted(found)


def cached(root: Path, folder: str, name: str) -> bool:
    return any((root / ".aiwg" / "ralph" / "tmp" / folder).rglob(f"{name}.*.pyc"))


def committed(root: Path, loop_id: str) -> list[str]:
    return git(root, "ls-tree", "-r", "--name-only", loop_branch(loop_id)).split("\n")


def test_checks_write_no_bytecode_into_the_tree_and_the_loop_starts(
    ralph: RunCli, project: Path
) -> None:
    run_loop(ralph, project)
    assert bytecode_in_tree(project) == []
    assert git(project, "status", "--porcelain", "--", ".", ":(exclude).aiwg") == ""
    # Python did write bytecode: in ralph's scratch folder, the test module pytest rewrote too
    assert cached(project, CHECKS_PYCACHE, "calc") and cached(project, CHECKS_PYCACHE, "test_calc")


def test_a_users_own_untracked_pycache_does_not_block_the_start(
    ralph: RunCli, project: Path
) -> None:
    user_run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    subprocess.run(user_run, cwd=project, capture_output=True)
    files = [path for path in bytecode_in_tree(project) if (project / path).is_file()]
    theirs = {path: (project / path).read_bytes() for path in files}
    assert f"__pycache__/{CALC_PYC}" in theirs
    loop_id = run_loop(ralph, project)
    assert not [name for name in committed(project, loop_id) if "__pycache__" in name]
    for path, data in theirs.items():  # never touched
        assert (project / path).read_bytes() == data


def test_an_agents_python_writes_its_bytecode_outside_the_tree(
    ralph: RunCli, project: Path
) -> None:
    run_loop(ralph, project)
    assert bytecode_in_tree(project) == []
    assert cached(project, ACTOR_PYCACHE, "calc")


def test_bytecode_an_agent_writes_into_the_tree_is_never_committed_nor_applied(
    ralph: RunCli, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_CLEARS_PREFIX", "1")
    loop_id = run_loop(ralph, project)
    # it did, and ralph set it aside before the checks (workspace/bytecode.py): kept for a look
    assert bytecode_in_tree(project) == []
    aside = project / ".aiwg/ralph/loops" / loop_id / "001/bytecode/__pycache__" / CALC_PYC
    assert aside.is_file()
    files = committed(project, loop_id)
    assert sorted(files) == ["calc.py", "conftest.py", "tests/test_calc.py", "vendor/blob.pyc"]
    # a tracked tool file is the user's like any other: its change is the agent's work
    blob = git(project, "show", f"{loop_branch(loop_id)}:vendor/blob.pyc")
    assert blob == "rebuilt"
    git(project, "checkout", "-q", "main")
    result = ralph("apply", loop_id, cwd=project)
    assert result.code == 0, result.err
    staged = git(project, "diff", "--cached", "--name-only").split("\n")
    assert staged == ["calc.py", "vendor/blob.pyc"]


def test_untracked_tool_files_stay_out_of_a_tree_without_the_loop_start_record(
    project: Path,
) -> None:
    """A loop started before the tool rules joined its exclude file: staged all the same."""
    (project / "__pycache__").mkdir()
    (project / "__pycache__" / CALC_PYC).write_bytes(b"x")
    (project / ".coverage").write_text("data")
    (project / "new.py").write_text("")
    trees = Trees(Git(project), ".aiwg/ralph", project / ".git" / "index")
    with trees.scratch() as env:
        tree = trees.stage(env)
    names = git(project, "ls-tree", "-r", "--name-only", tree).split("\n")
    assert sorted(names) == [
        "calc.py",
        "conftest.py",
        "new.py",
        "tests/test_calc.py",
        "vendor/blob.pyc",
    ]


def test_a_tracked_tool_file_changed_is_still_the_users_change(project: Path) -> None:
    (project / "__pycache__").mkdir()
    (project / "__pycache__" / CALC_PYC).write_bytes(b"x")
    assert GitWorkspace(project).dirty_files() == []
    (project / "vendor" / "blob.pyc").write_bytes(b"edited")
    assert GitWorkspace(project).dirty_files() == ["vendor/blob.pyc"]


def test_a_sandboxed_agent_may_write_its_bytecode_folder_and_is_told_where(
    tmp_path: Path,
) -> None:
    scratch = tmp_path / ".aiwg" / "ralph" / "tmp"
    scratch.mkdir(parents=True)
    actor = CommandActor("true", base_dir=tmp_path)
    checks = confine(actor, Policy("bwrap", tmp_path, tmp_path, scratch=scratch), {})
    assert actor.sandbox is not None and checks is not None
    assert scratch / ACTOR_PYCACHE in actor.sandbox.writable
    assert (scratch / ACTOR_PYCACHE).is_dir()  # bwrap binds only what exists
    assert PYCACHE_PREFIX in actor.sandbox.keep
    # what the checks load stays theirs: the actor writes no folder but its own
    assert not [
        place for place in actor.sandbox.writable if place.is_relative_to(scratch / CHECKS_PYCACHE)
    ]


def test_the_parity_probe_collects_without_writing_bytecode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worktree that lacks an ignored file of the checkout: both collect, neither tree gets
    bytecode (the worktree's collect wrote it before)."""
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.delenv(PYCACHE_PREFIX, raising=False)
    top, workdir = tmp_path / "checkout", tmp_path / "worktree"
    for root in (top, workdir):
        root.mkdir()
        (root / "test_version.py").write_text("import _version\n\n\ndef test_it():\n    pass\n")
    (top / "_version.py").write_text("VERSION = '1'\n")
    spec = CheckSpec("tests", f"{sys.executable} -m pytest -q", parser="pytest")
    failure = find_failure([spec], top, workdir, dict(os.environ), 120.0)
    assert failure is not None and failure.check == "tests"
    for root in (top, workdir):
        assert bytecode_in_tree(root) == []


def test_a_removed_worktree_leaves_no_bytecode_behind(project: Path) -> None:
    """Bytecode is kept by its source's path: a gone worktree's is removed with it (by a
    loop's own cleanup and by `prune`), the checkout's stays."""
    scratch = project / ".aiwg" / "ralph" / "tmp"
    ours = scratch / CHECKS_PYCACHE / project.resolve().relative_to("/") / CALC_PYC
    ours.parent.mkdir(parents=True)
    ours.write_bytes(b"the checkout's")
    for loop_id, remove in (
        ("ralph-bytecode-loop", lambda path: remove_worktree(path, force=True)),
        ("ralph-bytecode-prune", lambda path: Branches(project).remove_worktree(path)),
    ):
        tree = add_worktree(project, loop_id)
        kept = [
            scratch / name / tree.resolve().relative_to("/")
            for name in (CHECKS_PYCACHE, ACTOR_PYCACHE)
        ]
        for folder in kept:
            folder.mkdir(parents=True)
            (folder / CALC_PYC).write_bytes(b"x")
        remove(tree)
        assert not tree.exists()
        assert not [folder for folder in kept if folder.exists()], loop_id
    assert ours.read_bytes() == b"the checkout's"


def test_an_edit_of_the_same_size_in_the_same_second_is_judged_as_edited(project: Path) -> None:
    """Python trusts bytecode whose recorded source mtime (whole seconds) and size match: a
    fast agent's same-size fix made within the second of the baseline's compile was judged as
    the old code (a worktree test failed so under load). The mtime is set back to the same
    instant here, so the cache would be stale at any speed; the next evaluation forgets it."""
    from ralph.evaluators.suite import CheckSuite

    suite = CheckSuite([CheckSpec("tests", f"{sys.executable} -m pytest -q tests", "pytest")])
    calc = project / "calc.py"
    before = calc.stat().st_mtime_ns
    first = suite.run_checks(project)
    assert first[0].result.status == "fail"
    calc.write_text(BROKEN.replace("a - b", "a + b"))  # the same size
    os.utime(calc, ns=(before, before))
    second = suite.run_checks(project)
    assert second[0].result.status == "pass", [e.message for e in second[0].errors]


def test_a_user_who_wants_no_bytecode_gets_no_prefix(tmp_path: Path) -> None:
    """With PYTHONDONTWRITEBYTECODE nothing is written beside the code, and a prefix would only
    hide the standard library's own bytecode: Python would compile it from source every run."""
    from ralph.files import bytecode_env

    assert bytecode_env(tmp_path, {"PYTHONDONTWRITEBYTECODE": "1"}) == {}
    assert bytecode_env(tmp_path, {PYCACHE_PREFIX: "/elsewhere"}) == {}
    ours = bytecode_env(tmp_path, {})
    assert ours[PYCACHE_PREFIX].endswith(CHECKS_PYCACHE)
